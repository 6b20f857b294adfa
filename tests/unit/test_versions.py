"""Tool versions from the package database."""

from __future__ import annotations

import subprocess

from pytest_hpcnet.probes.versions import parse_versions, versions_command


def test_parse_versions_keeps_name_version_lines_only():
    text = "kernel=6.18.44\nerdma=0.2.36\nfio=3.33-3\nopenmpi-bin=\nnoise line\n"
    assert parse_versions(text) == {"kernel": "6.18.44", "erdma": "0.2.36", "fio": "3.33-3"}


def test_command_runs_here_and_reports_the_kernel():
    out = subprocess.run(["sh", "-c", versions_command()], capture_output=True, text=True)
    assert out.returncode == 0
    kernel = subprocess.run(["uname", "-r"], capture_output=True, text=True).stdout.strip()
    assert parse_versions(out.stdout)["kernel"] == kernel
