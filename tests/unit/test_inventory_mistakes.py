"""Inventory mistakes that used to pass silently, and the node ranges operators write every
day (Slurm hostlists, Ansible ranges): each either loads as meant or is refused in one line
per problem, before any connection."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from pytest_hpcnet.inventory.loader import InventoryError, expand_range, load_inventory

pytest_plugins = ["pytester"]

HEAD = "cluster: {name: c, region: r}\nnodes:\n"


def write(tmp_path: Path, text: str, name: str = "inv.yaml") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


def refused(path: Path) -> list[str]:
    with pytest.raises(InventoryError) as info:
        load_inventory(path)
    lines = str(info.value).splitlines()
    assert lines and all(line.startswith(f"{path}: ") for line in lines), lines
    return lines


def test_ansible_host_range_in_a_variable_is_refused(tmp_path):
    """Ansible expands ranges in host patterns, never in variables: four nodes would share
    the literal, unreachable host `198.18.0.20[0:3]`."""
    path = write(tmp_path, "[gpu]\ngpu[0:3] ansible_host=198.18.0.20[0:3]\n", "hosts.ini")
    (line,) = refused(path)
    assert "line 2: ansible_host '198.18.0.20[0:3]'" in line
    assert "range" in line


def test_a_host_left_with_brackets_is_refused(tmp_path):
    path = write(tmp_path, HEAD + "  - {name: n1, host: '10.0.0.[1:x]'}\n")
    (line,) = refused(path)
    assert "nodes[0].host" in line


def test_duplicate_hosts_are_refused_naming_both_nodes(tmp_path):
    nodes = "  - {name: a1, host: 10.0.0.1}\n  - {name: b7, host: 10.0.0.1}\n"
    path = write(tmp_path, HEAD + nodes)
    (line,) = refused(path)
    assert "'a1' and 'b7'" in line and "10.0.0.1" in line


def test_same_host_on_other_ports_or_jump_hosts_is_fine(tmp_path):
    text = HEAD + (
        "  - {name: a1, host: 10.0.0.1, ssh: {port: 2201}}\n"
        "  - {name: a2, host: 10.0.0.1, ssh: {port: 2202}}\n"
        "  - {name: b1, host: 10.0.0.1, ssh: {port: 2201, jump_host: bastion-b}}\n"
    )
    assert len(load_inventory(write(tmp_path, text)).nodes) == 3


@pytest.mark.parametrize(
    ("pattern", "expanded"),
    [
        ("gpu-[001-004,010]", ["gpu-001", "gpu-002", "gpu-003", "gpu-004", "gpu-010"]),
        ("gpu[01:03]", ["gpu01", "gpu02", "gpu03"]),
        ("gpu[1:5:2]", ["gpu1", "gpu3", "gpu5"]),
        ("r[1-2]-g[1,3]", ["r1-g1", "r1-g3", "r2-g1", "r2-g3"]),
        ("gpu-[7]", ["gpu-7"]),
        ("gpu-[001-003]", ["gpu-001", "gpu-002", "gpu-003"]),
    ],
)
def test_slurm_hostlists_and_ansible_ranges_expand(pattern, expanded):
    assert expand_range(pattern) == expanded


def test_hostlists_load_in_names_and_hosts(tmp_path):
    text = HEAD + (
        "  - {name: 'gpu-[001-002,010]', host: '10.0.0.[11-12,20]'}\n"
        "  - {name: 'cpu[01:02]', host: '10.0.1.[1:2]'}\n"
    )
    nodes = load_inventory(write(tmp_path, text)).nodes
    assert [(n.name, n.host) for n in nodes] == [
        ("gpu-001", "10.0.0.11"),
        ("gpu-002", "10.0.0.12"),
        ("gpu-010", "10.0.0.20"),
        ("cpu01", "10.0.1.1"),
        ("cpu02", "10.0.1.2"),
    ]


@pytest.mark.parametrize(
    ("name", "problem"),
    [
        ("gpu-[3-1]", "below its start"),
        ("gpu-[1-2,x]", "not a number"),
        ("gpu-[]", "empty range"),
        ("gpu-[1:4:0]", "step"),
        ("r[1-5000]-g[1-5000]", "more than 10000 nodes"),
    ],
)
def test_bad_ranges_are_one_line(tmp_path, name, problem):
    (line,) = refused(write(tmp_path, HEAD + f"  - {{name: '{name}', host: '{{name}}.x'}}\n"))
    assert "nodes[0].name" in line and problem in line


def test_every_problem_is_shown_one_line_each(tmp_path):
    text = "cluster: {name: c, region: r}\nssh: {usr: root, port: x}\nexpect: {mut: 1}\n"
    text += "nodes:\n  - {name: n1}\n"
    lines = refused(write(tmp_path, text))
    assert len(lines) == 3, lines
    joined = "\n".join(lines)
    assert "ssh.usr: unknown key (did you mean 'user'?)" in joined
    assert "ssh.port" in joined and "expect.mut" in joined
    assert "more problem" not in joined


INVENTORY = "cluster: {name: u, region: r}\nnodes:\n  - {name: n1, host: 198.18.0.201}\n"


def test_ini_inventory_is_relative_to_the_ini_file(pytester: pytest.Pytester):
    project = pytester.mkdir("project")
    (project / "inv.yaml").write_text(INVENTORY)
    (project / "pytest.ini").write_text("[pytest]\nhpcnet_inventory = inv.yaml\n")
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(pytester.mkdir("elsewhere"))
        result = pytester.runpytest(
            "-c", str(project / "pytest.ini"), "--collect-only", "-q", "-p", "no:cacheprovider"
        )
    assert result.ret == 0, result.stdout.str() + result.stderr.str()
    result.stdout.fnmatch_lines(["*test_mtu.py::test_interface_mtu_is_expected[[]n1]"])


def test_metrics_into_a_missing_folder_is_refused(pytester: pytest.Pytester):
    pytester.makefile(".yaml", inv=INVENTORY)
    result = pytester.runpytest(
        "--hpcnet-inventory", "inv.yaml", "--hpcnet-metrics", "nowhere/hpcnet.prom"
    )
    assert result.ret == 4
    result.stderr.fnmatch_lines(["ERROR: --hpcnet-metrics nowhere/hpcnet.prom: *no such folder*"])
    assert not (pytester.path / "nowhere").exists()
    assert not (pytester.path / "reports").exists()
