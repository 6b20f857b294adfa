"""The pytest plugin's entry point: options, markers, fixtures and the hooks that hand a run
to `session.py`.

Installed through the `pytest11` entry point. Without an inventory nothing changes for a
project that merely has it installed: this module imports only pytest, the run's machinery
(SSH, pydantic, reports) is imported when `--inventory` is given, and tests asking for its
fixtures are skipped with one line.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from pytest_hpcnet.campaigns.burnin import BurninCampaign
    from pytest_hpcnet.campaigns.cluster import Cluster
    from pytest_hpcnet.inventory.models import Node
    from pytest_hpcnet.report.recording import Check

NO_INVENTORY = (
    "no cluster inventory: run with --inventory PATH (or set hpcnet_inventory in pytest.ini)"
)
STATE = pytest.StashKey["HpcnetState"]()
TAKEN = pytest.StashKey[dict[str, str]]()
"""Our short aliases another plugin owns: alias -> that plugin's `dest`."""
HINT = pytest.StashKey[str]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("hpcnet", "cluster acceptance (pytest_hpcnet)")
    group.addoption(
        "--hpcnet-inventory",
        dest="hpcnet_inventory",
        metavar="PATH",
        help="cluster inventory YAML (also --inventory, unless another plugin owns it)",
    )
    group.addoption(
        "--hpcnet-concurrency",
        type=int,
        metavar="N",
        help="parallel SSH sessions (default: the inventory's ssh.concurrency)",
    )
    group.addoption(
        "--hpcnet-reports-dir",
        dest="hpcnet_reports_dir",
        metavar="DIR",
        default="reports",
        help="where each run's reports go (default reports/; also --reports-dir, unless "
        "another plugin owns it)",
    )
    group.addoption(
        "--hpcnet-sign-key",
        metavar="PEM",
        help="Ed25519 private key: sign the certificate's evidence digest",
    )
    group.addoption(
        "--hpcnet-operator",
        metavar='"NAME <MAIL>"',
        help="the person running the acceptance, named on the certificate "
        "(default: the inventory's cluster.operator)",
    )
    group.addoption(
        "--hpcnet-baseline",
        metavar="RUN",
        help="previous run folder (or its evidence.jsonl/summary.json), or auto (the last good run "
        "of this cluster in the reports folder): fail regressions",
    )
    group.addoption(
        "--hpcnet-nodes",
        metavar="NAMES",
        help="only these nodes of the inventory (comma-separated names); the gate's re-run "
        "of a node's failed checks uses it",
    )
    group.addoption(
        "--hpcnet-metrics",
        metavar="PATH",
        help="write a Prometheus textfile (node_exporter textfile collector) here",
    )
    group.addoption(
        "--hpcnet-burnin",
        metavar="DURATION",
        help="burn in every GPU for DURATION (24h, 90m, 30s; -m burnin; the inventory's "
        "burnin: sets the interval and heartbeat)",
    )
    group.addoption(
        "--hpcnet-burnin-resume",
        metavar="RUN",
        help="re-attach to the burn-in of run folder RUN (in the reports folder) without "
        "restarting it: its samples so far are kept",
    )
    parser.addini("hpcnet_inventory", "cluster inventory YAML (like --inventory)", default="")


ALIASES = {"--inventory": "hpcnet_inventory", "--reports-dir": "hpcnet_reports_dir"}
"""Short spellings of our options, added only where no other plugin (pytest-ansible has
`--inventory`) registered the same name: two owners of one option stop pytest at start-up."""


def _taken(parser: pytest.Parser) -> set[str]:
    """The option strings already registered by pytest and every plugin loaded so far."""
    groups = [parser._anonymous, *parser._groups]
    return {name for group in groups for option in group.options for name in option.names()}


def _owners(parser: pytest.Parser, names: set[str]) -> dict[str, str]:
    """The `dest` of the option registered under each of `names`."""
    groups = [parser._anonymous, *parser._groups]
    options = [option for group in groups for option in group.options]
    return {n: o.dest for o in options for n in o.names() if n in names and o.dest}


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests(early_config: pytest.Config, parser: pytest.Parser) -> None:
    """Add the short aliases once every installed plugin has registered its options."""
    taken = _taken(parser)
    group = parser.getgroup("hpcnet")
    for alias, dest in ALIASES.items():
        if alias not in taken:
            group.addoption(alias, dest=dest, help=argparse.SUPPRESS)
    early_config.stash[TAKEN] = _owners(parser, taken & set(ALIASES))


def taken_alias_hint(config: pytest.Config) -> str:
    """One line when `--inventory` went to the plugin that owns it (pytest-ansible) and no
    hpcnet inventory was given: the run would check nothing and say nothing."""
    dest = config.stash.get(TAKEN, {}).get("--inventory")
    value = config.getoption(dest, None) if dest else None
    if not value or not isinstance(value, str):
        return ""
    return f"hpcnet: --inventory {value} went to another plugin; type --hpcnet-inventory {value}"


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "static: quick acceptance checks (seconds; nightly gate)")
    config.addinivalue_line("markers", "benchmark: minutes-long measurements (perftest, NCCL, fio)")
    config.addinivalue_line(
        "markers", "gpu_load: every GPU under load at once (GEMM soak, checksums, bandwidth)"
    )
    config.addinivalue_line(
        "markers", "burnin: hours of load on every GPU, sampled on the nodes (--hpcnet-burnin)"
    )
    config.addinivalue_line("markers", "check(id, requirement): the requirement a test proves")
    config.addinivalue_line(
        "markers", "collectives: NCCL all_gather, reduce_scatter, alltoall, sendrecv (benchmark)"
    )
    config.addinivalue_line("markers", "audit: Alibaba Cloud control-plane audit (credentials)")
    config.addinivalue_line(
        "markers",
        "not_applicable_when(ruled_out, reason): a per-node test the expectations can rule out"
        " (ruled_out(expect) is true: one skipped [all-nodes] item with the reason)",
    )
    path = config.getoption("hpcnet_inventory") or ini_inventory(config)
    concurrency = config.getoption("hpcnet_concurrency")
    if concurrency is not None and concurrency < 1:
        raise pytest.UsageError("--hpcnet-concurrency must be at least 1")
    check_metrics_path(config.getoption("hpcnet_metrics"))
    check_burnin_options(config)
    if not path:
        config.stash[HINT] = taken_alias_hint(config)
        return
    from pytest_hpcnet.session import start_run

    config.stash[STATE] = start_run(config, path)
    default_to_shipped_suites(config)


def ini_inventory(config: pytest.Config) -> str:
    """`hpcnet_inventory` of the ini file, relative to that file's folder (as `testpaths`)."""
    value = config.getini("hpcnet_inventory")
    if not value or config.inipath is None:
        return value
    return str(config.inipath.parent / Path(value).expanduser())


def check_metrics_path(value: str | None) -> None:
    """`--hpcnet-metrics` names a file in a folder that exists (node_exporter's textfile
    folder): a typo is one line before the run, not a new folder nobody reads."""
    if not value:
        return
    path = Path(value).expanduser()
    if path.is_dir():
        raise pytest.UsageError(f"--hpcnet-metrics {value}: is a folder; name a .prom file in it")
    if not path.parent.is_dir():
        raise pytest.UsageError(f"--hpcnet-metrics {value}: no such folder {str(path.parent)!r}")


def check_burnin_options(config: pytest.Config) -> None:
    """`--hpcnet-burnin` is a duration; `--hpcnet-burnin-resume` names an earlier run with a
    burn-in: a typo is one line before the run."""
    asked = config.getoption("hpcnet_burnin")
    if asked:
        from pytest_hpcnet.inventory.burnin_settings import parse_duration

        try:
            parse_duration(asked)
        except ValueError as exc:
            raise pytest.UsageError(f"--hpcnet-burnin: {exc}") from None
    resume = config.getoption("hpcnet_burnin_resume")
    if resume:
        reports = Path(config.getoption("hpcnet_reports_dir"))
        run_dir = Path(resume) if Path(resume).is_dir() else reports / resume
        if not (run_dir / "burnin" / "run.json").is_file():
            raise pytest.UsageError(
                f"--hpcnet-burnin-resume {resume}: no burn-in in {run_dir} (burnin/run.json)"
            )


SUITES = Path(__file__).resolve().parent / "suites"


def default_to_shipped_suites(config: pytest.Config) -> None:
    """With an inventory and no test paths on the command line, collect the shipped suites.

    Neither the folder pytest runs in nor its `testpaths` decide what an acceptance run
    checks: `pytest --inventory prod.yaml` runs `pytest_hpcnet/suites` wherever it is
    started. Paths given on the command line (a site's own checks) are run as given."""
    if config.args_source != pytest.Config.ArgsSource.ARGS:
        config.args[:] = [str(SUITES)]
        config.args_source = pytest.Config.ArgsSource.ARGS


SUITES_ID = "pytest_hpcnet/suites"
"""The shipped suites' test ids start here, as in a checkout, whatever the rootdir."""


@pytest.hookimpl(tryfirst=True)
def pytest_pycollect_makemodule(
    module_path: Path, parent: pytest.Collector
) -> pytest.Module | None:
    """A shipped suite module with a stable id: `pytest_hpcnet/suites/test_mtu.py::...`.

    pytest names a file by its path from the rootdir, which moves with the folder it runs in
    and with the inventory's folder (read as a test path before our options are known); the
    JUnit classname follows the id (`pytest_hpcnet.suites.test_mtu`)."""
    if module_path.resolve().parent != SUITES:
        return None
    nodeid = f"{SUITES_ID}/{module_path.name}"
    return pytest.Module.from_parent(parent, path=module_path, nodeid=nodeid)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    state = metafunc.config.stash.get(STATE, None)
    if state is None:
        return
    from pytest_hpcnet.campaigns.pairs.campaign import flow_id
    from pytest_hpcnet.campaigns.perftest.campaign import planned_rounds
    from pytest_hpcnet.campaigns.schedule import ring_pairs
    from pytest_hpcnet.report.recording import ALL_NODES
    from pytest_hpcnet.requirements.registry import not_applicable
    from pytest_hpcnet.session import NO_BURNIN, burnin_asked

    inventory = state.inventory
    nodes = {n.name: n for n in inventory.nodes}
    if deselected_by_mark(metafunc):  # one item to deselect, not one per node
        for name in PARAMETERS:
            if name in metafunc.fixturenames:
                metafunc.parametrize(name, [None], ids=[DESELECTED])
        return
    if "node" in metafunc.fixturenames:
        ruled_out = not_applicable(metafunc.definition, inventory.expect)
        if metafunc.definition.get_closest_marker("burnin") and not burnin_asked(metafunc.config):
            ruled_out = NO_BURNIN
        if ruled_out:  # one skipped item for the cluster, not one per node
            skipped = pytest.param(None, marks=pytest.mark.skip(reason=ruled_out))
            metafunc.parametrize("node", [skipped], ids=[ALL_NODES])
        else:
            metafunc.parametrize("node", inventory.nodes, ids=list(nodes))
    if "acl_flow" in metafunc.fixturenames:
        flows = [("allow", f) for f in inventory.expect.flows.allow]
        flows += [("deny", f) for f in inventory.expect.flows.deny]
        if flows:
            metafunc.parametrize("acl_flow", flows, ids=[flow_id(k, f) for k, f in flows])
        else:
            none_here(metafunc, "acl_flow", NO_FLOWS)
    if "perftest_pair" in metafunc.fixturenames:
        rounds, _ = planned_rounds(list(nodes), inventory.benchmarks.perftest)
        pairs = [pair for round_pairs in rounds for pair in round_pairs]
        ids = [f"r{i}:{p.a}->{p.b}" for i, rp in enumerate(rounds, 1) for p in rp]
        if pairs:
            metafunc.parametrize("perftest_pair", pairs, ids=ids)
        else:
            none_here(metafunc, "perftest_pair", ONE_NODE)
    if "node_pair" in metafunc.fixturenames:
        pairs = [(nodes[p.a], nodes[p.b]) for p in ring_pairs(list(nodes))]
        if pairs:
            ids = [f"{a.name}->{b.name}" for a, b in pairs]
            metafunc.parametrize("node_pair", pairs, ids=ids)
        else:
            none_here(metafunc, "node_pair", ONE_NODE)


PARAMETERS = ("node", "acl_flow", "perftest_pair", "node_pair")
DESELECTED = "deselected"


def deselected_by_mark(metafunc: pytest.Metafunc) -> bool:
    """Whether `-m` deselects every item of this test: its own marks decide, since the
    parameters add none but `skip` (an expression naming `skip` is left to pytest).

    pytest-xdist makes every worker collect the whole suite, so a `-m static` run would build
    a benchmark's item per node and pair in every process only to drop it (4,875 of 11,544
    items at 256 nodes). Reads pytest's `-m` matcher; where that is not available, pytest
    deselects as usual."""
    text = metafunc.config.option.markexpr
    if not text or "skip" in text:
        return False
    try:
        from _pytest.mark import MarkMatcher
        from _pytest.mark.expression import Expression

        matcher = MarkMatcher.from_markers(metafunc.definition.iter_markers())
        return not Expression.compile(text).evaluate(matcher)
    except Exception:  # another pytest: collect as usual
        return False


NO_FLOWS = "not applicable: no ACL flows in the inventory (expect.flows.allow/deny)"
ONE_NODE = "not applicable: the inventory has one node, so no node pair"


def none_here(metafunc: pytest.Metafunc, name: str, reason: str) -> None:
    """One skipped item, id `none`, where the inventory gives a parameter nothing to take
    (pytest's empty parameter set would be a skip that counts as not measured)."""
    skipped = pytest.param(None, marks=pytest.mark.skip(reason=reason))
    metafunc.parametrize(name, [skipped], ids=["none"])


@pytest.fixture(scope="session")
def cluster(request: pytest.FixtureRequest) -> Cluster:
    """The cluster under test: inventory, transport (one connection per node), facts."""
    state = request.config.stash.get(STATE, None)
    if state is None:
        pytest.skip(NO_INVENTORY)
    return state.open_cluster()


@pytest.fixture(scope="session")
def burnin(request: pytest.FixtureRequest, cluster: Cluster) -> BurninCampaign:
    """The burn-in of every node (`campaigns/burnin`), run or resumed once per session; its
    samples are kept in the run folder's `burnin/`."""
    from pytest_hpcnet.campaigns.burnin import EVIDENCE, BurninCampaign
    from pytest_hpcnet.inventory.burnin_settings import parse_duration

    state = request.config.stash[STATE]
    asked = request.config.getoption("hpcnet_burnin")
    resume = request.config.getoption("hpcnet_burnin_resume")
    earlier = None
    if resume:
        given = Path(resume)
        run_dir = given if given.is_dir() else state.run_dir.parent / resume
        earlier = run_dir / EVIDENCE
    return BurninCampaign(
        cluster.facts_campaign,
        state.run_dir / EVIDENCE,
        state.run_dir.name,
        parse_duration(asked) if asked else None,
        state.inventory.burnin,
        resume_from=earlier,
    )


@pytest.fixture(scope="session")
def cloud_plane(request: pytest.FixtureRequest, cluster: Cluster):
    """The cloud control plane read once per session (`session.CloudRead`: the snapshot, or
    why there is none), the same for every test whatever ran before."""
    return request.config.stash[STATE].cloud_plane()


@pytest.fixture
def check(request: pytest.FixtureRequest, cluster: Cluster) -> Check:
    """The evidence of the current test (its `check` marker names the requirement); pass it
    to the cluster (`cluster.facts(node, check)`) to record what the test ran."""
    from pytest_hpcnet.report.recording import Check
    from pytest_hpcnet.session import CHECK

    found = request.node.stash.get(CHECK, None)
    if found is None:
        found = Check(request.node.name, request.node.name, "cluster", "cluster", "", None)
    return found


@pytest.fixture
def node(cluster: Cluster) -> Node:  # replaced by direct parametrization with an inventory
    pytest.skip(NO_INVENTORY)


@pytest.fixture
def node_pair(cluster: Cluster) -> tuple[Node, Node]:  # likewise
    pytest.skip(NO_INVENTORY)


@pytest.fixture
def perftest_pair(cluster: Cluster):  # parametrized from the benchmark schedule
    pytest.skip("fewer than two nodes: no pair to measure")


@pytest.fixture
def acl_flow(cluster: Cluster):  # parametrized from expect.flows; none listed -> skipped
    pytest.skip(NO_FLOWS)


FULL_TRACEBACKS_MAX = 100
"""Past this many failed checks pytest's failure summary is left out (`--tb=no`) unless
`--tb` was given: it prints every traceback and scans every report once per failure
(O(failures x items)): about 90 s after a 1,024-node run with 1,412 failures. The short
summary's FAILED lines, the `checks:` block and the evidence still name every failure."""


@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session: pytest.Session) -> None:
    state = session.config.stash.get(STATE, None)
    if state is not None and not state.is_worker:
        shorten_tracebacks(session.config)


def shorten_tracebacks(config: pytest.Config, most: int = FULL_TRACEBACKS_MAX) -> None:
    """Many failures under pytest's default `--tb=auto`: no tracebacks, and a line saying so."""
    terminal = config.pluginmanager.get_plugin("terminalreporter")
    if terminal is None or config.option.tbstyle != "auto":
        return
    failed = len(terminal.stats.get("failed", [])) + len(terminal.stats.get("error", []))
    if failed > most:
        config.option.tbstyle = "no"
        terminal.write_line(
            f"hpcnet: {failed} failures: pytest's tracebacks left out (--tb=short or long to "
            "see them); the FAILED lines and the checks below name each one, evidence.jsonl "
            "holds it whole"
        )


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    state = config.stash.get(STATE, None)
    hint = config.stash.get(HINT, "")
    if hint and not hasattr(config, "workerinput"):
        terminalreporter.write_line(hint, yellow=True)
    if state is None or state.is_worker or config.option.collectonly:
        return
    from pytest_hpcnet.report.terminal_summary import write_summary

    write_summary(state.summary_lines(), terminalreporter)


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node) -> None:  # pytest-xdist: workers share the controller's run
    state = node.config.stash.get(STATE, None)
    if state is None:
        return
    node.workerinput["hpcnet_run_id"] = state.run_dir.name
    if state.bundle is not None:  # workers judge on the controller's run date
        node.workerinput["hpcnet_run_started"] = state.bundle.started_at.isoformat()
    if state.spool is not None:  # each worker gathers its own range of nodes
        node.workerinput["hpcnet_spool"] = str(state.spool.path)
        node.workerinput["hpcnet_token"] = state.spool.token


@pytest.hookimpl(optionalhook=True, tryfirst=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log):
    """pytest-xdist: split by range of nodes when the nodes are partitioned (`-n N`)."""
    state = config.stash.get(STATE, None)
    if state is None or state.spool is None:
        return None  # xdist's own scheduler
    from pytest_hpcnet.xdist_schedule import RangeScheduling

    return RangeScheduling(config, state.spool, log)


@pytest.hookimpl(optionalhook=True)
def pytest_metadata(metadata: dict, config: pytest.Config) -> None:  # pytest-html environment
    state = config.stash.get(STATE, None)
    if state is not None:
        from pytest_hpcnet.report.html_report import environment_rows

        metadata.update(environment_rows(state.inventory))
