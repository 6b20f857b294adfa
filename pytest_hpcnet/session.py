"""One acceptance run inside pytest: the state the plugin registers when an inventory is
given (recording, evidence, certificate, summary).

`plugin.py` imports this module only then, so a project that merely has the plugin
installed never loads SSH, pydantic or the report stack at pytest's start-up.
"""

from __future__ import annotations

import contextlib
import gc
import shutil
from collections import Counter
from dataclasses import dataclass
from datetime import date, datetime
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from cryptography.exceptions import UnsupportedAlgorithm

from pytest_hpcnet.campaigns.partition import FactsSpool, Partition
from pytest_hpcnet.campaigns.progress import LOG, PREFIX, Reporter, silent
from pytest_hpcnet.gate.history import TRENDS_FILE, has_history, history, write_run_digest
from pytest_hpcnet.gate.runlock import RunLocked, take_run_lock
from pytest_hpcnet.inventory.loader import InventoryError, load_inventory
from pytest_hpcnet.inventory.models import Inventory
from pytest_hpcnet.probes.metadata import MetadataFacts, parse_metadata
from pytest_hpcnet.report.baseline import (
    AUTO,
    Baseline,
    choose_baseline,
    load_baseline,
    record_regressions,
)
from pytest_hpcnet.report.evidence import (
    EvidenceBundle,
    cluster_node_facts,
    new_run_id,
    utc_now,
)
from pytest_hpcnet.report.html_report import add_environment, html_extras, verdict_html
from pytest_hpcnet.report.junit import junit_verdict
from pytest_hpcnet.report.recording import (
    Check,
    attach,
    decide,
    detach,
    fault_properties,
    one_line,
    show_verdict,
    subject_of,
    test_status,
)
from pytest_hpcnet.report.records import RunSummary
from pytest_hpcnet.report.signing import load_private_key
from pytest_hpcnet.report.terminal_summary import (
    FAILURE_LINES,
    RunLines,
    cause_of,
    failure_line,
)
from pytest_hpcnet.report.verdict import run_date, verdict_line
from pytest_hpcnet.requirements.registry import across_nodes_reason, planned_bounds
from pytest_hpcnet.run_scope import (
    check_exclusions,
    check_waivers,
    excluded_ids,
    is_lab,
    profile_facts,
    run_scope,
    selection,
    unit_plan,
)
from pytest_hpcnet.transport.open_files import open_files_needed, raise_open_files_limit
from pytest_hpcnet.transport.results import NodeUnreachable

if TYPE_CHECKING:  # an xdist controller connects nowhere: the SSH stack loads on first use
    from pytest_hpcnet.campaigns.cluster import Cluster

CHECK = pytest.StashKey[Check]()
MIN_FREE_BYTES = 64 * 1024 * 1024
FREE_BYTES_PER_NODE = 512 * 1024
SESSION_TREND_RUNS = 14  # trends.html of a run: two weeks of nights (hpcnet trends: more)


def start_run(config: pytest.Config, path: str) -> HpcnetState:
    """Load the inventory and the baseline, register the run's state, open its folder;
    a user mistake is a `pytest.UsageError` (one line, exit 4)."""
    try:
        inventory = load_inventory(path)
    except InventoryError as exc:
        raise pytest.UsageError(str(exc)) from None
    check_exclusions(inventory)
    check_waivers(inventory)
    _check_sign_key(config.getoption("hpcnet_sign_key"))
    cluster_nodes = [n.name for n in inventory.nodes]  # the whole cluster, before a share
    only = config.getoption("hpcnet_nodes", None)
    if only:
        inventory = only_nodes(inventory, only)
    if not config.option.collectonly:
        short = raise_open_files_limit(open_files_needed(inventory))
        if short:
            raise pytest.UsageError(short)
    workerinput = getattr(config, "workerinput", None)
    run_id = workerinput.get("hpcnet_run_id") if workerinput else None
    reports = Path(config.getoption("hpcnet_reports_dir"))
    state = HpcnetState(config, inventory, reports / (run_id or new_run_id()))
    state.cluster_nodes = cluster_nodes
    _load_baseline(config, state, reports)
    _plan_partition(config, state)
    if not config.option.collectonly and not workerinput:
        _take_run_lock(config, state, reports)
    config.pluginmanager.register(state, "hpcnet-state")
    if not config.option.collectonly:
        _open_run_dir(config, state)
    return state


XDIST_OUTPUT = "hpcnet"
"""The key of what a worker hands the controller at its end (`workeroutput`)."""


def _plan_partition(config: pytest.Config, state: HpcnetState) -> None:
    """Split the nodes between pytest-xdist workers on this host (`-n N` with xdist's default
    `--dist load`): the controller makes the spool and schedules by range
    (`xdist_schedule`); each worker groups its checks and shares the facts it gathers."""
    workerinput = getattr(config, "workerinput", None)
    if workerinput is not None:
        if workerinput.get("hpcnet_spool") and state.inventory is not None:
            names = [n.name for n in state.inventory.nodes]
            state.partition = Partition(names, int(workerinput["workercount"]))
            state.spool = FactsSpool.open(workerinput["hpcnet_spool"], workerinput["hpcnet_token"])
        return
    dist = getattr(config.option, "dist", "no")
    specs = [str(spec) for spec in getattr(config.option, "tx", None) or []]
    local = bool(specs) and all("popen" in spec.split("//") for spec in specs)
    if dist != "load" or not local or config.option.collectonly:
        return
    import secrets
    import tempfile

    folder = Path(tempfile.mkdtemp(prefix="hpcnet-xdist-"))
    state.spool = FactsSpool.create(folder, secrets.token_hex(16))


def _check_sign_key(path: str | None) -> None:
    """`--hpcnet-sign-key` must be a readable Ed25519 private key: found before the first
    connection (one line, exit 4), not after the whole run."""
    if not path:
        return
    try:
        load_private_key(path)
    except FileNotFoundError:
        raise pytest.UsageError(f"--hpcnet-sign-key {path}: no such file") from None
    except OSError as exc:
        raise pytest.UsageError(f"--hpcnet-sign-key {path}: {exc.strerror or exc}") from None
    except (ValueError, TypeError, UnsupportedAlgorithm) as exc:
        hint = " (that is the public key: give the private one)" if path.endswith(".pub") else ""
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise pytest.UsageError(
            f"--hpcnet-sign-key {path}: not an Ed25519 private key{hint}: {first}"
        ) from None


def only_nodes(inventory: Inventory, names: str) -> Inventory:
    """The inventory narrowed to `names` (`--hpcnet-nodes a,b`); an unknown name is a
    one-line usage error."""
    wanted = [n for n in (part.strip() for part in names.split(",")) if n]
    known = {n.name for n in inventory.nodes}
    unknown = [n for n in wanted if n not in known]
    if unknown or not wanted:
        what = f"{unknown[0]!r} is not a node of the inventory" if unknown else "no node named"
        raise pytest.UsageError(f"--hpcnet-nodes {names}: {what}")
    return inventory.model_copy(update={"nodes": [n for n in inventory.nodes if n.name in wanted]})


def _take_run_lock(config: pytest.Config, state: HpcnetState, reports: Path) -> None:
    """One run per cluster and reports folder at a time (gate/runlock.py); released at the
    very end (the lock is a plugin registered before the state, so its unconfigure runs last)."""
    assert state.inventory is not None
    try:
        lock = take_run_lock(reports, state.inventory.cluster.name)
    except RunLocked as exc:
        raise pytest.UsageError(f"hpcnet: {exc}") from None
    except OSError as exc:
        raise pytest.UsageError(
            f"reports directory {reports} is not writable: {exc.strerror or exc}"
        ) from None
    if lock.note:
        state.header.append(lock.note)
    config.pluginmanager.register(lock, "hpcnet-run-lock")


def _load_baseline(config: pytest.Config, state: HpcnetState, reports: Path) -> None:
    """`--hpcnet-baseline RUN`, or `auto`: the last good run of this cluster (docs/gate.md)."""
    baseline = config.getoption("hpcnet_baseline")
    if baseline == AUTO and state.inventory is not None:
        _, _, selected = selection(config)  # spelled as summary.json's scope.selection
        choice = choose_baseline(reports, state.inventory.cluster.name, selected, "")
        state.extra_summary["baseline"] = choice.line()
        state.header.append(choice.line())
        baseline = str(choice.run_dir) if choice.run_dir else None
    if baseline:
        try:
            state.baseline = load_baseline(baseline)
        except (OSError, ValueError) as exc:
            raise pytest.UsageError(f"--hpcnet-baseline {baseline}: {exc}") from None


NO_BURNIN = "not applicable: no burn-in asked (--hpcnet-burnin DURATION)"


def burnin_asked(config: pytest.Config) -> bool:
    """A burn-in runs only when asked: `--hpcnet-burnin`, `--hpcnet-burnin-resume`, or
    `-m burnin` with the inventory's `burnin.duration` (never in a plain handover run)."""
    if config.getoption("hpcnet_burnin") or config.getoption("hpcnet_burnin_resume"):
        return True
    return "burnin" in (config.option.markexpr or "")


@dataclass(frozen=True)
class CloudRead:
    """The session's one read of the cloud control plane: the snapshot, or why there is
    none (`skipped`: the audit cannot run here, e.g. no credentials; else a read error)."""

    plane: Any
    reason: str
    skipped: bool = False


class HpcnetState:
    """What the plugin keeps for one pytest session (registered as a plugin object)."""

    def __init__(self, config: pytest.Config, inventory: Inventory | None, run_dir: Path):
        self.config = config
        self.inventory = inventory
        self.run_dir = run_dir
        self.is_worker = hasattr(config, "workerinput")
        self.bundle: EvidenceBundle | None = None
        self.cluster: Cluster | None = None
        self.outcomes: Counter[str] = Counter()
        self.unreachable: dict[str, str] = {}
        self.contacted = False
        self.cluster_nodes: list[str] = []  # the inventory's nodes, before --hpcnet-nodes
        self.interrupted = False
        self.verdict: str | None = None
        self.summary: RunSummary | None = None
        self.certificate: Path | None = None
        self.baseline: Baseline | None = None
        self.failing: Counter[str] = Counter()
        self.overlap_pairs = False
        self.extra_summary: dict[str, str] = {}  # gate keys: baseline choice, trends page
        self.planned: dict[str, list[str]] = {}  # the collected subjects per requirement
        self.failures: list[str] = []  # one line per record that failed (the first ones)
        self.not_measured: dict[str, list[str]] = {}  # cause -> the check ids it left
        self.partition: Partition | None = None  # an xdist worker's share of the nodes
        self.spool: FactsSpool | None = None  # the facts the workers share (one host)
        self.worker_placement: dict[str, MetadataFacts] = {}  # from the workers' facts
        self.worker_retries: dict[str, int] = {}
        self._cloud: CloudRead | None = None
        self.header: list[str] = []  # lines for pytest's header

    def pytest_report_header(self) -> list[str]:
        return [PREFIX + line for line in self.header]

    @property
    def run_date(self) -> date:
        """The date the run is judged on: the UTC date of the controller's start."""
        return run_date(self.bundle.started_at if self.bundle else utc_now())

    def cloud_plane(self) -> CloudRead:
        """The cloud control plane, read once per session whatever asks first."""
        if self._cloud is None:
            from pytest_hpcnet.cloud import audit
            from pytest_hpcnet.cloud.readers import CloudReadError

            cluster = self.open_cluster()
            reason = audit.skip_reason(cluster.inventory.cloud)
            if reason:
                self._cloud = CloudRead(None, reason, skipped=True)
            else:
                try:
                    self._cloud = CloudRead(audit.snapshot(cluster), "")
                except CloudReadError as error:
                    self._cloud = CloudRead(None, audit.scrub(str(error)))
        return self._cloud

    def open_cluster(self) -> Cluster:
        if self.cluster is None:
            assert self.inventory is not None
            from pytest_hpcnet.campaigns.cluster import Cluster
            from pytest_hpcnet.transport.fanout import Transport

            concurrency = self.config.getoption("hpcnet_concurrency")
            if self.partition is not None:  # the session's SSH sessions, shared by its workers
                total = concurrency or self.inventory.ssh.concurrency
                concurrency = -(-total // self.partition.parts)
            transport = Transport(self.inventory, concurrency)
            self.cluster = Cluster(
                self.inventory,
                transport,
                terminal_reporter(self.config),
                self.partition,
                self.spool,
            )
            if self.overlap_pairs:
                self.cluster.pairs.prefetch()
        return self.cluster

    def pytest_report_collectionfinish(self, config: pytest.Config) -> list[str]:
        """Under `--collect-only`, the hops whose host keys are not recorded: found before
        the run instead of as unreachable nodes during it (no node is contacted)."""
        if not config.option.collectonly or self.inventory is None or self.is_worker:
            return []
        from pytest_hpcnet.transport.fanout import Transport

        transport = Transport(self.inventory)
        try:
            missing = transport.unrecorded_host_keys()
        finally:
            transport.close()
        return [host_keys_line(missing, self.inventory.ssh.known_hosts)]

    @pytest.hookimpl(tryfirst=True)  # an xdist worker's groups are written before it reports
    def pytest_collection_finish(self, session: pytest.Session) -> None:
        """With pair checks selected, the controller probes the pairs alongside the facts; an
        xdist worker leaves the owner of each check and the plan for the controller."""
        self.overlap_pairs = not self.is_worker and any(map(needs_pairs, session.items))
        self.planned = planned_subjects(session.items)
        if self.partition is not None and self.spool is not None:
            groups = {
                item.nodeid: Partition.group(owner_of(item, self.partition))
                for item in session.items
                if item.get_closest_marker("check") is not None
            }
            worker = self.config.workerinput["workerid"]
            self.spool.put(f"collected-{worker}", {"groups": groups, "planned": self.planned})
        # What start-up and collection built lives to the end of the run: moved out of the
        # collector's sight, each later collection walks only what the tests allocate (at
        # 64 nodes, about 0.4 s of the controller's 5 s went to walking it again and again).
        gc.freeze()

    # -- scope ----------------------------------------------------------------------------

    def pytest_collection_modifyitems(self, config: pytest.Config, items: list) -> None:
        """Deselect the requirements the inventory excludes (`scope.exclude`); on a one-node
        inventory, skip what is measured between nodes as not applicable, and without a
        burn-in asked, the burn-in's tests (those of one node collapse at parametrization)."""
        if self.inventory is not None:
            nodes = len(self.inventory.nodes)
            asked = burnin_asked(config)
            for item in items:
                marker = item.get_closest_marker("check")
                reason = marker is not None and across_nodes_reason(marker.args[0], nodes)
                if not reason and not asked and item.get_closest_marker("burnin"):
                    reason = NO_BURNIN
                if reason:
                    item.add_marker(pytest.mark.skip(reason=reason))
        out = set(excluded_ids(self.inventory)) if self.inventory else set()
        if not out:
            return
        keep, drop = [], []
        for item in items:
            marker = item.get_closest_marker("check")
            (drop if marker is not None and marker.args[0] in out else keep).append(item)
        if drop:
            config.hook.pytest_deselected(items=drop)
            items[:] = keep

    # -- recording ------------------------------------------------------------------------

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> None:
        marker = item.get_closest_marker("check")
        if marker is None or self.inventory is None:
            return
        check_id = marker.args[0]
        requirement = marker.args[1] if len(marker.args) > 1 else check_id
        subject, kind = subject_of(item)
        check = Check(check_id, requirement, subject, kind, item.nodeid, self.bundle)
        item.stash[CHECK] = check
        if self.partition is not None:
            self._facts_before(item)

    def _facts_before(self, item: pytest.Item) -> None:
        """On an xdist worker, read the facts a check sees as gathered before it in one
        process: a pair's two ends, every node for a cluster-wide check, so that a node
        found unreachable by another worker is known here before the check asks."""
        assert self.partition is not None
        params = getattr(getattr(item, "callspec", None), "params", {})
        pair = params.get("node_pair")
        if pair is not None:
            names = [pair[0].name, pair[1].name]
        elif owner_of(item, self.partition) is None:
            names = self.partition.names
        else:
            return
        facts = self.open_cluster().gather_facts()
        for name in names:
            facts[name]

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo):
        outcome = yield
        report: pytest.TestReport = outcome.get_result()
        if self.is_worker and item.get_closest_marker("check") is not None:
            # Nothing on the controller reads a report's keywords (every marker and parent
            # name of the item, about half the objects xdist serializes per report).
            report.keywords = {}
        if call.excinfo is not None and call.excinfo.errisinstance(NodeUnreachable):
            report.longrepr = str(call.excinfo.value)  # one line, no traceback
        check = item.stash.get(CHECK, None)
        decisive = report.when == "call" or (report.when == "setup" and not report.passed)
        if check is None or not decisive or self.inventory is None:
            return
        regressions = None
        if self.baseline is not None:
            expect = self.inventory.expect
            regressions = partial(record_regressions, baseline=self.baseline, expect=expect)
        # The one decision (report.verdict, on the run's UTC date): the evidence, the terminal,
        # JUnit and the certificate all show it.
        record, waiver = decide(
            check, report, call.excinfo, self.inventory.waivers, self.run_date, regressions
        )
        verdict, message = record["verdict"], record["message"]
        item.user_properties.extend(fault_properties(record))  # JUnit's testcase properties
        show_verdict(report, verdict, message, waiver)
        if verdict in ("fail", "not_measured") and report.failed:  # one line, whatever --tb
            where = _failing_line(item, call)
            report.longrepr = one_line(where, verdict, message, record["codes"])
        attach(report, record, check.unreachable)
        html_extras(report, record)

    def pytest_report_teststatus(self, report: pytest.TestReport):
        """A check not measured is counted and shown as such, not as failed."""
        return test_status(report)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """Count outcomes; the controller appends each check's record to the evidence."""
        if report.when == "call":
            self.outcomes["waived" if hasattr(report, "wasxfail") else report.outcome] += 1
        elif report.when == "setup" and not report.passed:
            self.outcomes["error" if report.failed else "skipped"] += 1
        carried = detach(report)
        if carried is None or self.bundle is None or self.is_worker:
            return  # only the controller writes the evidence
        if carried.verdict in ("fail", "error"):
            self.failing[carried.check_id] += 1
            if len(self.failures) < FAILURE_LINES:
                self.failures.append(failure_line(carried.record()))
        elif carried.verdict == "not_measured":
            cause = cause_of(carried.record())
            self.not_measured.setdefault(cause, []).append(carried.check_id)
        self.contacted = self.contacted or carried.contacted
        self.unreachable.update(carried.unreachable)
        self.bundle.append_line(carried.line)

    # -- end of session -------------------------------------------------------------------

    @pytest.hookimpl(optionalhook=True)
    def pytest_html_results_summary(self, prefix: list, summary: list, postfix: list) -> None:
        """report.html says the run's verdict at its top (pytest-html)."""
        if self.summary is not None:
            prefix.append(verdict_html(verdict_line(self.summary)))

    def pytest_keyboard_interrupt(self) -> None:
        self.interrupted = True

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        """Close the evidence and decide the verdict before JUnit and pytest-html write their
        reports, so both can carry it."""
        if self.cluster is not None:
            self.unreachable.update(self.cluster.transport.unreachable())
            self.cluster.transport.close()
        if self.is_worker:
            self._hand_over_to_controller()
            return  # the controller alone closes the evidence
        if self.bundle is None or self.inventory is None:
            return
        inv = self.inventory
        if self.spool is not None and not self.is_worker:
            self.planned = self.spool.collected().planned  # what the workers collected
        _plan_trends(self)
        summary = self.bundle.close(
            {
                "cluster": inv.cluster.name,
                "inventory_sha256": inv.sha256,
                "expectations_sha256": inv.expect_sha256,
                "unreachable_nodes": sorted(self.unreachable),
                "interrupted": self.interrupted or session.shouldstop is not False,
                "connection_retries": self.retries(),
                "scope": run_scope(self.config, inv, self.planned).model_dump(),
                "plan": unit_plan(inv.expect),
                "bounds": planned_bounds(inv.expect),
                "lab": is_lab(inv, self.placement()),
                **profile_facts(inv),
                **cluster_node_facts(
                    self.cluster_nodes or [n.name for n in inv.nodes], [n.name for n in inv.nodes]
                ),
                **self.extra_summary,
            }
        )
        self.summary = summary
        self.verdict = summary.verdict
        _write_digest(self)
        _write_trends(self)
        # Every item, report and record lives to the end of the run: out of the collector's
        # sight, the collections after this (pytest's own check for unraisable exceptions at
        # unconfigure, the certificate's) walk only what the end of the run allocates.
        gc.freeze()

    # -- pytest-xdist ---------------------------------------------------------------------

    def _hand_over_to_controller(self) -> None:
        """What the controller needs of this worker beyond the records: the nodes it found
        unreachable, its connection retries, the placement of the nodes it gathered."""
        output = self.config.workeroutput.setdefault(XDIST_OUTPUT, {})
        output["unreachable"] = dict(self.unreachable)
        if self.cluster is not None:
            facts = self.cluster.facts_campaign
            output["retries"] = self.cluster.transport.retries()
            output["metadata"] = {
                name: section
                for name in sorted(facts.gathered_here)
                if (found := facts.known(name)) is not None
                and not found.result.unreachable
                and (section := found.whole("metadata")) is not None
            }
            output["contacted"] = bool(facts.gathered_here)

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node, error) -> None:
        """A worker ended: take its unreachable nodes, retries and placement."""
        output = getattr(node, "workeroutput", {}).get(XDIST_OUTPUT)
        if not output:
            return
        self.unreachable.update(output.get("unreachable", {}))
        for name, count in output.get("retries", {}).items():  # a pair's target: two workers
            self.worker_retries[name] = self.worker_retries.get(name, 0) + count
        for name, text in output.get("metadata", {}).items():
            self.worker_placement[name] = parse_metadata(text)
        self.contacted = self.contacted or bool(output.get("contacted"))

    def summary_lines(self) -> RunLines:
        """What the terminal summary shows of this run, as plain values."""
        assert self.inventory is not None
        inv = self.inventory
        return RunLines(
            cluster=inv.cluster.name,
            region=inv.cluster.region,
            nodes=len(inv.nodes),
            contacted=self.cluster is not None or self.contacted,
            run_dir=self.run_dir,
            summary=self.summary or RunSummary(run_id=self.run_dir.name),
            outcomes=self.outcomes,
            unreachable=self.unreachable,
            retries=self.retries(),
            failing=self.failing,
            failures=self.failures,
            not_measured=self.not_measured,
            header=self.header,
        )

    def retries(self) -> dict[str, int]:
        """Connection retries per node: this process's, else its workers'."""
        return self.cluster.transport.retries() if self.cluster else dict(self.worker_retries)

    def placement(self) -> dict[str, MetadataFacts]:
        """Each reached node's instance metadata: from this process's facts, else from the
        workers' (in inventory order, as one process would have it)."""
        if self.cluster is not None:
            return self.cluster.placement()
        assert self.inventory is not None
        found = self.worker_placement
        return {n.name: found[n.name] for n in self.inventory.nodes if n.name in found}

    @pytest.hookimpl(trylast=True)
    def pytest_unconfigure(self) -> None:
        """Render (and sign) the certificate after every other report is written."""
        if self.spool is not None and not self.is_worker:
            shutil.rmtree(self.spool.path, ignore_errors=True)
        if self.bundle is None or self.inventory is None or self.verdict is None:
            return
        if self.summary is not None:
            junit_verdict(self.config.option.__dict__.get("xmlpath"), self.summary)
        # the certificate's renderer (Jinja2 and every page module, ~50 ms) is imported by the
        # one process that renders, never by an xdist worker
        from pytest_hpcnet.report.handover import finish_run, run_context

        context = run_context(
            self.inventory,
            self.placement(),
            self.unreachable,
            operator=self.config.getoption("hpcnet_operator"),
        )
        self.certificate = finish_run(
            self.run_dir,
            context,
            self.run_date,
            metrics=self.config.getoption("hpcnet_metrics"),
            sign_key=self.config.getoption("hpcnet_sign_key"),
        )


def host_keys_line(missing: list[str], known_hosts: str) -> str:
    """One line: every host key recorded, or the hosts whose keys are not and how to add them."""
    if not missing:
        return f"{PREFIX}host keys: every node and jump host is recorded in {known_hosts}"
    more = f" and {len(missing) - 10} more" if len(missing) > 10 else ""
    shown = ", ".join(missing[:10]) + more
    return (
        f"{PREFIX}host keys: {len(missing)} not recorded in {known_hosts}: {shown} (the run "
        f"refuses them: record each with `ssh-keyscan -t ed25519 HOST >> {known_hosts}`, or set "
        "ssh.host_key_policy: accept-new)"
    )


def planned_subjects(items: list[pytest.Item]) -> dict[str, list[str]]:
    """The subjects each requirement's collected tests name (`[node07]`, `[a->b]`): every one
    must have a record for a handover run to be complete."""
    planned: dict[str, dict[str, None]] = {}
    for item in items:
        marker = item.get_closest_marker("check")
        if marker is not None:
            planned.setdefault(marker.args[0], {})[subject_of(item)[0]] = None
    return {check_id: list(subjects) for check_id, subjects in planned.items()}


def owner_of(item: pytest.Item, partition: Partition) -> int | None:
    """The range whose worker runs a check (None: the cluster-wide group). A pair check is
    its source's; an ACL flow the range listening on its target; a node check its node's.
    Benchmarks (rounds over the whole cluster), the cloud audit's other checks (one read of
    the control plane) and checks without a node are cluster-wide."""
    params = getattr(getattr(item, "callspec", None), "params", {})
    pair = params.get("node_pair")
    if pair is not None:
        return partition.pair_owner(pair[0].name)
    flow = params.get("acl_flow")
    if flow is not None:
        return partition.flow_owner(flow[1].target)
    if item.get_closest_marker("benchmark") or item.get_closest_marker("audit"):
        return None
    node = params.get("node")
    return partition.range_of(node.name) if node is not None else None


def needs_pairs(item: pytest.Item) -> bool:
    """Whether a test reads the pair probes (a `node_pair` or `acl_flow` parameter)."""
    params = getattr(getattr(item, "callspec", None), "params", {})
    return "node_pair" in params or "acl_flow" in params


def _plan_trends(state: HpcnetState) -> None:
    """With an earlier closed run of this cluster in the reports folder, the run will carry
    `trends.html` (the history up to this run): its name goes into the summary first."""
    assert state.inventory is not None
    if not state.is_worker and has_history(
        state.run_dir.parent, state.inventory.cluster.name, state.run_dir.name
    ):
        state.extra_summary["trends"] = TRENDS_FILE


def _write_digest(state: HpcnetState) -> None:
    """Leave this run's figures for the histories of later runs (`trends-digest.json`); a
    run without one is read from its evidence instead, so a failure only costs time."""
    assert state.bundle is not None and state.summary is not None
    assert state.bundle.closed_records is not None  # set by the bundle's close
    try:
        write_run_digest(state.run_dir, state.summary, state.bundle.closed_records)
    except Exception as exc:
        LOG.warning("trends-digest.json not written: %s", exc)


def _write_trends(state: HpcnetState) -> None:
    """Write `trends.html` into the run folder (before the certificate digests the folder);
    a page that cannot be built says why instead of leaving the summary's name dangling."""
    if "trends" not in state.extra_summary or state.inventory is None:
        return
    from pytest_hpcnet.report.trends_page import write_trends  # Jinja2: the renderer only

    expect = state.inventory.expect
    out = state.run_dir / TRENDS_FILE
    try:
        found = history(
            state.run_dir.parent,
            state.inventory.cluster.name,
            expect.regression_tolerance,
            expect.regression_tolerances,
            max_runs=SESSION_TREND_RUNS,
        )
        write_trends(found, out)
    except Exception as exc:
        LOG.warning("trends.html not built: %s", exc)
        with contextlib.suppress(OSError):
            out.write_text(f"<!DOCTYPE html><p>trends not built: {type(exc).__name__}</p>\n")


def terminal_reporter(config: pytest.Config) -> Reporter:
    """Write progress lines past pytest's output capture (and log them)."""
    terminal = config.pluginmanager.get_plugin("terminalreporter")
    capture = config.pluginmanager.get_plugin("capturemanager")
    if terminal is None or hasattr(config, "workerinput") or config.get_verbosity() < -1:
        return silent

    def write(line: str) -> None:
        # Private API, read defensively: under -q pytest leaves a row of progress dots that
        # the public `ensure_newline()` does not know about (it tracks file paths, not
        # columns), and no public call says whether the current line is dirty. Without
        # `_tw` (another pytest), the line is written as is.
        writer = getattr(terminal, "_tw", None)
        if writer is not None and writer.width_of_current_line:
            writer.line()
        terminal.write_line(PREFIX + line)

    def report(line: str) -> None:
        LOG.info(line)
        if capture is None:
            write(line)
            return
        with capture.global_and_fixture_disabled():
            write(line)

    return report


def _failing_line(item: pytest.Item, call: pytest.CallInfo) -> str:
    """`path:line` of the failing assert in the test's own file."""
    path, line, _ = item.location
    if call.excinfo is not None:
        own = [e for e in call.excinfo.traceback if e.path == item.path]
        if own:
            line = own[-1].lineno
    return f"{path}:{(line or 0) + 1}"


def free_space_problem(run_dir: Path, nodes: int) -> str | None:
    """Why the reports folder's disk cannot hold this run's evidence, or None.

    A 128-node static run writes about 23 MB (evidence, outputs, reports); the floor is
    `MIN_FREE_BYTES` or `FREE_BYTES_PER_NODE` per node, whichever is larger."""
    needed = max(MIN_FREE_BYTES, FREE_BYTES_PER_NODE * nodes)
    free = shutil.disk_usage(run_dir).free
    if free >= needed:
        return None
    mb = 1024 * 1024
    return (
        f"reports directory {run_dir} has {free / mb:.0f} MB free; a run on {nodes} nodes "
        f"needs at least {needed // mb} MB for its evidence (free some space, or choose "
        "another --reports-dir)"
    )


def _open_run_dir(config: pytest.Config, state: HpcnetState) -> None:
    """Create the run folder (a clear error before any test if it cannot be written)."""
    try:
        state.run_dir.mkdir(parents=True, exist_ok=True)
        probe = state.run_dir / ".write-test"
        probe.write_text("ok")
        probe.unlink()
    except OSError as exc:
        raise pytest.UsageError(
            f"reports directory {state.run_dir} is not writable: {exc.strerror or exc}"
        ) from None
    nodes = len(state.inventory.nodes) if state.inventory else 0
    problem = free_space_problem(state.run_dir, nodes)
    if problem:
        with contextlib.suppress(OSError):
            state.run_dir.rmdir()  # only if still empty: nothing of another process
        raise pytest.UsageError(problem)
    state.bundle = EvidenceBundle(state.run_dir, state.run_dir.name)
    started = getattr(config, "workerinput", {}).get("hpcnet_run_started")
    if started:
        state.bundle.started_at = datetime.fromisoformat(started)
    if state.is_worker:
        return
    add_environment(config, state.inventory)
    if hasattr(config.option, "htmlpath") and not config.option.htmlpath:
        config.option.htmlpath = str(state.run_dir / "report.html")
        config.option.self_contained_html = True
    if hasattr(config.option, "xmlpath") and not config.option.xmlpath:
        config.option.xmlpath = str(state.run_dir / "junit.xml")
