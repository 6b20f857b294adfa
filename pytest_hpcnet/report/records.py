"""The typed records of a run: what one check measured and ran, its verdict, the run summary.

The same types are built as a check runs, appended to `evidence.jsonl`, read back, and
rendered; the waiver a record carries is the inventory's `Waiver`.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from pytest_hpcnet.inventory.models import Waiver
from pytest_hpcnet.requirements.registry import default_code

# not_measured: what the check needed was not measured (a cut or missing output, a node that
# did not answer, no bound): never a pass, never waived, always INCOMPLETE.
RecordVerdict = Literal["pass", "fail", "not_measured", "error", "waived", "skipped"]
# PASSED: a partial run (a marker or -k selection, or a scope narrower than the handover)
# in which everything it covered passed; it is never a handover certificate.
OverallVerdict = Literal["ACCEPTED", "PASSED", "REJECTED", "INCOMPLETE"]
GOOD_VERDICTS: tuple[str, ...] = ("ACCEPTED", "PASSED")
Comparison = Literal[">=", "<=", "==", "in"]
VERDICTS: tuple[str, ...] = ("pass", "fail", "not_measured", "error", "waived", "skipped")


class Measurement(BaseModel):
    """One measured quantity and the threshold it was judged against."""

    name: str
    value: float | str | None = None
    unit: str = ""
    threshold: float | str | list[float | str] | None = None
    comparison: Comparison | None = None
    threshold_source: str = ""
    subject: str = ""  # the device or GPU within the record's subject, if narrower
    outcome: Literal["pass", "fail", "not_measured"] | None = None
    """The judge's decision on this figure (None: reported, not judged); never re-judged."""
    ceiling: float | None = None  # the physical ceiling; a figure above it is not measured
    basis: str = ""  # how the bound was set: profile floor, SKU figure x fraction, peers …
    code: str = ""  # a failed figure's fault code (registry `faults`: docs/fault-codes.md)
    baseline: float | None = None
    delta: float | None = Field(
        default=None, description="(value - baseline) / baseline, as a fraction"
    )


class CommandRecord(BaseModel):
    """One command run on one node for a check; its output lives in `outputs/<digest>.txt`."""

    node: str
    command: str
    exit_status: int | None = None
    duration_s: float | None = None
    started_at: datetime | None = None
    output_digest: str | None = None
    command_digest: str | None = None
    """The whole command in `outputs/<digest>.txt` when `command` shows only its head."""


class CheckRecord(BaseModel):
    """The outcome of one check on one subject (a node, a pair `a->b`, or the cluster)."""

    model_config = ConfigDict(extra="ignore")

    check_id: str
    requirement: str
    nodeid: str = ""
    subject: str
    kind: Literal["node", "pair", "cluster"] = "node"
    measured: list[Measurement] = Field(default_factory=list)
    verdict: RecordVerdict
    message: str = ""
    commands: list[CommandRecord] = Field(default_factory=list)
    started_at: datetime | None = None
    ended_at: datetime | None = None
    tool_versions: dict[str, str] = Field(default_factory=dict)
    suspect_nodes: list[str] = Field(default_factory=list)
    waiver: Waiver | None = None
    sections: list[str] = Field(default_factory=list)
    """The facts sections the judge read (the certificate's excerpt shows these)."""
    codes: list[str] = Field(default_factory=list)
    """The fault codes of a failed (or waived) record: its failed measurements' codes, else
    its requirement's default (docs/fault-codes.md)."""

    def fault_codes(self) -> list[str]:
        """`codes`, or for a record written without them, its failed measurements' codes,
        else its requirement's default ([] for a record that did not fail)."""
        if self.codes or self.verdict not in ("fail", "waived"):
            return list(self.codes)
        found = [m.code for m in self.measured if m.outcome == "fail" and m.code]
        default = default_code(self.check_id)
        return list(dict.fromkeys(found)) or ([default] if default else [])


class ScopeEntry(BaseModel):
    """A requirement (or one subject of it) left out of the verdict or not measured, and why."""

    check_id: str
    subject: str = ""
    reason: str
    key: str = ""  # the inventory key that would bring it in (an unset bound), if any
    # inventory: `scope.exclude`; not_applicable: the inventory expects nothing there;
    # skipped: in scope and not measured; unbound: in scope, its threshold unset (see `key`);
    # not_run: in scope and no record at all (or no record for a subject the plan expects);
    # not_measured: in scope, its judge measured nothing it could judge
    kind: Literal[
        "inventory", "not_applicable", "skipped", "unbound", "not_run", "not_measured"
    ] = "inventory"


class RunScope(BaseModel):
    """What a run covered: the whole handover, or a part of it, and what it left out."""

    handover: bool = True  # every requirement selected: the run can be a handover certificate
    label: str = "handover"  # what it covered when partial, e.g. "static checks"
    selection: str = ""  # the selection as given on the command line ("-m static", "-k mtu")
    # the requirement ids a handover run must hold records of (set by the session; a
    # required id with no record is `incomplete`, kind not_run)
    required: list[str] = Field(default_factory=list)
    # the subjects the run's plan holds per requirement (each node, pair, flow collected in a
    # handover run); a planned subject with no record is `incomplete`, kind not_run
    expected: dict[str, list[str]] = Field(default_factory=dict)
    excluded: list[ScopeEntry] = Field(default_factory=list)  # inventory `scope.exclude`
    incomplete: list[ScopeEntry] = Field(default_factory=list)  # in scope, not measured


class RunSummary(BaseModel):
    """What `summary.json` holds; extra keys given to `close()` are kept as they are."""

    model_config = ConfigDict(extra="allow")

    run_id: str
    cluster: str = ""
    inventory_sha256: str = ""
    expectations_sha256: str = ""
    started_at: datetime | None = None
    ended_at: datetime | None = None
    unreachable_nodes: list[str] = Field(default_factory=list)
    interrupted: bool = False
    counts: dict[str, int] = Field(default_factory=dict)
    verdict: OverallVerdict = "INCOMPLETE"
    profile: str = ""  # the inventory's profile name ("" when none)
    profile_sources: dict[str, str] = Field(default_factory=dict)  # profile `source:` notes
    lab: bool = False  # the evidence comes from the embedded lab (emulated tools)
    scope: RunScope = Field(default_factory=RunScope)
    # the whole cluster's nodes (the inventory's, before `--hpcnet-nodes`), in its order, with
    # their digest and count, and the share of them this run covered: `hpcnet merge` names
    # the nodes no partition covered and refuses partitions of different node lists
    cluster_nodes: list[str] = Field(default_factory=list)
    cluster_nodes_sha256: str = ""
    cluster_node_count: int = 0
    partition_nodes: list[str] = Field(default_factory=list)
