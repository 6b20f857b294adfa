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


def test_os_dcgm_and_torch_under_their_names(tmp_path):
    text = "os=Ubuntu 22.04.5 LTS\ndatacenter-gpu-manager-4-core=1:4.2.3-1\ntorch=2.5.1+cu124\n"
    assert parse_versions(text) == {
        "os": "Ubuntu 22.04.5 LTS",
        "dcgm": "1:4.2.3-1",
        "torch": "2.5.1+cu124",
    }
    site = tmp_path / "usr/local/lib/python3.11/dist-packages"
    (site / "torch-2.5.1+cu124.dist-info").mkdir(parents=True)
    command = versions_command().replace(
        "/usr/local/lib/python3*/dist-packages", f"{tmp_path}/usr/local/lib/python3*/dist-packages"
    )
    out = subprocess.run(["sh", "-c", command], capture_output=True, text=True)
    assert parse_versions(out.stdout)["torch"] == "2.5.1+cu124"  # read by name: no python started
