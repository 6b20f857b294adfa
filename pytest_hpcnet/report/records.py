"""The typed records of a run: what one check measured and ran, its verdict, the run summary.

The same types are built as a check runs, appended to `evidence.jsonl`, read back, and
rendered; the waiver a record carries is the inventory's `Waiver`.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from pytest_hpcnet.inventory.models import Waiver

Verdict = Literal["pass", "fail", "error", "waived", "skipped"]
OverallVerdict = Literal["ACCEPTED", "REJECTED", "INCOMPLETE"]
Comparison = Literal[">=", "<=", "==", "in"]
VERDICTS: tuple[str, ...] = ("pass", "fail", "error", "waived", "skipped")


class Measurement(BaseModel):
    """One measured quantity and the threshold it was judged against."""

    name: str
    value: float | str | None = None
    unit: str = ""
    threshold: float | str | list[float | str] | None = None
    comparison: Comparison | None = None
    threshold_source: str = ""
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


class CheckRecord(BaseModel):
    """The outcome of one check on one subject (a node, a pair `a->b`, or the cluster)."""

    model_config = ConfigDict(extra="ignore")

    check_id: str
    requirement: str
    nodeid: str = ""
    subject: str
    kind: Literal["node", "pair", "cluster"] = "node"
    measured: list[Measurement] = Field(default_factory=list)
    verdict: Verdict
    message: str = ""
    commands: list[CommandRecord] = Field(default_factory=list)
    started_at: datetime | None = None
    ended_at: datetime | None = None
    tool_versions: dict[str, str] = Field(default_factory=dict)
    suspect_nodes: list[str] = Field(default_factory=list)
    waiver: Waiver | None = None


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
