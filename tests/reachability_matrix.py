"""The reachability matrix of a set of connect results: test-only (the suites judge each
pair's `ConnectResults` directly); kept for the port-probe tests' findings."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from pytest_hpcnet.probes.ports import ConnectResults, Flow, ListenerStatus, Reachability


@dataclass(frozen=True)
class MatrixCell:
    """One flow between one source and one target."""

    source: str
    target: str
    result: Reachability


@dataclass(frozen=True)
class ReachabilityMatrix:
    """Every (source, target, flow) outcome, and the findings about those not open."""

    pairs: tuple[tuple[str, str], ...]
    flows: tuple[Flow, ...]
    cells: tuple[MatrixCell, ...]
    findings: tuple[str, ...]

    def outcome(self, source: str, target: str, proto: str, port: int) -> str | None:
        """The outcome of one flow, or None when it was not tested."""
        for cell in self.cells:
            if (cell.source, cell.target, cell.result.proto, cell.result.port) == (
                source,
                target,
                proto,
                port,
            ):
                return cell.result.outcome
        return None

    def render(self) -> str:
        """A plain-text table: one row per pair, one column per flow."""
        head = ["source -> target"] + [str(f) for f in self.flows]
        rows = [head]
        for source, target in self.pairs:
            row = [f"{source} -> {target}"]
            for f in self.flows:
                row.append(self.outcome(source, target, f.proto, f.port) or "-")
            rows.append(row)
        widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
        return "\n".join(
            "  ".join(cell.ljust(w) for cell, w in zip(r, widths, strict=True)).rstrip()
            for r in rows
        )


_MEANING = {
    "refused": "the host answered but nothing listens (or the firewall rejects)",
    "timeout": "no answer: dropped by a security group, network ACL or firewall",
}


def reachability_matrix(
    results: Mapping[tuple[str, str], ConnectResults | Iterable[Reachability]],
    listeners: Mapping[str, ListenerStatus] | None = None,
) -> ReachabilityMatrix:
    """Collect (source, target) -> results into a matrix; findings for every flow not open.

    With `listeners` (target -> status), a flow whose port the target's listener could
    not bind is reported as untested rather than blocked, and a UDP timeout on a port
    held by another service (which does not echo) as inconclusive.
    """
    pairs: list[tuple[str, str]] = []
    flows: dict[Flow, None] = {}
    cells: list[MatrixCell] = []
    findings: list[str] = []
    for (source, target), outcome in results.items():
        pairs.append((source, target))
        if isinstance(outcome, ConnectResults):
            items = outcome.results
            if outcome.tool_missing:
                findings.append(f"{source} -> {target}: not tested (python3 missing on {source})")
            for problem in outcome.problems:
                findings.append(f"{source} -> {target}: {problem}")
        else:
            items = tuple(outcome)
        status = (listeners or {}).get(target)
        for r in items:
            flows.setdefault(r.flow, None)
            cells.append(MatrixCell(source, target, r))
            if r.open:
                continue
            prefix = f"{source} -> {target} {r.proto} {r.port}: {r.outcome}"
            failed = (
                next((w for p, n, w in status.failed if p == r.proto and n == r.port), None)
                if status
                else None
            )
            if status is not None and failed is not None:
                findings.append(f"{prefix} (not tested: listener could not bind: {failed})")
            elif (
                status is not None
                and r.proto == "udp"
                and r.port in status.udp_busy
                and r.outcome == "timeout"
            ):
                findings.append(
                    f"{prefix} (inconclusive: port held by another service that does not echo)"
                )
            elif r.outcome == "error":
                findings.append(f"{prefix}: {r.detail or 'unknown error'}")
            else:
                findings.append(f"{prefix} ({_MEANING[r.outcome]})")
    return ReachabilityMatrix(
        pairs=tuple(pairs), flows=tuple(flows), cells=tuple(cells), findings=tuple(findings)
    )
