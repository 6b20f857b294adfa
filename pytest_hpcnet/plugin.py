"""The pytest plugin: options, markers, the `cluster`/`node`/`node_pair` fixtures, summary.

Installed through the `pytest11` entry point. Without `--inventory` nothing changes for
a project that merely has it installed: only tests asking for its fixtures are skipped.
"""

from __future__ import annotations

import secrets
import time
from collections import Counter
from pathlib import Path

import pytest

from pytest_hpcnet.cluster import Cluster
from pytest_hpcnet.inventory import Inventory, InventoryError, Node, load_inventory
from pytest_hpcnet.transport import Transport

NO_INVENTORY = (
    "no cluster inventory: run with --inventory PATH (or set hpcnet_inventory in pytest.ini)"
)
STATE = pytest.StashKey["HpcnetState"]()


class HpcnetState:
    """What the plugin keeps for one pytest session."""

    def __init__(self, inventory: Inventory | None, reports_dir: Path, concurrency: int | None):
        self.inventory = inventory
        self.run_id = time.strftime("%Y%m%d-%H%M%S", time.gmtime()) + "-" + secrets.token_hex(2)
        self.run_dir = reports_dir / self.run_id
        self.concurrency = concurrency
        self.cluster: Cluster | None = None
        self.outcomes: Counter[str] = Counter()

    def open_cluster(self) -> Cluster:
        if self.cluster is None:
            assert self.inventory is not None
            self.cluster = Cluster(self.inventory, Transport(self.inventory, self.concurrency))
        return self.cluster

    def close(self) -> None:
        if self.cluster is not None:
            self.cluster.transport.close()

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """Count check outcomes for the summary (setup failures count as errors)."""
        if report.when == "call":
            self.outcomes[report.outcome] += 1
        elif report.when == "setup" and not report.passed:
            self.outcomes["error" if report.failed else "skipped"] += 1


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("hpcnet", "cluster acceptance (pytest_hpcnet)")
    group.addoption(
        "--inventory", dest="hpcnet_inventory", metavar="PATH", help="cluster inventory YAML"
    )
    group.addoption(
        "--hpcnet-concurrency",
        type=int,
        metavar="N",
        help="parallel SSH sessions (default: the inventory's ssh.concurrency)",
    )
    group.addoption(
        "--reports-dir",
        dest="hpcnet_reports_dir",
        metavar="DIR",
        default="reports",
        help="where each run's reports go (default reports/)",
    )
    parser.addini("hpcnet_inventory", "cluster inventory YAML (like --inventory)", default="")


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "static: quick acceptance checks (seconds; the nightly gate)"
    )
    config.addinivalue_line("markers", "benchmark: minutes-long measurements (perftest, NCCL, fio)")
    path = config.getoption("hpcnet_inventory") or config.getini("hpcnet_inventory")
    concurrency = config.getoption("hpcnet_concurrency")
    if concurrency is not None and concurrency < 1:
        raise pytest.UsageError("--hpcnet-concurrency must be at least 1")
    inventory = None
    if path:
        try:
            inventory = load_inventory(path)
        except InventoryError as exc:
            raise pytest.UsageError(str(exc)) from None
    state = HpcnetState(inventory, Path(config.getoption("hpcnet_reports_dir")), concurrency)
    config.stash[STATE] = state
    config.pluginmanager.register(state, "hpcnet-state")
    if inventory is not None and not hasattr(config, "workerinput"):
        _default_reports(config, state)


def _default_reports(config: pytest.Config, state: HpcnetState) -> None:
    """Point pytest-html and JUnit XML into the run's folder unless the user chose paths."""
    try:
        state.run_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise pytest.UsageError(f"reports directory {state.run_dir}: {exc.strerror}") from None
    if hasattr(config.option, "htmlpath") and not config.option.htmlpath:
        config.option.htmlpath = str(state.run_dir / "report.html")
        config.option.self_contained_html = True
    if hasattr(config.option, "xmlpath") and not config.option.xmlpath:
        config.option.xmlpath = str(state.run_dir / "junit.xml")


def _state(config: pytest.Config) -> HpcnetState:
    return config.stash[STATE]


def ring_pairs(nodes: list[Node]) -> list[tuple[Node, Node]]:
    """Each node to the next, around the ring (a single node has no pair)."""
    if len(nodes) < 2:
        return []
    if len(nodes) == 2:
        return [(nodes[0], nodes[1])]
    return [(nodes[i], nodes[(i + 1) % len(nodes)]) for i in range(len(nodes))]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    inventory = _state(metafunc.config).inventory
    if inventory is None:
        return
    if "node" in metafunc.fixturenames:
        metafunc.parametrize("node", inventory.nodes, ids=[n.name for n in inventory.nodes])
    if "node_pair" in metafunc.fixturenames:
        pairs = ring_pairs(inventory.nodes)
        metafunc.parametrize("node_pair", pairs, ids=[f"{a.name}->{b.name}" for a, b in pairs])


@pytest.fixture(scope="session")
def cluster(request: pytest.FixtureRequest) -> Cluster:
    """The cluster under test: inventory, transport (one connection per node), facts."""
    state = _state(request.config)
    if state.inventory is None:
        pytest.skip(NO_INVENTORY)
    return state.open_cluster()


@pytest.fixture
def node(cluster: Cluster) -> Node:  # replaced by direct parametrization with an inventory
    pytest.skip(NO_INVENTORY)


@pytest.fixture
def node_pair(cluster: Cluster) -> tuple[Node, Node]:  # likewise
    pytest.skip(NO_INVENTORY)


def pytest_sessionfinish(session: pytest.Session) -> None:
    state = session.config.stash.get(STATE, None)
    if state is not None:
        state.close()


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    state = config.stash.get(STATE, None)
    if state is None or state.inventory is None or hasattr(config, "workerinput"):
        return
    inv = state.inventory
    tr = terminalreporter
    tr.section("hpcnet", sep="-")
    down = state.cluster.transport.unreachable() if state.cluster else {}
    total = len(inv.nodes)
    tr.write_line(f"cluster {inv.cluster.name} ({inv.cluster.region}): {total} nodes")
    tried = state.cluster is not None
    reached = f"{total - len(down)}/{total}" if tried else "not contacted"
    tr.write_line(f"nodes reached: {reached}; unreachable: {len(down)}")
    for name, reason in sorted(down.items()):
        tr.write_line(f"  {name}: {reason}", red=True)
    o = state.outcomes
    tr.write_line(
        f"checks: {o['passed']} passed, {o['failed']} failed, {o['error']} errors, "
        f"{o['skipped']} skipped"
    )
    tr.write_line(f"reports: {state.run_dir}/")
