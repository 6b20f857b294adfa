"""The facts script and the lab's tools are derived, not listed: a section is gathered because
a registered requirement reads it and its probe declares its command; a lab tool is installed
because its file is in `lab/tools/`."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from pytest_hpcnet.campaigns.fact_sections import SECTIONS, gathering_sections, sections_read
from pytest_hpcnet.lab.emulation import TOOLS_DIR, lab_tools, shared_modules, tool_commands
from pytest_hpcnet.probes.gpu import GPU_QUERY
from pytest_hpcnet.probes.sections import Section, always
from pytest_hpcnet.requirements.registry import REQUIREMENTS, Requirement


def test_the_facts_gather_exactly_the_sections_the_registry_reads():
    read = {name for r in REQUIREMENTS for name in r.sections}
    assert [s.name for s in SECTIONS] == list(
        dict.fromkeys(n for r in REQUIREMENTS for n in r.sections)
    )
    assert {s.name for s in SECTIONS} == read
    assert all(s.build is not None for s in SECTIONS)


def test_a_section_is_gathered_from_its_probes_declaration():
    assert gathering_sections()[GPU_QUERY.name] is GPU_QUERY


def test_a_section_no_probe_gathers_is_named():
    requirement = Requirement(
        id="x", title="x", expects=(), marker="static", sections=("hostname", "nowhere")
    )
    with pytest.raises(ValueError, match="nowhere"):
        sections_read([requirement], gathering_sections())


def test_the_registry_order_decides_the_script_order_and_each_runs_once():
    one = Section("one", str, build=always("true"))
    two = Section("two", str, build=always("false"))
    first = Requirement(id="a", title="a", expects=(), marker="static", sections=("two", "one"))
    second = Requirement(id="b", title="b", expects=(), marker="static", sections=("one",))
    assert sections_read([first, second], {"one": one, "two": two}) == (two, one)


def test_a_tool_installs_as_its_declared_commands_or_its_stem(tmp_path: Path):
    declared = tmp_path / "many.py"
    declared.write_text('"""doc"""\nimport sys\n\nCOMMANDS = ("a-b", "c")\n')
    plain = tmp_path / "ib_write_bw.py"
    plain.write_text("import sys\n")
    assert tool_commands(declared) == ("a-b", "c")
    assert tool_commands(plain) == ("ib_write_bw",)


def test_every_tool_file_is_installed_and_no_command_twice():
    tools = lab_tools()
    files = {p.name for p in TOOLS_DIR.glob("*.py") if not p.name.startswith("hpcnet_lab_")}
    assert set(tools.values()) == files
    assert tools["nvidia-smi"] == "nvidia_smi.py"
    assert tools["alltoall_perf"] == "all_reduce_perf.py"
    commands = [c for f in sorted(files) for c in tool_commands(TOOLS_DIR / f)]
    assert len(commands) == len(set(commands))
    assert "hpcnet_lab_gpu.py" in shared_modules()
    assert "hpcnet_lab_torch.py" not in shared_modules()


def _section_literals(path: Path) -> list[str]:
    """Section names written as strings where a judge or the registry names what it read:
    a `sections=` argument, a `"sections":` entry, a `sections = ...` assignment, or
    `.with_sections(...)`."""
    names = {s.name for s in SECTIONS}
    tree = ast.parse(path.read_text())
    holders: list[ast.AST] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.keyword) and node.arg == "sections":
            holders.append(node.value)
        elif isinstance(node, ast.Dict):
            holders += [
                v for k, v in zip(node.keys, node.values, strict=True) if _is(k, "sections")
            ]
        elif isinstance(node, ast.Assign) and any(_named(t, "sections") for t in node.targets):
            holders.append(node.value)
        elif isinstance(node, ast.Call) and _named(node.func, "with_sections"):
            holders += node.args
    return [
        f"{path.name}:{c.lineno} {c.value!r}"
        for holder in holders
        for c in ast.walk(holder)
        if isinstance(c, ast.Constant) and c.value in names
    ]


def _is(node: ast.AST | None, value: str) -> bool:
    return isinstance(node, ast.Constant) and node.value == value


def _named(node: ast.AST, name: str) -> bool:
    return (isinstance(node, ast.Name) and node.id.lower() == name) or (
        isinstance(node, ast.Attribute) and node.attr == name
    )


def test_no_section_name_is_spelled_outside_its_probe():
    package = Path(__file__).resolve().parents[2] / "pytest_hpcnet"
    files = [*package.glob("requirements/*.py"), *package.glob("suites/*.py")]
    found = [hit for path in sorted(files) for hit in _section_literals(path)]
    assert not found, "name the probe's Section constant instead:\n" + "\n".join(found)


def test_a_spelled_section_name_is_found(tmp_path: Path):
    judge = tmp_path / "judge.py"
    judge.write_text('v = passing(sections=("gpu_klog",))\nkw = {"sections": ("sysctl",)}\n')
    assert len(_section_literals(judge)) == 2
