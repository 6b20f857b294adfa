"""`hpcnet merge`: one certificate from the bundles of several partition controllers.

Each input is a verified run folder of the same cluster. The merged folder holds every
record and output of the inputs, a summary that names them (`merged_from`, with their
digests and signers), and a certificate rendered from the merged records, so its
verdict is the one a single run with the same evidence would get. Nothing is written
unless every input passes the checks (`MergeRefused` lists the problems).

Inputs must be signed (`allow_unsigned` merges unsigned ones and says so in the summary)
and be partitions: a node or pair checked by two inputs is refused, and so is a waiver
whose validity differs between an input's run date and the merged one. Cluster-level
records (subject `cluster`) are kept from every input, one per partition.

Every input's summary names the whole cluster's node list (`cluster_nodes`, the inventory's
before `--hpcnet-nodes`) and its share of it (`partition_nodes`); inputs naming different
lists, or none, are refused. A node no input covered (a partition left out of the merge) gets
a `partitions` record that it was not measured.

Per-partition runs measure only the pairs inside their own partition. For every pair
requirement the inputs ran (`PAIR_CHECKS` with a record in any input), each pair of the ring
over the whole cluster's node list that crosses partitions, or has an end no input covered,
and that no input measured, gets a record that it was not measured, so the merged verdict is
INCOMPLETE unless the inventories' scope leaves that requirement out. Same-vSwitch placement
across partitions is not checked either; the certificate lists it as a requirement that did
not run.

A burn-in's samples (`burnin/NODE.jsonl`) come along for the nodes each input covered, so the
merged evidence page draws every node's timeline.
"""

from __future__ import annotations

import shutil
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_hpcnet.campaigns.schedule import ring_pairs
from pytest_hpcnet.report.certificate.burnin_timeline import FOLDER as BURNIN_FOLDER
from pytest_hpcnet.report.certificate.page import CertificateContext, render_certificate
from pytest_hpcnet.report.certificate.rows import DEFAULT_REQUIREMENTS, RequirementSpec
from pytest_hpcnet.report.evidence import (
    INVENTORY_COPY,
    CheckRecord,
    RunSummary,
    cluster_node_facts,
    merge_bundles,
)
from pytest_hpcnet.report.merge_inputs import (
    MergeRefused,
    Partition,
    PathLike,
    check_keys,
    check_partitions,
    load_partition,
    merged_start,
)
from pytest_hpcnet.report.records import RunScope
from pytest_hpcnet.report.signing import (
    sign,
    signer_display,
)
from pytest_hpcnet.requirements.registry import pair_requirements

CROSS_PARTITION = RequirementSpec(
    check_id="cross_partition",
    requirement="Pairs and placement across partitions (not run by per-partition controllers)",
)
NOT_COVERED = [
    "pairs whose nodes are in different partitions",
    "same-vSwitch placement across partitions",
]
MISSING_PARTITION = RequirementSpec(
    check_id="partitions",
    requirement="Every node of the cluster in a merged partition",
)
NOT_MEASURED = "not_measured"
"""The verdict of a pair no partition measured (INCOMPLETE; no waiver covers it)."""
PAIR_CHECKS = pair_requirements()
"""The requirements measured per node pair (the registry's `pair` entries: the suites'
`node_pair` / `perftest_pair` tests; a one-node partition records them as one not-applicable
skip)."""


@dataclass
class MergeResult:
    """What `merge` wrote."""

    out_dir: Path
    bundles: int
    checks: int
    verdict: str
    signed: bool
    unsigned_inputs: list[str] = field(default_factory=list)
    not_measured: list[str] = field(default_factory=list)
    """One line per requirement and reason that was not measured (`check [subjects]: why`)."""


def _distinct(values: Iterable[Any], ordered: bool = False) -> str:
    present = [str(v) for v in values if v]
    unique = list(dict.fromkeys(present)) if ordered else sorted(set(present))
    return ", ".join(unique)


def _requirements(parts: Sequence[Partition]) -> list[RequirementSpec]:
    specs: dict[str, RequirementSpec] = {}
    for part in parts:
        for row in part.facts.get("requirements", []):
            specs.setdefault(row["check_id"], RequirementSpec.model_validate(row))
    catalog = [c for c, _ in DEFAULT_REQUIREMENTS]
    ordered = sorted(
        specs.values(),
        key=lambda s: catalog.index(s.check_id) if s.check_id in catalog else len(catalog),
    )
    if missing_nodes(parts):
        ordered = [*ordered, MISSING_PARTITION]
    return [*ordered, CROSS_PARTITION] if len(parts) > 1 else ordered


def merged_context(parts: Sequence[Partition]) -> CertificateContext:
    """The certificate context of the merged run, from the inputs' certificate facts."""
    nodes: dict[str, dict[str, str]] = {}
    contacts: dict[tuple[str, ...], dict[str, str]] = {}
    for part in parts:
        for node in part.facts.get("nodes", []):
            known = nodes.setdefault(node["name"], {"name": node["name"], "instance_type": ""})
            known["instance_type"] = known["instance_type"] or node.get("instance_type", "")
        for contact in part.facts.get("contacts", []):
            contacts.setdefault(tuple(sorted(contact.items())), contact)

    def cluster(key: str) -> str:
        return _distinct(p.facts.get("cluster", {}).get(key, "") for p in parts)

    def each(key: str) -> str:
        return _distinct((p.facts.get(key) for p in parts), ordered=True)

    return CertificateContext(
        cluster=parts[0].cluster,
        region=cluster("region"),
        vpc_id=cluster("vpc_id"),
        vswitch_id=cluster("vswitch_id"),
        zone=cluster("zone"),
        nodes=list(nodes.values()),
        operator=each("operator"),
        contacts=list(contacts.values()),
        inventory_sha256=each("inventory_sha256"),
        expectations_sha256=each("expectations_sha256"),
        unreachable_nodes=sorted(_unreachable(parts)),
        title=parts[0].facts.get("title") or CertificateContext().title,
        requirements=_requirements(parts),
        inventory_copy=merged_inventory(parts),
    )


def merged_inventory(parts: Sequence[Partition]) -> str:
    """The partitions' inventory copies (already redacted): the one text when they agree,
    else each as its own YAML document headed by its run id; empty when none has one."""
    texts: dict[str, list[str]] = {}
    for part in parts:
        path = part.run_dir / INVENTORY_COPY
        if path.is_file():
            texts.setdefault(path.read_text(encoding="utf-8"), []).append(part.run_id)
    if len(texts) <= 1:
        return next(iter(texts), "")
    return "---\n".join(
        f"# partitions {', '.join(runs)}\n{text.rstrip()}\n" for text, runs in texts.items()
    )


def _unreachable(parts: Sequence[Partition]) -> set[str]:
    found: set[str] = set()
    for part in parts:
        found.update(part.facts.get("unreachable_nodes", []))
        if part.summary is not None:
            found.update(part.summary.unreachable_nodes)
    return found


def merged_scope(parts: Sequence[Partition]) -> dict[str, Any]:
    """Scope, profile and lab marking of the merged run: a handover only when every part
    was one; the inventories' exclusions, requirements and planned subjects joined; lab when
    any part was."""
    summaries = [p.summary or RunSummary(run_id=p.run_id) for p in parts]
    scopes = [s.scope for s in summaries]
    handover = all(s.handover for s in scopes)
    labels = sorted({s.label for s in scopes if not s.handover})
    excluded = {
        (e.check_id, e.reason): e for s in scopes for e in s.excluded if e.kind == "inventory"
    }
    expected: dict[str, list[str]] = {}  # every partition's planned subjects stay planned
    for part_scope in scopes:
        for check_id, subjects in part_scope.expected.items():
            expected.setdefault(check_id, []).extend(subjects)
    scope = RunScope(
        handover=handover,
        label="handover" if handover else (labels[0] if len(labels) == 1 else "selected checks"),
        selection="; ".join(dict.fromkeys(s.selection for s in scopes if s.selection)),
        required=list(dict.fromkeys(i for s in scopes for i in s.required)) if handover else [],
        expected={k: list(dict.fromkeys(v)) for k, v in expected.items()},
        excluded=list(excluded.values()),
    )
    profiles = dict.fromkeys(s.profile for s in summaries if s.profile)
    sources = {k: v for s in summaries for k, v in s.profile_sources.items()}
    return {
        "scope": scope.model_dump(),
        "profile": ", ".join(profiles),
        "profile_sources": sources,
        "lab": any(s.lab for s in summaries),
        "bounds": next((b for s in summaries if (b := getattr(s, "bounds", None))), {}),
    }


def cluster_order(parts: Sequence[Partition]) -> list[str]:
    """The whole cluster's nodes, in the inventory's order (every input names the same list:
    `check_partitions`)."""
    return parts[0].cluster_nodes if parts else []


def _partition_of(parts: Sequence[Partition]) -> dict[str, int]:
    """Each covered node's partition (index of the first input covering it)."""
    found: dict[str, int] = {}
    for index, part in enumerate(parts):
        for name in part.covered:
            found.setdefault(name, index)
    return found


def missing_nodes(parts: Sequence[Partition]) -> list[str]:
    """The nodes of the cluster that no input covered, in the cluster's order."""
    covered = _partition_of(parts)
    return [n for n in cluster_order(parts) if n not in covered]


def spans(nodes: Sequence[str], chosen: Sequence[str]) -> list[str]:
    """`chosen` as runs of consecutive `nodes`: `a..c` for a, b, c; a lone node as itself."""
    position = {n: i for i, n in enumerate(nodes)}
    runs: list[list[str]] = []
    for name in sorted(chosen, key=position.__getitem__):
        if runs and position[name] == position[runs[-1][-1]] + 1:
            runs[-1].append(name)
        else:
            runs.append([name])
    return [run[0] if len(run) == 1 else f"{run[0]}..{run[-1]}" for run in runs]


def missing_line(parts: Sequence[Partition]) -> str:
    """What the summary and `hpcnet merge` say about nodes no input covered ("" if none)."""
    missing = missing_nodes(parts)
    if not missing:
        return ""
    named = ", ".join(spans(cluster_order(parts), missing))
    return f"nodes in no merged partition: {len(missing)} of {len(cluster_order(parts))} ({named})"


def unmeasured_nodes(parts: Sequence[Partition]) -> list[CheckRecord]:
    """A not-measured `partitions` record per node no input covered."""
    missing = missing_nodes(parts)
    start = merged_start(parts)
    count = len(cluster_order(parts))
    named = ", ".join(spans(cluster_order(parts), missing))
    return [
        CheckRecord(
            check_id=MISSING_PARTITION.check_id,
            requirement=MISSING_PARTITION.requirement,
            subject=node,
            kind="node",
            verdict=NOT_MEASURED,
            message=f"in no merged partition ({len(missing)} of {count} nodes missing: {named})",
            started_at=start,
            ended_at=start,
        )
        for node in missing
    ]


def _pair_checks(parts: Sequence[Partition]) -> dict[str, str]:
    """The pair requirements the inputs ran (a record in any input), with their titles; none
    that an inventory's `scope.exclude` leaves out (not "not applicable" in one part)."""
    out = {
        e.check_id
        for p in parts
        if p.summary
        for e in p.summary.scope.excluded
        if e.kind == "inventory"
    }
    titles: dict[str, str] = {}
    for record in (r for p in parts for r in p.records):
        ours = record.check_id in PAIR_CHECKS and record.check_id not in out
        if ours and (record.kind == "pair" or record.check_id not in titles):
            titles[record.check_id] = record.requirement
    return {c: titles[c] for c in PAIR_CHECKS if c in titles}


def unmeasured_pairs(parts: Sequence[Partition]) -> list[CheckRecord]:
    """A not-measured record per pair requirement the inputs ran and per pair of the ring
    over the whole cluster that spans two partitions, or has an end no input covered, and
    that no input measured; none for a requirement the inputs' scope leaves out."""
    partition = _partition_of(parts)
    measured = {(r.check_id, r.subject) for p in parts for r in p.records if r.kind == "pair"}
    start = merged_start(parts)
    seams = [
        p
        for p in ring_pairs(cluster_order(parts))
        if p.a not in partition or p.b not in partition or partition[p.a] != partition[p.b]
    ]
    found = []
    for check_id, requirement in _pair_checks(parts).items():
        for pair in seams:
            subject = f"{pair.a}->{pair.b}"
            if (check_id, subject) in measured:
                continue
            if pair.a in partition and pair.b in partition:
                first, second = sorted((partition[pair.a], partition[pair.b]))
                message = (
                    f"the pair spans partitions {parts[first].run_id} and "
                    f"{parts[second].run_id}: no partition run measured it"
                )
            else:
                message = "a node of the pair is in no merged partition: no run measured it"
            found.append(
                CheckRecord(
                    check_id=check_id,
                    requirement=requirement,
                    subject=subject,
                    kind="pair",
                    verdict=NOT_MEASURED,
                    message=message,
                    started_at=start,
                    ended_at=start,
                )
            )
    return found


def _unsigned(parts: Sequence[Partition]) -> list[str]:
    return [p.run_id for p in parts if p.signed_by is None]


def merged_summary(parts: Sequence[Partition]) -> dict[str, Any]:
    """The facts `EvidenceBundle.close()` gets for the merged run (it adds the verdict)."""
    retries: Counter[str] = Counter()
    for part in parts:
        extra = (part.summary.model_extra or {}) if part.summary else {}
        retries.update(extra.get("connection_retries") or {})
    ends = [p.summary.ended_at for p in parts if p.summary and p.summary.ended_at]
    context = merged_context(parts)
    summary: dict[str, Any] = {
        "cluster": context.cluster,
        "inventory_sha256": context.inventory_sha256,
        "expectations_sha256": context.expectations_sha256,
        "unreachable_nodes": context.unreachable_nodes,
        "interrupted": any(p.summary is None or p.summary.interrupted for p in parts),
        "connection_retries": dict(sorted(retries.items())),
        "merged_from": [
            {
                "run_id": p.run_id,
                "verdict": p.facts.get("verdict", ""),
                "evidence_digest": p.digest,
                "signed_by": p.signed_by,
                "checks": len(p.records),
            }
            for p in parts
        ],
        "not_covered": NOT_COVERED if len(parts) > 1 else [],
        **merged_scope(parts),
        **cluster_node_facts(
            cluster_order(parts), [n for n in cluster_order(parts) if n in _partition_of(parts)]
        ),
    }
    missing = missing_line(parts)
    if missing:
        summary["not_covered"] = [*summary["not_covered"], missing]
    unsigned = _unsigned(parts)
    if unsigned:
        summary["unsigned_inputs"] = unsigned
        summary["not_covered"] = [*summary["not_covered"], unsigned_line(unsigned)]
    start = merged_start(parts)
    if start is not None:
        summary["started_at"] = start
    if ends:
        summary["ended_at"] = max(ends)
    return summary


def unsigned_line(run_ids: Sequence[str]) -> str:
    """What the summary and `hpcnet merge` say about inputs merged unsigned."""
    return f"inputs not signed: {', '.join(run_ids)} (merged with --allow-unsigned)"


def carry_burnin_samples(parts: Sequence[Partition], out: Path) -> None:
    """Copy each partition's burn-in samples of the nodes it covered (`burnin/NODE.jsonl`,
    what the evidence page draws the timelines from); its own files (run, network rounds)
    stay with it: the records carry their judgement."""
    for part in parts:
        for node in part.covered:
            source = part.run_dir / BURNIN_FOLDER / f"{node}.jsonl"
            if source.is_file():
                (out / BURNIN_FOLDER).mkdir(exist_ok=True)
                shutil.copyfile(source, out / BURNIN_FOLDER / source.name)


def merge(
    out_dir: PathLike,
    run_dirs: Sequence[PathLike],
    sign_key: PathLike | None = None,
    public_keys: Sequence[PathLike] = (),
    allow_unsigned: bool = False,
) -> MergeResult:
    """Merge verified, signed partition bundles (`allow_unsigned`: unsigned ones too) into
    the new bundle `out_dir`, with the pairs across partitions that none measured recorded
    as not measured; render its certificate and sign it with `sign_key` when given.
    Raises `MergeRefused`."""
    out = Path(out_dir)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise MergeRefused([f"{out}: exists and is not empty; give a new folder"])
    fingerprints = check_keys(sign_key, public_keys)
    parts: list[Partition] = []
    problems: list[str] = []
    for run_dir in run_dirs:
        try:
            parts.append(load_partition(run_dir, fingerprints, allow_unsigned))
        except MergeRefused as exc:
            problems.extend(exc.problems)
    if problems:
        raise MergeRefused(problems)
    if not parts:
        raise MergeRefused(["no bundle to merge"])
    problems = check_partitions(parts)
    if problems:
        raise MergeRefused(problems)
    bundle = merge_bundles(out, [p.run_dir for p in parts])
    carry_burnin_samples(parts, out)
    for record in [*unmeasured_nodes(parts), *unmeasured_pairs(parts)]:
        bundle.append(record)
    summary = bundle.close(merged_summary(parts))
    context = merged_context(parts)
    if sign_key is not None:  # checked by _check_keys above
        context.signer = signer_display(sign_key)
    render_certificate(out, context)
    if sign_key is not None:
        sign(out, sign_key)
    checks = sum(len(p.records) for p in parts)
    not_measured = [
        f"{e.check_id}{f' [{e.subject}]' if e.subject else ''}: "
        + e.reason.removeprefix("not measured: ")
        for e in summary.scope.incomplete
    ]
    return MergeResult(
        out,
        len(parts),
        checks,
        summary.verdict,
        sign_key is not None,
        _unsigned(parts),
        not_measured,
    )
