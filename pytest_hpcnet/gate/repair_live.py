"""The repair loop on a real cluster: `nvidia-smi -r` over the node's SSH connection, an ECS
reboot waited for (`Running`, then SSH), and the re-acceptance as pytest runs on the node
alone (its failed checks, then `-m gpu_load`), judged as the gate judges a run."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tenacity import RetryError, Retrying, retry_if_result, stop_after_delay, wait_fixed

from pytest_hpcnet.gate import confirm, history
from pytest_hpcnet.gate.judge import NodeJudgement, judge
from pytest_hpcnet.gate.repair import Acceptance, RepairError, RepairLoop, Step
from pytest_hpcnet.inventory.gate_settings import RepairSettings
from pytest_hpcnet.inventory.models import Inventory
from pytest_hpcnet.probes.metadata import metadata_command, parse_metadata
from pytest_hpcnet.report.evidence import CheckRecord, EvidenceError, read_records, read_summary
from pytest_hpcnet.transport.results import CommandResult

REPAIR_DIR = "repair"
"""Under `<reports>/.gate/<run-id>/`: one folder per node with its re-acceptance runs."""
TICKETS_DIR = "tickets"
"""Under `<reports>/.gate/<run-id>/`: the ticket bundle of each node left for replacement."""
BUSY_QUERY = "nvidia-smi --query-compute-apps=pid,process_name --format=csv,noheader"
RESET = "nvidia-smi -r"
REFUSED = "In use by another client"
"""How `nvidia-smi -r` names a GPU it would not reset (a process, or nvidia-persistenced,
holds it: NVIDIA/NVSentinel#1690)."""
COMMAND_TIMEOUT_S = 120.0
POLL_S = 2.0
LEAVE_RUNNING_S = 60.0
"""How long to wait for the instance to leave `Running` after RebootInstance (it may be
back before the first poll)."""
Run = Callable[[str, str, float], CommandResult]
Runner = Callable[..., Any]


def reaccept_argv(inventory: Path, reports: Path, node: str, judgement: NodeJudgement) -> list[str]:
    """One pytest run on `node` alone: its failed tests and every `gpu_load` test (`-k`
    matches a test's name or its markers, so one run holds both)."""
    names = dict.fromkeys(nid.partition("::")[2].partition("[")[0] for nid in judgement.nodeids)
    expression = " or ".join(["gpu_load", *(n for n in names if n)])
    argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-k", expression]
    argv += ["--hpcnet-inventory", str(inventory), "--hpcnet-reports-dir", str(reports)]
    return [*argv, "--hpcnet-nodes", node, str(confirm.SUITES)]


def transport_run(inventory: Inventory) -> Run:
    """Run one command on one node over a fresh SSH connection (after a reboot, a cached one
    is dead)."""
    from pytest_hpcnet.transport.fanout import Transport

    def run(node: str, command: str, timeout_s: float) -> CommandResult:
        transport = Transport(inventory, concurrency=1)  # connects to `node` only
        try:
            return transport.run(node, command, timeout_s)
        finally:
            transport.close()

    return run


def _poll(what: Callable[[], Any], done: Callable[[Any], bool], limit_s: float, every_s: float):
    """`what()` every `every_s` until `done(result)`, at most `limit_s`; the last result and
    whether it was done."""
    retrying = Retrying(
        retry=retry_if_result(lambda r: not done(r)),
        stop=stop_after_delay(limit_s),
        wait=wait_fixed(every_s),
    )
    try:
        return retrying(what), True
    except RetryError as exc:
        return exc.last_attempt.result(), False


@dataclass
class LiveRepairer:
    """The `Repairer` of a real cluster (or the lab): SSH, the ECS API, pytest."""

    inventory_path: Path
    inventory: Inventory
    run_dir: Path
    policy: RepairSettings
    power: Any = None
    """An `EcsPower` (opened on first reboot when None)."""
    run: Run | None = None
    runner: Runner = subprocess.run
    poll_s: float = POLL_S
    leave_running_s: float = LEAVE_RUNNING_S
    first: list[CheckRecord] | None = None
    _instances: dict[str, str] = field(default_factory=dict)

    def _ssh(self, node: str, command: str, timeout_s: float = COMMAND_TIMEOUT_S) -> CommandResult:
        if self.run is None:
            self.run = transport_run(self.inventory)
        return self.run(node, command, timeout_s)

    # -- the GPU reset -------------------------------------------------------------------

    def gpu_busy(self, node: str) -> list[str]:
        result = self._ssh(node, BUSY_QUERY)
        if not result.ok:
            return [f"cannot tell: {result.failure}"]
        return [line.strip() for line in result.stdout.splitlines() if line.strip()]

    def reset(self, node: str) -> Step:
        started = time.monotonic()
        result = self._ssh(node, RESET)
        if not result.ok:  # a refusal names each GPU: `GPU 0000...: In use by another client`
            refused = [line.strip() for line in result.stdout.splitlines() if REFUSED in line]
            raise RepairError(f"`{RESET}`: {'; '.join(refused) or result.failure}")
        return Step(reset_s=round(time.monotonic() - started, 1))

    # -- the reboot ----------------------------------------------------------------------

    def instance_id(self, node: str) -> str:
        """The node's instance id, from its metadata service (asked before the reboot)."""
        if node not in self._instances:
            result = self._ssh(node, metadata_command(("instance-id",)), 30)
            found = parse_metadata(result.stdout).instance_id if result.ok else None
            if not found:
                raise RepairError(f"no instance id from {node}'s metadata: {result.failure}")
            self._instances[node] = found
        return self._instances[node]

    def _power(self) -> Any:
        if self.power is None:
            from pytest_hpcnet.gate.repair_cloud import open_power

            self.power = open_power(self.inventory.cluster.region, self.inventory.cloud)
        return self.power

    def reboot(self, node: str) -> Step:
        from pytest_hpcnet.cloud.readers import CloudReadError

        instance = self.instance_id(node)
        try:
            power = self._power()
            power.reboot(instance)
            started = time.monotonic()
            limit = self.policy.reboot_timeout_s
            status, left = _poll(
                lambda: power.status(instance), lambda s: s != "Running", self.leave_running_s, 0.5
            )
            if not left:
                raise RepairError(
                    f"{instance} still Running {self.leave_running_s:g} s after RebootInstance"
                )
            status, ok = _poll(
                lambda: power.status(instance), lambda s: s == "Running", limit, self.poll_s
            )
        except CloudReadError as exc:
            raise RepairError(str(exc)) from None
        if not ok:
            raise RepairError(f"{instance} not Running {limit:g} s after the reboot ({status})")
        running = time.monotonic() - started
        result, ok = _poll(
            lambda: self._ssh(node, "true", 10),
            lambda r: r.ok,
            self.policy.ssh_timeout_s,
            self.poll_s / 4,
        )
        if not ok:
            why = result.failure
            raise RepairError(f"SSH not answering {self.policy.ssh_timeout_s:g} s after: {why}")
        return Step(
            reboot_to_running_s=round(running, 1),
            reboot_to_ssh_s=round(time.monotonic() - started, 1),
        )

    # -- the re-acceptance ---------------------------------------------------------------

    def _first(self) -> list[CheckRecord]:
        if self.first is None:
            self.first = confirm.first_records(self.run_dir)
        return self.first

    def _pytest(self, argv: list[str], reports: Path, lines: list[str]):
        """One pytest run into `reports`; its records and summary, or why there are none."""
        reports.mkdir(parents=True, exist_ok=True)
        before = {p.name for p in reports.iterdir()}
        lines.append(" ".join(argv[3:]))
        try:
            proc = self.runner(
                argv,
                check=False,
                capture_output=True,
                text=True,
                timeout=self.policy.reaccept_timeout_s,
            )
        except subprocess.TimeoutExpired:
            return f"did not finish in {self.policy.reaccept_timeout_s:g} s"
        new = sorted({p.name for p in reports.iterdir()} - before)
        if not new:
            return f"pytest exited {proc.returncode} without a run"
        try:
            records, summary = read_records(reports / new[-1]), read_summary(reports / new[-1])
        except (EvidenceError, ValueError) as exc:
            return f"{new[-1]}: {exc}"
        if summary is None or summary.interrupted:
            return f"{new[-1]} did not finish"
        return records, summary

    def reaccept(self, node: str, judgement: NodeJudgement) -> Acceptance:
        reports = self.run_dir.parent / confirm.GATE_DIR / self.run_dir.name / REPAIR_DIR / node
        lines: list[str] = []
        got = self._pytest(
            reaccept_argv(self.inventory_path, reports, node, judgement), reports, lines
        )
        if isinstance(got, str):
            return Acceptance(False, got, lines)
        records, summary = got
        first = self._first()
        outcome = confirm.outcomes({node: judgement}, records, summary, first=first)[node]
        if outcome.outcome != "flaky":  # "flaky" here: every failed check passes now
            detail = "failed again" if outcome.outcome == "confirmed" else "not judged"
            why = f"{', '.join(judgement.checks)} {detail}: {outcome.detail}"
            return Acceptance(False, why, lines)
        status = judge(records, summary, [node]).get(node)
        load = sorted({r.check_id for r in records} - set(judgement.checks))
        below = confirm.peer_misses(first, records, node, load)
        if status is None or status.status != "pass" or below:
            why = (status.checks or [status.why]) if status else ["no record"]
            return Acceptance(False, f"under load: {'; '.join(below or why)}", lines)
        passed = f"{', '.join(judgement.checks)} and {len(load)} GPU load checks pass"
        return Acceptance(True, f"{summary.run_id}: {passed}", lines)

    # -- the ticket ----------------------------------------------------------------------

    def ticket(self, node: str) -> str:
        return write_node_ticket(self.run_dir, node, self.policy.ticket_sign_key)


def _ticket_path(run_dir: Path, node: str) -> Path:
    gate_dir = run_dir.parent / confirm.GATE_DIR / run_dir.name
    return gate_dir / TICKETS_DIR / f"ticket-{run_dir.name}-{node}.tar.gz"


def write_node_ticket(run_dir: Path, node: str, sign_key: str | None) -> str:
    """`hpcnet ticket`'s bundle of `node` from the night's run, under the gate's folder of
    that run (signed with `sign_key` when given); its path, RepairError when not written."""
    from pytest_hpcnet.report.ticket import register_run_credentials, write_ticket

    out = _ticket_path(run_dir, node)
    try:
        register_run_credentials(run_dir)
        write_ticket(run_dir, node, out, sign_key)
    except (OSError, ValueError) as exc:
        raise RepairError(str(exc)) from None
    return str(out)


def loop_for(inventory_path: Path, inventory: Inventory, run_dir: Path) -> RepairLoop | None:
    """The repair loop of the inventory's `gate.repair` policy (None without one), with the
    repairs of earlier gate runs in the reports folder."""
    policy = inventory.gate.repair
    if policy is None:
        return None
    reports = run_dir.resolve().parent
    return RepairLoop(
        policy,
        LiveRepairer(inventory_path, inventory, run_dir.resolve(), policy),
        history.repairs(reports, inventory.cluster.name),
        len(inventory.nodes),
    )
