"""The package's imports follow ARCHITECTURE.md's layers and form no cycle.

Every import of every module counts, wherever it is written: at the top, inside a function
(a deferred import runs as soon as the function does) and under `if TYPE_CHECKING:` (the type
checker follows it, and a type that names an upper layer leaks that layer just the same).
Importing `a.b.c` runs the packages `a` and `a.b` first, so each import also reaches its
parent packages.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

PACKAGE = "pytest_hpcnet"
ROOT = Path(__file__).resolve().parents[2] / PACKAGE

LADDER: tuple[tuple[str, frozenset[str]], ...] = (
    ("base", frozenset({"", "redact"})),
    ("inventory", frozenset({"inventory"})),
    ("transport", frozenset({"transport"})),
    ("probes", frozenset({"probes"})),
    ("requirements", frozenset({"requirements"})),
    ("campaigns", frozenset({"campaigns"})),
    ("cloud", frozenset({"cloud"})),
    ("report", frozenset({"report"})),
    ("gate", frozenset({"gate"})),
    ("suites", frozenset({"suites"})),
    ("entry points", frozenset({"plugin", "session", "run_scope", "xdist_schedule", "cli"})),
)
"""The layers, lowest first, each with its parts: a part is a top-level module or a
subpackage of `pytest_hpcnet` ("" is the package's own `__init__`). A part may import its own
layer and every layer listed before it, never one listed after it."""

LAB = "lab"
"""The lab stands beside the ladder: it may import any layer below the entry points, and only
`cli` imports it, inside the `lab` verb (never at start-up)."""
LAB_VERB = ("cli", "lab_verb")
"""The module and function that alone import the lab."""

MAY_IMPORT: dict[str, frozenset[str]] = {
    part: frozenset().union(*(parts for _, parts in LADDER[: rank + 1]))
    for rank, (_, parts) in enumerate(LADDER)
    for part in parts
}
MAY_IMPORT[LAB] = MAY_IMPORT["suites"] | {LAB}
MAY_IMPORT["cli"] = MAY_IMPORT["cli"] | {LAB}
"""Each part, and the parts it may import (itself included)."""

KNOWN_EXCEPTIONS: frozenset[tuple[str, str]] = frozenset()
"""Import edges tolerated for now by both rules, each named (importer, imported) without the
package prefix: none. An edge added here must say why, and a test fails once it is gone."""


@dataclass(frozen=True)
class Import:
    importer: str
    imported: str
    line: int
    function: str | None
    """The outermost function the import is written in (None: at module level)."""

    @property
    def deferred(self) -> bool:
        return self.function is not None

    def __str__(self) -> str:
        where = f"in {self.function}()" if self.deferred else "at module level"
        return f"{self.importer} -> {self.imported} (line {self.line}, {where})"


def _modules() -> dict[str, Path]:
    modules = {}
    for path in sorted(ROOT.rglob("*.py")):
        parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        modules[".".join(parts)] = path
    return modules


MODULES = _modules()


def _short(module: str) -> str:
    return module.removeprefix(PACKAGE).removeprefix(".")


def _part(module: str) -> str:
    return _short(module).split(".")[0]


def _absolute(module: str, path: Path, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    base = package[: len(package) - node.level + 1]
    return ".".join(base + ([node.module] if node.module else []))


def _with_parents(module: str) -> list[str]:
    names = module.split(".")
    return [".".join(names[:n]) for n in range(1, len(names) + 1)]


class _Collector(ast.NodeVisitor):
    def __init__(self, module: str, path: Path) -> None:
        self.module, self.path = module, path
        self.functions: list[str] = []
        self.found: list[Import] = []

    def _function(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        self.functions.append(node.name)
        self.generic_visit(node)
        self.functions.pop()

    visit_FunctionDef = visit_AsyncFunctionDef = _function

    def _add(self, target: str, node: ast.stmt) -> None:
        known = [name for name in _with_parents(target) if name in MODULES]
        if known and known[-1] != self.module:
            function = self.functions[0] if self.functions else None
            self.found.append(Import(self.module, known[-1], node.lineno, function))

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self._add(alias.name, node)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        source = _absolute(self.module, self.path, node)
        for alias in node.names:
            submodule = f"{source}.{alias.name}"
            self._add(submodule if submodule in MODULES else source, node)


def _imports() -> list[Import]:
    found = []
    for module, path in MODULES.items():
        collector = _Collector(module, path)
        collector.visit(ast.parse(path.read_text(encoding="utf-8"), str(path)))
        found += collector.found
    return found


IMPORTS = _imports()


def _edges(imports: list[Import]) -> set[tuple[str, str]]:
    """Importer -> imported module, and -> each package above it (run first)."""
    return {
        (i.importer, name)
        for i in imports
        for name in _with_parents(i.imported)
        if name in MODULES and name != i.importer
    }


def _cycles(edges: set[tuple[str, str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    graph: dict[str, set[str]] = {}
    for a, b in edges:
        graph.setdefault(a, set()).add(b)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                components.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return components


def test_the_collector_sees_deferred_and_relative_imports():
    source = (
        "from . import nccl\n"
        "from ..inventory.models import Inventory\n"
        "if TYPE_CHECKING:\n"
        "    from pytest_hpcnet.probes.fio import FioResult\n"
        "def later():\n"
        "    import pytest_hpcnet.redact\n"
    )
    collector = _Collector(f"{PACKAGE}.probes.gpu", ROOT / "probes" / "gpu.py")
    collector.visit(ast.parse(source))
    assert {(i.imported, i.function) for i in collector.found} == {
        (f"{PACKAGE}.probes.nccl", None),
        (f"{PACKAGE}.inventory.models", None),
        (f"{PACKAGE}.probes.fio", None),
        (f"{PACKAGE}.redact", "later"),
    }


def test_cycle_finder_names_each_cycle():
    edges = {("a", "b"), ("b", "c"), ("c", "a"), ("c", "d"), ("e", "f"), ("f", "e")}
    assert _cycles(edges) == [["a", "b", "c"], ["e", "f"]]


def test_every_module_has_a_layer():
    placed = {part for _, parts in LADDER for part in parts} | {LAB}
    assert {_part(m) for m in MODULES} - placed == set()


def test_no_import_runs_up_a_layer():
    leaks = sorted(
        {
            str(i)
            for i in IMPORTS
            if _part(i.imported) not in MAY_IMPORT[_part(i.importer)]
            and (_short(i.importer), _short(i.imported)) not in KNOWN_EXCEPTIONS
        }
    )
    assert not leaks, "imports that run up a layer:\n" + "\n".join(leaks)


def test_only_the_lab_verb_imports_the_lab():
    outside = [
        str(i)
        for i in IMPORTS
        if _part(i.imported) == LAB
        and _part(i.importer) != LAB
        and (_short(i.importer), i.function) != LAB_VERB
    ]
    assert not outside, "the lab imported outside the `lab` verb:\n" + "\n".join(outside)


def test_the_command_loads_no_lab_before_its_verb():
    code = (
        "import sys\n"
        "from pytest_hpcnet import cli\n"
        "cli._parser().parse_args(['verify', 'run'])\n"
        "print(sorted(m for m in sys.modules if m.startswith('pytest_hpcnet.lab')))\n"
    )
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert loaded.returncode == 0, loaded.stderr
    assert loaded.stdout.strip() == "[]"


def test_no_import_cycle():
    edges = {e for e in _edges(IMPORTS) if (_short(e[0]), _short(e[1])) not in KNOWN_EXCEPTIONS}
    cycles = [" <-> ".join(_short(m) for m in cycle) for cycle in _cycles(edges)]
    assert not cycles, "modules that import each other:\n" + "\n".join(cycles)


@pytest.mark.parametrize("edge", sorted(KNOWN_EXCEPTIONS), ids=" -> ".join)
def test_each_known_exception_still_exists(edge):
    """A tolerated edge that is gone comes off the list."""
    assert any((_short(i.importer), _short(i.imported)) == edge for i in IMPORTS)
