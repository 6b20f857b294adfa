"""`hpcnet merge`: partition bundles merged into one verified, optionally signed, certificate."""

from __future__ import annotations

import json
import re
from datetime import date, datetime, timedelta
from itertools import permutations

import pytest

from pytest_hpcnet.cli import main
from pytest_hpcnet.report.certificate.page import render_certificate
from pytest_hpcnet.report.evidence import (
    CheckRecord,
    EvidenceBundle,
    Waiver,
    cluster_node_facts,
)
from pytest_hpcnet.report.merge import MergeRefused, merge
from pytest_hpcnet.report.records import RunScope, ScopeEntry
from pytest_hpcnet.report.signing import generate_keypair, sign
from pytest_hpcnet.report.verify import verify
from tests.unit.test_certificate import CONTEXT, RUN_START, bandwidth, latency, mtu

PART_A, PART_B = ["gpu-a", "gpu-b"], ["gpu-c", "gpu-d"]
CLUSTER = PART_A + PART_B


def partition(
    tmp_path,
    run_id: str,
    nodes: list[str],
    slow_mtu: str = "",
    cluster: str = "prod-gpu-01",
    started: datetime = RUN_START,
    extra: tuple[CheckRecord, ...] = (),
    pairs: bool = True,
    signed: bool = True,
    cluster_nodes: list[str] | None = None,
    inventory: str = "",
    files: dict[str, str] | None = None,
    **summary,
):
    """A closed, rendered partition run of the cluster `cluster_nodes` (default `CLUSTER`;
    [] for a summary that names none): MTU per node, bandwidth per ordered pair (unless
    `pairs` is False), `files` (relative path -> text) written into it, signed by the
    partitions' key (unless `signed` is False)."""
    bundle = EvidenceBundle(tmp_path / run_id)
    digest = bundle.store_output(f"{run_id}: 65536 5000 196.52 196.40 0.374\n")
    for node in nodes:
        bundle.append(mtu(node, 1500 if node == slow_mtu else 9000))
    for source, target in permutations(nodes, 2) if pairs else ():
        bundle.append(bandwidth(source, target, 196.5, digest))
    for record in extra:
        bundle.append(record)
    for relative, text in (files or {}).items():
        (bundle.run_dir / relative).parent.mkdir(parents=True, exist_ok=True)
        (bundle.run_dir / relative).write_text(text)
    whole = CLUSTER if cluster_nodes is None else cluster_nodes
    shares = cluster_node_facts(whole, nodes) if whole else {}
    bundle.close({"cluster": cluster, "started_at": started, **shares, **summary})
    context = {
        **CONTEXT,
        "cluster": cluster,
        "vswitch_id": f"vsw-{run_id}",
        "nodes": [{"name": n, "instance_type": "ecs.ebmgn8is.32xlarge"} for n in nodes],
        "inventory_copy": inventory,
    }
    render_certificate(bundle.run_dir, context)
    if signed:
        sign(bundle.run_dir, partition_key(tmp_path))
    return bundle.run_dir


def partition_key(tmp_path):
    """The private key every signed partition of a test is signed with (made once)."""
    private = tmp_path / "partition-signer.pem"
    if not private.exists():
        generate_keypair(private, tmp_path / "partition-signer.pub.pem")
    return private


def seams(tmp_path, run_id: str = "seams", pairs=(("gpu-b", "gpu-c"), ("gpu-d", "gpu-a"))):
    """A run that measured the pairs across the partitions A and B (the merged ring's seams)."""
    bundle = EvidenceBundle(tmp_path / run_id)
    for source, target in pairs:
        bundle.append(bandwidth(source, target, 196.5))
    ends = list(dict.fromkeys(n for pair in pairs for n in pair))
    shares = cluster_node_facts(CLUSTER, ends)
    bundle.close({"cluster": "prod-gpu-01", "started_at": RUN_START, **shares})
    render_certificate(bundle.run_dir, {**CONTEXT, "cluster": "prod-gpu-01", "nodes": []})
    sign(bundle.run_dir, partition_key(tmp_path))
    return bundle.run_dir


def placement(cluster_verdict: str = "pass") -> CheckRecord:
    return CheckRecord(
        check_id="placement",
        requirement="Placement",
        subject="cluster",
        kind="cluster",
        verdict=cluster_verdict,
        started_at=RUN_START,
    )


@pytest.fixture
def keys(tmp_path):
    private, public = tmp_path / "signer.pem", tmp_path / "signer.pub.pem"
    generate_keypair(private, public)
    return private, public


@pytest.fixture
def parts(tmp_path):
    return (
        partition(tmp_path, "part-a", PART_A, connection_retries={"gpu-a": 2}),
        partition(tmp_path, "part-b", PART_B, connection_retries={"gpu-a": 1, "gpu-d": 3}),
    )


def facts_of(run_dir) -> dict:
    return json.loads((run_dir / "certificate.json").read_text())


def summary_of(run_dir) -> dict:
    return json.loads((run_dir / "summary.json").read_text())


def test_two_accepted_partitions_leave_the_pairs_across_them_not_measured(tmp_path, parts):
    out = tmp_path / "merged"
    result = merge(out, parts)
    assert (result.verdict, result.bundles, result.checks) == ("INCOMPLETE", 2, 8)
    facts = facts_of(out)
    assert facts["verdict"] == "INCOMPLETE"
    assert [n["name"] for n in facts["nodes"]] == PART_A + PART_B
    assert facts["cluster"]["name"] == "prod-gpu-01"
    assert facts["cluster"]["vswitch_id"] == "vsw-part-a, vsw-part-b"
    assert facts["counts"]["pass"] == 8
    records = [json.loads(line) for line in (out / "evidence.jsonl").read_text().splitlines()]
    assert len(records) == 10
    unmeasured = [r for r in records if r["verdict"] not in ("pass", "fail")]
    assert [(r["check_id"], r["subject"], r["kind"]) for r in unmeasured] == [
        ("ib_write_bw", "gpu-b->gpu-c", "pair"),
        ("ib_write_bw", "gpu-d->gpu-a", "pair"),
    ]
    assert all(r["verdict"] == "not_measured" for r in unmeasured)
    assert "part-a and part-b" in unmeasured[0]["message"]
    [entry] = summary_of(out)["scope"]["incomplete"]
    assert entry["check_id"] == "ib_write_bw"
    assert entry["subject"] == "gpu-b->gpu-c, gpu-d->gpu-a"
    assert entry["reason"] == (
        "not measured: the pair spans partitions part-a and part-b: no partition run measured it"
    )
    assert len(list((out / "outputs").iterdir())) == 2
    assert verify(out).ok, verify(out).problems


def test_partitions_merge_into_one_accepted_certificate_with_the_pairs_across_them(tmp_path, parts):
    out = tmp_path / "merged"
    result = merge(out, [*parts, seams(tmp_path)])
    assert (result.verdict, result.bundles, result.checks) == ("ACCEPTED", 3, 10)
    assert facts_of(out)["counts"]["pass"] == 10
    assert verify(out).ok, verify(out).problems


def test_only_the_missing_pairs_across_partitions_are_listed(tmp_path, parts):
    out = tmp_path / "merged"
    result = merge(out, [*parts, seams(tmp_path, pairs=(("gpu-b", "gpu-c"),))])
    assert result.verdict == "INCOMPLETE"
    [entry] = summary_of(out)["scope"]["incomplete"]
    assert (entry["check_id"], entry["subject"]) == ("ib_write_bw", "gpu-d->gpu-a")


def test_pairs_across_partitions_of_a_requirement_out_of_scope_are_not_listed(tmp_path):
    scope = RunScope(excluded=[ScopeEntry(check_id="ib_write_bw", reason="no perftest")])
    a = partition(tmp_path, "part-a", PART_A, scope=scope.model_dump())
    b = partition(tmp_path, "part-b", PART_B, scope=scope.model_dump())
    out = tmp_path / "merged"
    assert merge(out, [a, b]).verdict == "ACCEPTED"
    assert summary_of(out)["scope"]["incomplete"] == []
    assert len((out / "evidence.jsonl").read_text().splitlines()) == 8


def test_three_partitions_list_each_seam_of_the_ring(tmp_path):
    five = ["gpu-a", "gpu-b", "gpu-c", "gpu-d", "gpu-e"]
    parts = [
        partition(tmp_path, "part-a", ["gpu-a", "gpu-b"], cluster_nodes=five),
        partition(tmp_path, "part-b", ["gpu-c"], cluster_nodes=five),
        partition(tmp_path, "part-c", ["gpu-d", "gpu-e"], cluster_nodes=five),
    ]
    out = tmp_path / "merged"
    assert merge(out, parts).verdict == "INCOMPLETE"
    entries = summary_of(out)["scope"]["incomplete"]
    assert sorted((e["subject"], e["reason"].split(": ")[1]) for e in entries) == [
        ("gpu-b->gpu-c", "the pair spans partitions part-a and part-b"),
        ("gpu-c->gpu-d", "the pair spans partitions part-b and part-c"),
        ("gpu-e->gpu-a", "the pair spans partitions part-a and part-c"),
    ]


def test_unsigned_inputs_are_refused_unless_allowed_and_then_said(tmp_path):
    a = partition(tmp_path, "part-a", PART_A, pairs=False)
    b = partition(tmp_path, "part-b", PART_B, pairs=False, signed=False)
    out = tmp_path / "merged"
    with pytest.raises(MergeRefused) as refused:
        merge(out, [a, b])
    assert refused.value.problems == [
        f"{b}: bundle is not signed (sign the partition runs with --hpcnet-sign-key, "
        "or give --allow-unsigned)"
    ]
    assert not out.exists()
    result = merge(out, [a, b], allow_unsigned=True)
    assert result.verdict == "ACCEPTED" and result.unsigned_inputs == ["part-b"]
    summary = summary_of(out)
    assert summary["unsigned_inputs"] == ["part-b"]
    assert "inputs not signed: part-b (merged with --allow-unsigned)" in summary["not_covered"]


def test_summary_names_its_inputs_and_merges_retries(tmp_path, parts):
    out = tmp_path / "merged"
    merge(out, parts)
    summary = summary_of(out)
    assert summary["run_id"] == "merged"
    assert [m["run_id"] for m in summary["merged_from"]] == ["part-a", "part-b"]
    assert [m["evidence_digest"] for m in summary["merged_from"]] == [
        verify(p).digest for p in parts
    ]
    assert summary["connection_retries"] == {"gpu-a": 3, "gpu-d": 3}
    assert summary["interrupted"] is False
    assert summary["not_covered"]


def test_cross_partition_checks_are_listed_as_not_run(tmp_path, parts):
    out = tmp_path / "merged"
    merge(out, parts)
    rows = {r["check_id"]: r["verdict"] for r in facts_of(out)["requirements"]}
    assert rows["cross_partition"] == "not_run"
    assert (rows["mtu"], rows["ib_write_bw"]) == ("pass", "not_measured")
    assert "across partitions" in (out / "certificate.html").read_text()


def test_subjects_a_partition_planned_and_did_not_record_stay_not_measured(tmp_path):
    scope = RunScope(expected={"mtu": [*PART_B, "gpu-x"]})
    a = partition(tmp_path, "part-a", PART_A, pairs=False)
    b = partition(tmp_path, "part-b", PART_B, pairs=False, scope=scope.model_dump())
    assert facts_of(b)["verdict"] == "INCOMPLETE"
    out = tmp_path / "merged"
    assert merge(out, [a, b]).verdict == "INCOMPLETE"
    [entry] = summary_of(out)["scope"]["incomplete"]
    assert (entry["check_id"], entry["subject"]) == ("mtu", "gpu-x")


def test_one_rejected_partition_rejects_the_merge_and_names_the_failure(tmp_path):
    good = partition(tmp_path, "part-a", PART_A, pairs=False)
    bad = partition(tmp_path, "part-b", PART_B, slow_mtu="gpu-c", pairs=False)
    out = tmp_path / "merged"
    assert merge(out, [good, bad]).verdict == "REJECTED"
    facts = facts_of(out)
    assert facts["verdict"] == "REJECTED"
    mtu_row = next(r for r in facts["requirements"] if r["check_id"] == "mtu")
    assert (mtu_row["verdict"], mtu_row["worst_subject"]) == ("fail", "gpu-c")
    assert "gpu-c: eth0 mtu 1500 &lt; 9000" in (out / "evidence.html").read_text()
    page = (out / "certificate.html").read_text()
    code = '<span class="mono muted code">HPCNET-MTU</span>'  # its fault code
    assert re.search(rf'Jumbo MTU {code}</td><td class="mono">gpu-c</td>', page)  # where
    assert verify(out).ok


def test_unreachable_nodes_of_partitions_are_united_and_make_the_merge_incomplete(tmp_path):
    a = partition(tmp_path, "part-a", PART_A, unreachable_nodes=["gpu-x"])
    b = partition(tmp_path, "part-b", PART_B, unreachable_nodes=["gpu-y"])
    out = tmp_path / "merged"
    assert merge(out, [a, b]).verdict == "INCOMPLETE"
    assert facts_of(out)["unreachable_nodes"] == ["gpu-x", "gpu-y"]
    assert summary_of(out)["unreachable_nodes"] == ["gpu-x", "gpu-y"]


def test_an_interrupted_partition_makes_the_merge_incomplete(tmp_path):
    a = partition(tmp_path, "part-a", PART_A)
    b = partition(tmp_path, "part-b", PART_B, interrupted=True)
    out = tmp_path / "merged"
    assert merge(out, [a, b]).verdict == "INCOMPLETE"
    assert summary_of(out)["interrupted"] is True
    assert "the run did not finish" in facts_of(out)["verdict_reasons"]


def test_tampered_input_is_refused_naming_it_and_nothing_is_written(tmp_path, parts):
    evidence = parts[1] / "evidence.jsonl"
    evidence.write_text(evidence.read_text().replace('"value":9000', '"value":9001', 1))
    out = tmp_path / "merged"
    with pytest.raises(MergeRefused) as refused:
        merge(out, parts)
    assert refused.value.problems
    assert all(line.startswith(f"{parts[1]}: ") for line in refused.value.problems)
    assert any("evidence.jsonl" in line for line in refused.value.problems)
    assert not out.exists()


def test_different_cluster_names_are_refused_in_one_line(tmp_path):
    a = partition(tmp_path, "part-a", PART_A)
    b = partition(tmp_path, "part-b", PART_B, cluster="other-cluster")
    with pytest.raises(MergeRefused) as refused:
        merge(tmp_path / "merged", [a, b])
    [line] = refused.value.problems
    assert line.startswith("cluster names differ")
    assert "'prod-gpu-01'" in line and "'other-cluster'" in line


def test_non_empty_out_dir_is_refused_but_an_empty_one_is_used(tmp_path, parts):
    out = tmp_path / "merged"
    out.mkdir()
    (out / "notes.txt").write_text("keep me")
    with pytest.raises(MergeRefused, match="not empty"):
        merge(out, parts)
    assert sorted(p.name for p in out.iterdir()) == ["notes.txt"]
    (out / "notes.txt").unlink()
    assert merge(out, parts).verdict == "INCOMPLETE"


def test_overlapping_partitions_are_refused_naming_the_duplicate_checks(tmp_path):
    a = partition(tmp_path, "part-a", ["gpu-a", "gpu-b"])
    b = partition(tmp_path, "part-b", ["gpu-b", "gpu-c"])
    with pytest.raises(MergeRefused) as refused:
        merge(tmp_path / "merged", [a, b])
    [line] = refused.value.problems
    assert line.startswith("overlapping partitions")
    assert "mtu[gpu-b] (part-a, part-b)" in line
    assert "ib_write_bw" not in line  # the pairs differ: gpu-a->gpu-b vs gpu-b->gpu-c


def test_cluster_level_checks_are_kept_from_every_partition(tmp_path):
    a = partition(tmp_path, "part-a", PART_A, extra=(placement(),), pairs=False)
    b = partition(tmp_path, "part-b", PART_B, extra=(placement("fail"),), pairs=False)
    out = tmp_path / "merged"
    assert merge(out, [a, b]).verdict == "REJECTED"
    row = next(r for r in facts_of(out)["requirements"] if r["check_id"] == "placement")
    assert (row["subjects"], row["subjects_failed"]) == (2, 1)


def test_same_run_given_twice_is_refused(tmp_path, parts):
    with pytest.raises(MergeRefused, match="part-a given more than once"):
        merge(tmp_path / "merged", [parts[0], parts[0]])


def test_waiver_judged_differently_on_the_merged_run_date_is_refused(tmp_path):
    later = RUN_START + timedelta(days=5)
    waived = latency(12.5, Waiver(reason="firmware", by="ops", expires=date(2026, 12, 2)))
    waived.subject = "gpu-c->gpu-d"
    a = partition(tmp_path, "part-a", PART_A)
    b = partition(tmp_path, "part-b", PART_B, started=later, extra=(waived,))
    assert facts_of(b)["verdict"] == "REJECTED"  # the waiver had expired on its own run date
    with pytest.raises(MergeRefused) as refused:
        merge(tmp_path / "merged", [a, b])
    [line] = refused.value.problems
    assert line.startswith(f"{b}: ib_write_lat[gpu-c->gpu-d] is fail on its run date 2026-12-05")
    assert "waived on the merged run date 2026-11-30" in line


def test_signed_merge_verifies_with_the_public_key_only(tmp_path, parts, keys):
    private, public = keys
    out = tmp_path / "merged"
    assert merge(out, parts, sign_key=private).signed
    result = verify(out, public)
    assert result.ok and result.signed, result.problems
    other_private, other_public = tmp_path / "other.pem", tmp_path / "other.pub"
    generate_keypair(other_private, other_public)
    assert not verify(out, other_public).ok


def test_public_key_requires_every_input_signed_by_it(tmp_path, keys):
    private, public = keys
    parts = [
        partition(tmp_path, run, nodes, pairs=False, signed=False)
        for run, nodes in (("part-a", PART_A), ("part-b", PART_B))
    ]
    sign(parts[0], private)
    with pytest.raises(MergeRefused) as refused:
        merge(tmp_path / "merged", parts, public_keys=[public])
    assert refused.value.problems == [
        f"{parts[1]}: bundle is not signed, but --public-key was given"
    ]
    other_private, other_public = tmp_path / "other.pem", tmp_path / "other.pub"
    generate_keypair(other_private, other_public)
    sign(parts[1], other_private)
    with pytest.raises(MergeRefused, match="not a given key"):
        merge(tmp_path / "merged", parts, public_keys=[public])
    result = merge(tmp_path / "merged", parts, public_keys=[public, other_public])
    assert result.verdict == "ACCEPTED"
    signers = [m["signed_by"] for m in summary_of(tmp_path / "merged")["merged_from"]]
    assert signers == [verify(parts[0]).key_fingerprint, verify(parts[1]).key_fingerprint]


def test_unreadable_sign_key_is_refused_before_writing(tmp_path, parts):
    key = tmp_path / "not-a-key.pem"
    key.write_text("nonsense")
    with pytest.raises(MergeRefused, match="--sign-key"):
        merge(tmp_path / "merged", parts, sign_key=key)
    assert not (tmp_path / "merged").exists()


# --- the command line -----------------------------------------------------------------


def test_cli_merge_accepted_signed_and_verified(tmp_path, parts, keys, capsys):
    private, public = keys
    out = tmp_path / "merged"
    inputs = [*parts, seams(tmp_path)]
    code = main(["merge", str(out), *map(str, inputs), "--sign-key", str(private)])
    assert code == 0
    assert capsys.readouterr().out == (
        f"merged 3 bundles (10 checks) into {out}, signed: ACCEPTED\n"
    )
    assert main(["verify", str(out), "--public-key", str(public)]) == 0


def test_cli_merge_rejected_returns_1(tmp_path, capsys):
    a = partition(tmp_path, "part-a", PART_A, pairs=False)
    b = partition(tmp_path, "part-b", PART_B, slow_mtu="gpu-d", pairs=False)
    out = tmp_path / "merged"
    assert main(["merge", str(out), str(a), str(b)]) == 1
    assert capsys.readouterr().out == f"merged 2 bundles (4 checks) into {out}: REJECTED\n"


def test_cli_merge_with_pairs_across_partitions_unmeasured_returns_1(tmp_path, parts, capsys):
    out = tmp_path / "merged"
    assert main(["merge", str(out), *map(str, parts)]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert lines == [
        f"merged 2 bundles (8 checks) into {out}: INCOMPLETE",
        "  not measured: ib_write_bw [gpu-b->gpu-c, gpu-d->gpu-a]: "
        "the pair spans partitions part-a and part-b: no partition run measured it",
    ]


def test_cli_merge_refuses_unsigned_inputs_in_one_line_and_allows_them_when_told(tmp_path, capsys):
    a = partition(tmp_path, "part-a", PART_A, pairs=False, signed=False)
    b = partition(tmp_path, "part-b", PART_B, pairs=False, signed=False)
    out = tmp_path / "merged"
    assert main(["merge", str(out), str(a), str(b)]) == 2
    lines = capsys.readouterr().out.splitlines()
    assert lines == [
        f"hpcnet merge: {run}: bundle is not signed (sign the partition runs with "
        "--hpcnet-sign-key, or give --allow-unsigned)"
        for run in (a, b)
    ]
    assert not out.exists()
    assert main(["merge", str(out), str(a), str(b), "--allow-unsigned"]) == 0
    assert capsys.readouterr().out.splitlines() == [
        f"merged 2 bundles (4 checks) into {out}: ACCEPTED",
        "  inputs not signed: part-a, part-b (merged with --allow-unsigned)",
    ]


def test_cli_merge_refusal_returns_2_with_one_line_per_problem(tmp_path, parts, capsys):
    (parts[0] / "summary.json").write_text("{}\n")
    missing = tmp_path / "no-such-run"
    out = tmp_path / "merged"
    assert main(["merge", str(out), *map(str, parts), str(missing)]) == 2
    lines = capsys.readouterr().out.splitlines()
    assert f"hpcnet merge: {parts[0]}: evidence file changed: summary.json" in lines
    assert lines[-1] == f"hpcnet merge: {missing}: not a run folder (reports/<run-id>/)"
    assert all(line.startswith(f"hpcnet merge: {parts[0]}: ") for line in lines[:-1])
    assert not out.exists()


# --- the merge knows the cluster: every partition names the whole node list -------------------

SIX = ["gpu-a", "gpu-b", "gpu-c", "gpu-d", "gpu-e", "gpu-f"]
ONE_NODE = "not applicable: the inventory has one node, so no node pair"


def third(tmp_path, run_id: str, nodes: list[str]):
    return partition(tmp_path, run_id, nodes, cluster_nodes=SIX)


def test_one_of_three_partitions_is_incomplete_naming_the_missing_nodes(tmp_path):
    a = third(tmp_path, "part-a", SIX[:2])
    out = tmp_path / "merged"
    result = merge(out, [a])
    assert result.verdict == "INCOMPLETE"
    entries = {e["check_id"]: e for e in summary_of(out)["scope"]["incomplete"]}
    assert entries["partitions"]["subject"] == "gpu-c, gpu-d, gpu-e, gpu-f"
    assert entries["partitions"]["reason"] == (
        "not measured: in no merged partition (4 of 6 nodes missing: gpu-c..gpu-f)"
    )
    assert entries["ib_write_bw"]["subject"] == (
        "gpu-b->gpu-c, gpu-c->gpu-d, gpu-d->gpu-e, gpu-e->gpu-f, gpu-f->gpu-a"
    )
    assert entries["ib_write_bw"]["reason"].startswith("not measured: a node of the pair is in")
    assert any(line.startswith("partitions [gpu-c, gpu-d") for line in result.not_measured)
    summary = summary_of(out)
    assert "nodes in no merged partition: 4 of 6 (gpu-c..gpu-f)" in summary["not_covered"]
    assert (summary["cluster_nodes"], summary["partition_nodes"]) == (SIX, SIX[:2])
    rows = {r["check_id"]: r["verdict"] for r in facts_of(out)["requirements"]}
    assert rows["partitions"] == "not_measured"
    assert verify(out).ok, verify(out).problems


def test_a_missing_partition_in_the_middle_is_named_by_its_nodes(tmp_path):
    parts = [third(tmp_path, "part-a", SIX[:2]), third(tmp_path, "part-c", SIX[4:])]
    out = tmp_path / "merged"
    assert merge(out, parts).verdict == "INCOMPLETE"
    entries = {e["check_id"]: e for e in summary_of(out)["scope"]["incomplete"]}
    assert entries["partitions"]["subject"] == "gpu-c, gpu-d"
    assert "(2 of 6 nodes missing: gpu-c..gpu-d)" in entries["partitions"]["reason"]


def test_every_partition_merged_names_no_missing_node(tmp_path):
    parts = [third(tmp_path, f"part-{i}", SIX[2 * i : 2 * i + 2]) for i in range(3)]
    out = tmp_path / "merged"
    assert merge(out, parts).verdict == "INCOMPLETE"  # the seams only
    checks = {e["check_id"] for e in summary_of(out)["scope"]["incomplete"]}
    assert checks == {"ib_write_bw"}
    assert summary_of(out)["partition_nodes"] == SIX


def one_node(tmp_path, node: str):
    """A one-node partition as a run collects it: its pair check one not-applicable skip."""
    skip = CheckRecord(
        check_id="path_mtu",
        requirement="Path MTU",
        subject="cluster",
        kind="cluster",
        verdict="skipped",
        message=ONE_NODE,
        started_at=RUN_START,
    )
    return partition(tmp_path, f"part-{node}", [node], extra=(skip,), pairs=False)


def test_one_node_partitions_leave_every_pair_not_measured(tmp_path):
    parts = [one_node(tmp_path, node) for node in CLUSTER]
    for part in parts:
        assert facts_of(part)["verdict"] == "ACCEPTED"  # each alone has no pair to measure
    out = tmp_path / "merged"
    result = merge(out, parts)
    assert result.verdict == "INCOMPLETE"
    entries = summary_of(out)["scope"]["incomplete"]
    assert {e["check_id"] for e in entries} == {"path_mtu"}
    assert [e["subject"] for e in entries] == [
        "gpu-a->gpu-b",
        "gpu-b->gpu-c",
        "gpu-c->gpu-d",
        "gpu-d->gpu-a",
    ]
    assert entries[0]["reason"] == (
        "not measured: the pair spans partitions part-gpu-a and part-gpu-b: "
        "no partition run measured it"
    )


def test_partitions_of_different_node_lists_are_refused_in_one_line(tmp_path):
    a = partition(tmp_path, "part-a", PART_A)
    b = partition(tmp_path, "part-b", PART_B, cluster_nodes=[*PART_B, "gpu-e"])
    out = tmp_path / "merged"
    with pytest.raises(MergeRefused) as refused:
        merge(out, [a, b])
    [line] = refused.value.problems
    assert line.startswith("node lists differ (not partitions of one cluster): part-a lists 4")
    assert "part-b lists 3 nodes" in line
    assert not out.exists()


def test_an_input_naming_no_node_list_is_refused(tmp_path):
    a = partition(tmp_path, "part-a", PART_A)
    b = partition(tmp_path, "part-b", PART_B, cluster_nodes=[])
    with pytest.raises(MergeRefused) as refused:
        merge(tmp_path / "merged", [a, b])
    assert refused.value.problems == [
        f"{b}: summary.json names no cluster node list (a run of an older version): "
        "run the partition again"
    ]


def test_the_merged_bundle_names_the_cluster_and_merges_again(tmp_path, parts):
    first = tmp_path / "merged"
    merge(first, [*parts, seams(tmp_path)])
    summary = summary_of(first)
    assert summary["cluster_nodes"] == CLUSTER and summary["partition_nodes"] == CLUSTER
    assert summary["cluster_node_count"] == 4


def test_the_pair_requirements_are_those_of_the_suites_pair_tests():
    """`PAIR_CHECKS` (the requirements measured per node pair) is what the shipped suites
    parametrize by `node_pair` or `perftest_pair`."""
    import importlib
    import inspect
    import pkgutil

    from pytest_hpcnet import suites
    from pytest_hpcnet.report.merge import PAIR_CHECKS

    found = set()
    for module in pkgutil.iter_modules(suites.__path__):
        loaded = importlib.import_module(f"pytest_hpcnet.suites.{module.name}")
        for _, func in inspect.getmembers(loaded, inspect.isfunction):
            params = inspect.signature(func).parameters
            if not ({"node_pair", "perftest_pair"} & set(params)):
                continue
            marks = list(getattr(func, "pytestmark", []))  # a module's: one decorator or a list
            module_marks = getattr(loaded, "pytestmark", [])
            marks += module_marks if isinstance(module_marks, list) else [module_marks]
            found.update(m.args[0] for m in marks if getattr(m, "name", "") == "check")
    assert found and set(PAIR_CHECKS) == found


def test_partitions_planned_differently_are_refused(tmp_path):
    """Partitions whose nodes were planned with other GPU, ERI or DCGM counts are not one
    cluster's handover: merge refuses them, naming both plans."""
    from pytest_hpcnet.inventory.expectations import Expectations
    from pytest_hpcnet.run_scope import unit_plan

    eight = unit_plan(Expectations(gpu={"count": 8}))
    seven = unit_plan(Expectations(gpu={"count": 7}))
    assert eight["gpus_per_node"] == 8 and "memory" in eight["dcgm_tests"]
    a = partition(tmp_path, "part-a", PART_A, plan=eight)
    b = partition(tmp_path, "part-b", PART_B, plan=seven)
    with pytest.raises(MergeRefused) as refused:
        merge(tmp_path / "merged", [a, b])
    [line] = refused.value.problems
    assert line.startswith("plans differ") and "'gpus_per_node': 7" in line
    same = partition(tmp_path, "part-c", PART_B, plan=eight)
    merge(tmp_path / "merged-ok", [a, same])  # one plan: no refusal (MergeRefused fails it)


def test_a_signed_merge_of_unsigned_partitions_says_so_beside_its_signature(tmp_path, keys, capsys):
    private, public = keys
    a = partition(tmp_path, "part-a", PART_A, pairs=False)
    b = partition(tmp_path, "part-b", PART_B, pairs=False, signed=False)
    out = tmp_path / "merged"
    code = main(["merge", str(out), str(a), str(b), "--allow-unsigned", "--sign-key", str(private)])
    assert code == 0
    capsys.readouterr()
    assert facts_of(out)["unsigned_inputs"] == ["part-b"]
    page = (out / "certificate.html").read_text()
    header = re.search(r"<dt>Signature</dt><dd[^>]*>(.*?)</dd>", page, re.S).group(1)
    assert "signed after rendering" in header
    assert "evidence of part-b was not signed" in header
    signature = re.search(r'<p id="signature">(.*?)</p>', page, re.S).group(1)
    assert "evidence of part-b was not signed" in signature
    assert main(["verify", str(out), "--public-key", str(public)]) == 0
    out_lines = capsys.readouterr().out.splitlines()
    assert out_lines[0].startswith(f"OK: {out} (signed; merged from unsigned evidence: part-b)")
    assert (
        "  the evidence of part-b was not signed (merged with --allow-unsigned): the "
        "signature covers the merge, not who produced that evidence"
    ) in out_lines


def test_a_signed_merge_of_signed_partitions_names_no_unsigned_evidence(tmp_path, parts, keys):
    private, _ = keys
    out = tmp_path / "merged"
    merge(out, parts, sign_key=private)
    assert facts_of(out)["unsigned_inputs"] == []
    assert "was not signed" not in (out / "certificate.html").read_text()


def test_merged_bundle_carries_the_partitions_inventory(tmp_path, keys):
    text = "cluster: {name: prod-gpu-01}\nnodes: [gpu-a, gpu-b, gpu-c, gpu-d]\n"
    a = partition(tmp_path, "part-a", PART_A, inventory=text)
    b = partition(tmp_path, "part-b", PART_B, inventory=text)
    out = tmp_path / "merged"
    merge(out, [a, b], sign_key=keys[0])
    assert (out / "inventory.yaml").read_text() == text
    assert facts_of(out)["inventory_copy"] == "inventory.yaml"
    assert verify(out, keys[1]).ok


def test_merged_bundle_keeps_each_differing_inventory_named_by_its_partition(tmp_path):
    a = partition(tmp_path, "part-a", PART_A, inventory="nodes: [gpu-a, gpu-b]\n")
    b = partition(tmp_path, "part-b", PART_B, inventory="nodes: [gpu-c, gpu-d]\n")
    out = tmp_path / "merged"
    merge(out, [a, b])
    copy = (out / "inventory.yaml").read_text()
    assert "# partitions part-a\nnodes: [gpu-a, gpu-b]" in copy
    assert "# partitions part-b\nnodes: [gpu-c, gpu-d]" in copy


def test_each_partitions_burnin_samples_of_its_own_nodes_are_carried(tmp_path):
    """The evidence page draws a node's burn-in timeline from `burnin/NODE.jsonl`: the merged
    bundle carries each partition's files of the nodes it covered, and only those."""

    def samples(run_id: str, nodes: list[str], stray: str) -> dict[str, str]:
        files = {f"burnin/{n}.jsonl": f'{{"node": "{n}"}}\n' for n in nodes}
        files[f"burnin/{stray}.jsonl"] = '{"node": "stray"}\n'  # a node it did not cover
        files["burnin/network.jsonl"] = f'{{"round": "{run_id}"}}\n'
        return files

    runs = [
        partition(tmp_path, "part-a", PART_A, files=samples("part-a", PART_A, PART_B[0])),
        partition(tmp_path, "part-b", PART_B, files=samples("part-b", PART_B, PART_A[0])),
    ]
    out = tmp_path / "merged"
    merge(out, runs)
    carried = {p.name: p.read_text() for p in (out / "burnin").iterdir()}
    assert carried == {f"{n}.jsonl": f'{{"node": "{n}"}}\n' for n in CLUSTER}
    assert verify(out).ok, verify(out).problems
