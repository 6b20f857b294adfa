"""The inputs of `hpcnet merge`: each partition bundle verified and read (`load_partition`),
the keys it must be signed with (`check_keys`), and why a set of them cannot be merged into
one certificate (`check_partitions`: the same run twice, different clusters (by name or by
the whole node list each input's summary names), an input naming no node list, a node or pair
checked twice, a waiver whose validity the merged run date would change).
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Any

from pytest_hpcnet.report.evidence import (
    CheckRecord,
    EvidenceError,
    RunSummary,
    effective_verdict,
    node_list_sha256,
    read_records,
    read_summary,
    run_date_of,
)
from pytest_hpcnet.report.signing import (
    key_fingerprint,
    load_private_key,
    load_public_key,
    read_facts,
)
from pytest_hpcnet.report.verify import verify

PathLike = str | os.PathLike[str]
MAX_NAMED = 5
UNSIGNED_HINT = "sign the partition runs with --hpcnet-sign-key, or give --allow-unsigned"


class MergeRefused(ValueError):
    """The inputs cannot be merged; `problems` has one line per problem."""

    def __init__(self, problems: Sequence[str]) -> None:
        super().__init__("; ".join(problems))
        self.problems = list(problems)


@dataclass
class Partition:
    """One verified input bundle, read."""

    run_dir: Path
    summary: RunSummary | None
    facts: dict[str, Any]
    records: list[CheckRecord]
    digest: str
    signed_by: str | None

    @property
    def run_id(self) -> str:
        return self.summary.run_id if self.summary else self.run_dir.name

    @property
    def cluster(self) -> str:
        return str(self.facts.get("cluster", {}).get("name", ""))

    @property
    def run_date(self) -> date:
        return run_date_of(self.summary, self.records)

    @property
    def cluster_nodes(self) -> list[str]:
        """The whole cluster's node list the run's summary names (empty: none)."""
        return list(self.summary.cluster_nodes) if self.summary else []

    @property
    def covered(self) -> list[str]:
        """The nodes this input covered (its share of `cluster_nodes`)."""
        return list(self.summary.partition_nodes) if self.summary else []


def load_partition(
    run_dir: PathLike, key_fingerprints: Sequence[str] = (), allow_unsigned: bool = False
) -> Partition:
    """Verify and read one input bundle: signed (unless `allow_unsigned`), and with
    `key_fingerprints` signed by one of them."""
    root = Path(run_dir)
    if not root.is_dir():
        raise MergeRefused([f"{root}: not a run folder (reports/<run-id>/)"])
    result = verify(root)
    problems = [f"{root}: {line}" for line in result.problems]
    if result.ok and key_fingerprints and not result.signed:
        problems.append(f"{root}: bundle is not signed, but --public-key was given")
    elif result.ok and key_fingerprints and result.key_fingerprint not in key_fingerprints:
        problems.append(f"{root}: signed by key {result.key_fingerprint}, not a given key")
    elif result.ok and not result.signed and not allow_unsigned:
        problems.append(f"{root}: bundle is not signed ({UNSIGNED_HINT})")
    if problems:
        raise MergeRefused(problems)
    try:
        records = read_records(root)
        summary = read_summary(root)
    except (EvidenceError, ValueError) as exc:
        raise MergeRefused([f"{root}: {exc}"]) from None
    return Partition(
        run_dir=root,
        summary=summary,
        facts=read_facts(root) or {},
        records=records,
        digest=result.digest,
        signed_by=result.key_fingerprint if result.signed else None,
    )


def merged_start(parts: Sequence[Partition]) -> Any:
    starts = [p.summary.started_at for p in parts if p.summary and p.summary.started_at]
    return min(starts) if starts else None


def merged_run_date(parts: Sequence[Partition]) -> date:
    summary = RunSummary(run_id="merged", started_at=merged_start(parts))
    return run_date_of(summary, [r for p in parts for r in p.records])


def _overlaps(parts: Sequence[Partition]) -> list[str]:
    seen: dict[tuple[str, str], list[str]] = {}
    for part in parts:
        keys = {(r.check_id, r.subject) for r in part.records if r.kind != "cluster"}
        for key in keys:
            seen.setdefault(key, []).append(part.run_id)
    shared = sorted((k, runs) for k, runs in seen.items() if len(runs) > 1)
    if not shared:
        return []
    named = [f"{c}[{s}] ({', '.join(runs)})" for (c, s), runs in shared[:MAX_NAMED]]
    more = f" and {len(shared) - MAX_NAMED} more" if len(shared) > MAX_NAMED else ""
    return [f"overlapping partitions: checked in more than one bundle: {', '.join(named)}{more}"]


def _waiver_dates(parts: Sequence[Partition]) -> list[str]:
    merged = merged_run_date(parts)
    problems = []
    for part in parts:
        own = part.run_date
        for record in part.records:
            if record.waiver is None:
                continue
            before, after = effective_verdict(record, own), effective_verdict(record, merged)
            if before != after:
                problems.append(
                    f"{part.run_dir}: {record.check_id}[{record.subject}] is {before} on its "
                    f"run date {own} but {after} on the merged run date {merged} "
                    f"(waiver expires {record.waiver.expires})"
                )
    return problems


def _node_lists(parts: Sequence[Partition]) -> list[str]:
    """An input naming no cluster node list, or inputs naming different ones."""
    problems = [
        f"{p.run_dir}: summary.json names no cluster node list (a run of an older version): "
        "run the partition again"
        for p in parts
        if not p.cluster_nodes
    ]
    digests = {p.run_id: node_list_sha256(p.cluster_nodes) for p in parts}
    if not problems and len(set(digests.values())) > 1:
        named = ", ".join(
            f"{p.run_id} lists {len(p.cluster_nodes)} nodes (sha256 {digests[p.run_id][:12]})"
            for p in parts
        )
        problems.append(f"node lists differ (not partitions of one cluster): {named}")
    return problems


def check_partitions(parts: Sequence[Partition]) -> list[str]:
    """Why these bundles cannot be merged into one certificate (empty when they can)."""
    problems: list[str] = []
    runs = Counter(p.run_id for p in parts)
    problems.extend(f"run {run} given more than once" for run, n in runs.items() if n > 1)
    clusters = {p.cluster for p in parts}
    if len(clusters) > 1:
        named = ", ".join(f"{p.run_dir} is {p.cluster or '(unnamed)'!r}" for p in parts)
        problems.append(f"cluster names differ: {named}")
    if not problems:
        problems.extend(_node_lists(parts))
    plans = {p.run_id: getattr(p.summary, "plan", None) for p in parts if p.summary}
    if not problems and len({repr(v) for v in plans.values()}) > 1:
        named = ", ".join(f"{run} plans {plan}" for run, plan in plans.items())
        problems.append(f"plans differ (GPUs, ERIs, links or DCGM tests per node): {named}")
    if not problems:
        problems.extend(_overlaps(parts))
        problems.extend(_waiver_dates(parts))
    return problems


def check_keys(sign_key: PathLike | None, public_keys: Sequence[PathLike]) -> list[str]:
    """Key fingerprints of `public_keys`; refuses unreadable keys before anything is written."""
    problems, fingerprints = [], []
    for path in public_keys:
        try:
            fingerprints.append(key_fingerprint(load_public_key(path)))
        except (OSError, ValueError) as exc:
            problems.append(f"--public-key {path}: {exc}")
    if sign_key is not None:
        try:
            load_private_key(sign_key)
        except (OSError, ValueError, TypeError) as exc:
            problems.append(f"--sign-key {sign_key}: {exc}")
    if problems:
        raise MergeRefused(problems)
    return fingerprints
