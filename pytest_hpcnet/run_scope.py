"""What a run covers and what it runs against, decided at the entry point: the selection on
the command line (handover or partial), the inventory's `scope.exclude`, the profile and its
sources, and whether the nodes are the embedded lab."""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping
from pathlib import Path

import pytest

from pytest_hpcnet.inventory.expectations import Expectations, load_profile_sources
from pytest_hpcnet.inventory.models import Inventory
from pytest_hpcnet.probes.gpu_dcgm import planned_tests
from pytest_hpcnet.probes.metadata import MetadataFacts
from pytest_hpcnet.report.records import RunScope, ScopeEntry
from pytest_hpcnet.report.verdict import required_ids
from pytest_hpcnet.requirements.erdma import expected_eris
from pytest_hpcnet.requirements.registry import BY_ID, REQUIREMENTS

SUITES = Path(__file__).resolve().parent / "suites"
SUITES_MODULE = "pytest_hpcnet.suites"
LAB_REGION = "cn-lab"
"""The lab's region id (`lab/state.py`); no Alibaba Cloud region is called that."""
LAB_INSTANCE = re.compile(r"i-lab\d{5}")
"""The lab's instance ids (`lab/cluster.py`); ECS ids are `i-` and 20 lowercase letters/digits."""
LAB_TYPE = re.compile(r"ecs\.hpcnet-lab\..*")
"""The lab's instance type (`lab/state.py`); no ECS family is called that."""


def check_exclusions(inventory: Inventory) -> None:
    """An unknown requirement id in `scope.exclude` is a one-line usage error."""
    if inventory.scope is None:
        return
    unknown = [i for i in inventory.scope.exclude if i not in BY_ID]
    if unknown:
        raise pytest.UsageError(
            f"{inventory.path}: scope.exclude: unknown requirement {unknown[0]!r} "
            f"(valid: {', '.join(BY_ID)})"
        )


WAIVED_CHECK = re.compile(r"([A-Za-z0-9_]+)(?:\[(.*)\])?")
CLUSTER_SUBJECT = "cluster"


def _subject_problem(subject: str, nodes: set[str]) -> str | None:
    """Why `subject` names nothing of this inventory: a node, a pair `a->b` of two nodes, a
    device or GPU of a node (`node07 erdma_1`, `node07 GPU 3`), or `cluster`; else None."""
    if not subject.strip():
        return "empty subject (give a node, a pair a->b or a device 'node erdma_1')"
    if subject == CLUSTER_SUBJECT:
        return None
    if "->" in subject:
        ends = subject.split("->")
        unknown = [e for e in ends if e not in nodes]
        if len(ends) != 2 or unknown:
            what = f"{unknown[0]!r} is not a node of the inventory" if unknown else "not a->b"
            return f"unknown subject {subject!r}: {what}"
        return "a pair names two different nodes" if ends[0] == ends[1] else None
    node, _, device = subject.partition(" ")
    if node not in nodes:
        near = difflib.get_close_matches(node, nodes, n=1)
        hint = f" (did you mean {near[0]!r}?)" if near else ""
        what = f"{node!r} is not a node" if device else "not a node"
        return f"unknown subject {subject!r}: {what} of the inventory{hint}"
    return None


def check_waivers(inventory: Inventory) -> None:
    """A waiver naming an unknown requirement, or a subject that is no node, pair or device
    of the inventory, is a one-line usage error (it would otherwise cover nothing)."""
    nodes = {n.name for n in inventory.nodes}
    for i, waiver in enumerate(inventory.waivers):
        match = WAIVED_CHECK.fullmatch(waiver.check)
        problem: str | None
        if match is None:
            problem = "not a check id or id[subject]"
        elif match.group(1) not in BY_ID:
            near = difflib.get_close_matches(match.group(1), BY_ID, n=1)
            hint = f"did you mean {near[0]!r}? " if near else ""
            problem = f"unknown requirement {match.group(1)!r} ({hint}valid: {', '.join(BY_ID)})"
        elif match.group(2) is None:
            problem = None
        else:
            problem = _subject_problem(match.group(2), nodes)
        if problem:
            raise pytest.UsageError(f"{inventory.path}: waivers[{i}] ({waiver.check}): {problem}")


def excluded_ids(inventory: Inventory) -> list[str]:
    """The requirement ids the inventory leaves out, with those that live `within` them."""
    named = list(inventory.scope.exclude) if inventory.scope else []
    return named + [r.id for r in REQUIREMENTS if r.within in named and r.id not in named]


def _suite_arg(config: pytest.Config, arg: str) -> str:
    """'all' (the whole shipped suites), 'part' (a file or test of them) or 'site'."""
    target = arg.split("::", 1)[0]
    if config.option.pyargs and target.startswith(SUITES_MODULE):
        return "all" if target == SUITES_MODULE and "::" not in arg else "part"
    path = (config.invocation_params.dir / target).resolve()
    if path == SUITES and "::" not in arg:
        return "all"
    return "part" if path.is_relative_to(SUITES) else "site"


def selection(config: pytest.Config) -> tuple[bool, str, str]:
    """(handover, label, selection text) of the command line: a marker, -k, --deselect,
    --lf or paths narrowing the shipped suites make a partial run; a site's own checks
    beside the whole shipped suites keep a handover run."""
    words: list[str] = []
    markexpr = config.option.markexpr or ""
    keyword = config.option.keyword or ""
    if markexpr:
        words.append(f"-m {markexpr!r}" if " " in markexpr else f"-m {markexpr}")
    if keyword:
        words.append(f"-k {keyword!r}" if " " in keyword else f"-k {keyword}")
    for arg in config.getoption("deselect", None) or []:
        words.append(f"--deselect {arg}")
    if config.getoption("lf", False):
        words.append("--lf")
    if config.getoption("stepwise", False) or config.getoption("stepwise_skip", False):
        words.append("--stepwise")  # runs from the last failure on: a part of the suite
    kinds = {arg: _suite_arg(config, arg) for arg in config.args}
    if "all" not in kinds.values():
        words.extend(kinds)
    if not words:
        return True, "handover", ""
    narrowed_by_marker_only = markexpr and not keyword and len(words) == 1
    plain = re.fullmatch(r"[A-Za-z_]\w*", markexpr) is not None
    label = f"{markexpr} checks" if narrowed_by_marker_only and plain else "selected checks"
    return False, label, " ".join(words)


def run_scope(
    config: pytest.Config, inventory: Inventory, planned: Mapping[str, list[str]] | None = None
) -> RunScope:
    """The run's scope before its evidence is read: selection, exclusions, what is required
    (every requirement, and in a handover run every subject `planned` for it)."""
    handover, label, text = selection(config)
    excluded = []
    if inventory.scope is not None:
        reason = " ".join(inventory.scope.reason.split())
        excluded = [ScopeEntry(check_id=i, reason=reason) for i in excluded_ids(inventory)]
    required = required_ids(excluded_ids(inventory)) if handover else []
    out = set(excluded_ids(inventory))
    expected = {k: v for k, v in (planned or {}).items() if k not in out} if handover else {}
    return RunScope(
        handover=handover,
        label=label,
        selection=text,
        required=required,
        excluded=excluded,
        expected=expected,
    )


def is_lab(inventory: Inventory, placement: Mapping[str, MetadataFacts]) -> bool:
    """True when any signal says the nodes are the embedded lab: the `lab` profile, the lab's
    region in the inventory, or any node's metadata (the lab's region, instance ids or type).
    Any one suffices, so a lab run cannot hide by renaming one of them; a real ECS instance
    reports neither that region nor such an id."""
    if inventory.expect.profile == "lab" or inventory.cluster.region == LAB_REGION:
        return True
    for facts in placement.values():
        if facts.region_id == LAB_REGION:
            return True
        if facts.instance_id and LAB_INSTANCE.fullmatch(facts.instance_id):
            return True
        if facts.instance_type and LAB_TYPE.fullmatch(facts.instance_type):
            return True
    return False


def profile_facts(inventory: Inventory) -> dict:
    """`profile` and `profile_sources` of the run summary."""
    name = inventory.expect.profile or ""
    return {"profile": name, "profile_sources": load_profile_sources(name) if name else {}}


def unit_plan(expect: Expectations) -> dict[str, object]:
    """What every node's judges plan below the node, from the expectations alone (never from
    what a listing showed): the summary's `plan`, signed with it; `hpcnet merge` refuses
    partitions planned differently."""
    eris, source, _ = expected_eris(expect)
    level = expect.gpu_load.dcgm_level
    return {
        "gpus_per_node": expect.gpu.count,
        "eris_per_node": eris,
        "eris_source": source,
        "nvlink_links_per_gpu": expect.gpu_load.nvlink_links,
        "dcgm_level": level,
        "dcgm_tests": list(planned_tests(level)) if level else [],
        "min_peer_gpus": expect.gpu_load.min_peer_gpus,
        "min_peer_nodes": expect.gpu_load.min_peer_nodes,
    }
