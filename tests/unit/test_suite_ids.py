"""The shipped suites' test ids and JUnit classnames are the same whatever the folder pytest
runs in, wherever the inventory lives and wherever the package is installed."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest

pytest_plugins = ["pytester"]

INVENTORY = """\
cluster: {name: unit-cluster, region: cn-test}
ssh: {connect_timeout_s: 1, connect_retries: 1}
nodes:
  - {name: "gpu-[1-2]", host: "198.18.0.[201-202]"}
"""
MTU_ID = "pytest_hpcnet/suites/test_mtu.py::test_interface_mtu_is_expected[gpu-1]"


def collected(pytester: pytest.Pytester, *args: str) -> list[str]:
    result = pytester.runpytest("--collect-only", "-q", "-p", "no:cacheprovider", *args)
    assert result.ret == 0, result.stdout.str()
    return [line for line in result.stdout.lines if "::" in line]


@pytest.mark.parametrize("where", ["here", "elsewhere"])
def test_ids_do_not_carry_the_install_path_nor_move_with_the_inventory(pytester, where):
    """pytest reads the inventory's path as a test path when it picks its rootdir (its
    options are unknown then): an inventory in another folder moves the rootdir."""
    folder = pytester.mkdir("inv") if where == "elsewhere" else pytester.path
    (folder / "inv.yaml").write_text(INVENTORY)
    work = pytester.mkdir("work")
    run_in = work if where == "elsewhere" else pytester.path
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(run_in)
        ids = collected(pytester, "--hpcnet-inventory", str(folder / "inv.yaml"))
    assert MTU_ID in ids
    assert all(i.startswith("pytest_hpcnet/suites/test_") for i in ids), ids[:3]


def test_pyargs_gives_the_same_ids(pytester):
    pytester.makefile(".yaml", inv=INVENTORY)
    ids = collected(pytester, "--hpcnet-inventory", "inv.yaml", "--pyargs", "pytest_hpcnet.suites")
    assert MTU_ID in ids


def test_junit_classname_is_the_suite_module(pytester):
    """A skipped `[none]` item needs no connection and still lands in junit.xml."""
    (pytester.mkdir("inv") / "inv.yaml").write_text(INVENTORY)
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(pytester.mkdir("work"))
        pytester.runpytest(
            "--hpcnet-inventory",
            str(pytester.path / "inv" / "inv.yaml"),
            "-p",
            "no:cacheprovider",
            "-k",
            "test_listed_flows_enforced_by_control_plane",
            "--junitxml=junit.xml",
        )
        tree = ET.parse("junit.xml")
    names = {case.get("classname") for case in tree.iter("testcase")}
    assert names == {"pytest_hpcnet.suites.test_cloud_audit"}
