"""The erdma version where `/sys/module/erdma/version` is absent (the public driver source
sets no MODULE_VERSION): modinfo, else the installed package; "not reported" fails only
where the inventory pins a version."""

from __future__ import annotations

import os
import stat
import subprocess

from pytest_hpcnet.inventory.expectations import Expectations
from pytest_hpcnet.probes.erdma import erdma_driver_command, parse_erdma_driver
from pytest_hpcnet.requirements.erdma import judge_erdma_driver


def _run(tmp_path, tools: dict[str, str]) -> str:
    """The driver command over a sysfs tree without `module/erdma/version`, with fake
    `modinfo`, `dpkg-query`, `rpm` (each prints its text; `!text`: prints it and fails;
    absent: fails silently)."""
    (tmp_path / "sys/module/erdma/parameters").mkdir(parents=True)
    (tmp_path / "sys/module/erdma/parameters/compat_mode").write_text("Y\n")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name in ("modinfo", "dpkg-query", "rpm"):
        text = tools.get(name)
        body = f"printf '%s' '{(text or '').lstrip('!')}'" if text is not None else "exit 1"
        if text and text.startswith("!"):
            body += "; exit 1"
        tool = bin_dir / name
        tool.write_text(f"#!/bin/sh\n{body}\n")
        tool.chmod(tool.stat().st_mode | stat.S_IXUSR)
    env = {**os.environ, "PATH": f"{bin_dir}:/usr/bin:/bin", "HPCNET_SYSFS": str(tmp_path / "sys")}
    command = erdma_driver_command(None, None)
    return subprocess.run(["sh", "-c", command], capture_output=True, text=True, env=env).stdout


def test_version_from_modinfo_when_sysfs_has_none(tmp_path):
    d = parse_erdma_driver(_run(tmp_path, {"modinfo": "0.2.37"}))
    assert (d.version, d.version_source) == ("0.2.37", "modinfo")


def test_version_from_the_package_when_modinfo_prints_none(tmp_path):
    d = parse_erdma_driver(_run(tmp_path, {"modinfo": "", "dpkg-query": "0.2.39-1"}))
    assert (d.version, d.version_source) == ("0.2.39-1", "package")


def test_rpm_saying_not_installed_is_no_version(tmp_path):
    d = parse_erdma_driver(
        _run(tmp_path, {"modinfo": "", "rpm": "!package erdma is not installed"})
    )
    assert (d.version, d.version_source) == (None, None)


def test_version_not_reported_fails_only_when_pinned():
    text = "module=loaded\nversion=\nversion_source=none\ncompat_mode=Y\n"
    driver = parse_erdma_driver(text)
    ok = judge_erdma_driver("n1", driver, Expectations())
    assert ok and "version not reported" in ok.reason
    pinned = judge_erdma_driver("n1", driver, Expectations(erdma={"driver_version": "0.2.37"}))
    assert not pinned and "erdma version not reported" in pinned.reason
    assert "0.2.37 pinned" in pinned.reason
    other = parse_erdma_driver("module=loaded\nversion=0.2.35\nversion_source=modinfo\n")
    wrong = judge_erdma_driver("n1", other, Expectations(erdma={"driver_version": "0.2.37"}))
    assert not wrong and "erdma 0.2.35 (modinfo), 0.2.37 pinned" in wrong.reason
