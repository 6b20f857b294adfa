"""Mutation property of the NCCL parsers: over every NCCL output in tests/fixtures (text and
`-J` JSON; the shared corpus's other collectives and single-node runs are carried in under
tests/fixtures/nccl_corpus, see its PROVENANCE.md), no mutation makes a parser raise, and
no mutated output is judged a pass, held to what the original's command launched, unless
its figures are the original's.

Mutations: two outputs concatenated, a row repeated, the output cut at (sampled) offsets, an
error line after a complete result, a size / host / rank / GPU count replaced, a numeric cell
(or the average) set to 0, -1, nan, inf, 1e300 or non-ASCII digits. Deterministic (a fixed
seed), a few seconds.
"""

from __future__ import annotations

import copy
import json
import random
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from pytest_hpcnet.probes.nccl import _PREFIX_RE, NcclExpected, NcclResult, parse_nccl
from pytest_hpcnet.probes.nccl_json import parse_nccl_json
from pytest_hpcnet.requirements.judges import judge_nccl_run
from pytest_hpcnet.transport.fanout import CommandResult

ROOT = Path(__file__).parent.parent / "fixtures"
TEXTS = sorted(
    [
        *ROOT.glob("nccl/*.txt"),
        *ROOT.glob("nccl_corpus/*.txt"),
        *ROOT.glob("samples/nccl*/*.txt"),
    ]
)
JSONS = sorted(ROOT.glob("samples/nccl*/*.json"))
OK = CommandResult("node01", "mpirun ... all_reduce_perf", 0, "", "", 1.0, 0.0)
BAD_CELLS = ("0", "-1", "nan", "inf", "1e300", "８", "١٢", "-0.5")
ERRORS = (
    "node02: Test NCCL failure common.cu:1279 'unhandled system error (run with "
    "NCCL_DEBUG=INFO for details) / '\n",
    "[rank3]: node02:39810:39890 [0] misc/socket.cc:50 NCCL WARN unhandled system error\n",
    " .. node02 pid 39810: Test failure common.cu:1454\n",
)
_GUESS = (
    ("alltoall", "alltoall_perf"),
    ("all-gather", "all_gather_perf"),
    ("broadcast", "broadcast_perf"),
    ("reduce-scatter", "reduce_scatter_perf"),
)


def launched_by(original: NcclResult, name: str) -> NcclExpected:
    """What the original's command launched, as its own output states it."""
    collective = original.collective or next(
        (c for key, c in _GUESS if key in name), "all_reduce_perf"
    )
    ops = {r.redop for r in original.rows if r.redop is not None}
    return NcclExpected(
        max_bytes=original.max_bytes_asked,
        ranks=len(original.ranks) or None,
        nodes=len(original.hosts) or None,
        validation=None if original.validation is None else original.validation == 1,
        min_bytes=original.min_bytes_asked,
        step_factor=original.step_factor,
        gpus_per_process=original.n_gpus_per_thread,
        op=ops.pop() if len(ops) == 1 else None,
        collective=collective,
        hosts=tuple((h,) for h in original.hosts) or None,
    )


def figures(r: NcclResult) -> tuple:
    return (
        r.rows,
        r.avg_busbw_gbs,
        r.oob_values,
        r.oob_failed,
        r.total_wrong,
        r.wrong_cells,
        r.ranks,
        r.max_size_bytes,
        r.busbw_at_max_size_gbs,
    )


def _replace_token(line: str, index: int, value: str) -> str:
    spans = [m.span() for m in re.finditer(r"\S+", line)]
    start, end = spans[index]
    width = end - start
    return line[:start] + value.rjust(width) + line[end:]


def _row_lines(lines: list[str]) -> list[int]:
    out = []
    for i, raw in enumerate(lines):
        body = _PREFIX_RE.sub("", raw, count=1)
        tokens = body.split()
        if len(tokens) >= 7 and tokens[0].isascii() and tokens[0].isdigit():
            out.append(i)
    return out


def text_mutants(text: str, other: str, rng: random.Random) -> Iterator[tuple[str, str]]:
    lines = text.splitlines(keepends=True)
    rows = _row_lines(lines)
    yield "concatenated with itself", text + text
    yield "concatenated with another output", text + other
    for i in rng.sample(rows, min(3, len(rows))):
        yield f"row {i} repeated", "".join([*lines[: i + 1], lines[i], *lines[i + 1 :]])
    n = len(text)
    offsets = set(range(0, n, max(1, n // 50))) | set(range(max(0, n - 160), n, 2))
    for at in sorted(offsets):
        yield f"cut at {at}", text[:at]
    for err in ERRORS:
        yield f"error appended: {err[:30]}", text + err
    for i in rows:
        prefix = lines[i][: len(lines[i]) - len(_PREFIX_RE.sub("", lines[i], count=1))]
        body = lines[i][len(prefix) :]
        size = int(body.split()[0])
        for other_size in {size * 2, size + 4, max(size - 4, 0), size // 2}:
            yield f"row {i} size {other_size}", _edit(lines, i, prefix, body, 0, str(other_size))
    cells = [(i, k) for i in rows for k in range(1, 9)]
    for i, k in rng.sample(cells, min(45, len(cells))):
        prefix = lines[i][: len(lines[i]) - len(_PREFIX_RE.sub("", lines[i], count=1))]
        body = lines[i][len(prefix) :]
        index = len(body.split()) - k
        value = rng.choice(BAD_CELLS)
        yield f"row {i} cell -{k} = {value}", _edit(lines, i, prefix, body, index, value)
    for i, raw in enumerate(lines):
        if m := re.search(r"on (\S+) device", raw):
            for host in ("intruder-07", *{h for h in re.findall(r"on (\S+) device", text)}):
                if host != m.group(1):
                    edited = raw[: m.start(1)] + host + raw[m.end(1) :]
                    yield (
                        f"rank line {i} host {host}",
                        "".join([*lines[:i], edited, *lines[i + 1 :]]),
                    )
            if rm := re.search(r"Rank\s+(\d+)", raw):
                edited = raw[: rm.start(1)] + str(int(rm.group(1)) + 64) + raw[rm.end(1) :]
                yield f"rank line {i} renumbered", "".join([*lines[:i], edited, *lines[i + 1 :]])
            yield f"rank line {i} removed", "".join(lines[:i] + lines[i + 1 :])
            break  # the first rank line is enough; the rest are alike
    for pattern, value in (
        (r"(nGpus\s+)(\d+)", lambda v: str(int(v) + 1)),
        (r"(minBytes\s+)(\d+)", lambda v: str(int(v) * 2)),
        (r"(maxBytes\s+)(\d+)", lambda v: str(int(v) // 2)),
        (r"(step:\s*)(\d+)", lambda v: str(int(v) + 1)),
        (r"(Out of bounds values\s*:\s*)(\d+)", lambda v: str(int(v) + 1)),
    ):
        if m := re.search(pattern, text):
            edited = text[: m.start(2)] + value(m.group(2)) + text[m.end(2) :]
            yield f"{pattern} replaced", edited
    if m := re.search(r"(Avg bus bandwidth\s*:\s*)(\S+)", text):
        for value in BAD_CELLS:
            yield f"average = {value}", text[: m.start(2)] + value + text[m.end(2) :]


def _edit(lines: list[str], i: int, prefix: str, body: str, index: int, value: str) -> str:
    return "".join([*lines[:i], prefix + _replace_token(body, index, value), *lines[i + 1 :]])


def json_mutants(text: str, rng: random.Random) -> Iterator[tuple[str, str]]:
    data = json.loads(text)

    def edit(change) -> str:
        copied = copy.deepcopy(data)
        change(copied)
        return json.dumps(copied)

    yield "concatenated", text + text
    yield "concatenated, newline", text + "\n" + text
    n = len(text)
    for at in sorted(set(range(0, n, max(1, n // 60))) | set(range(max(0, n - 120), n, 3))):
        yield f"cut at {at}", text[:at]
    results = data.get("results") or []
    for i in range(len(results)):
        yield f"result {i} repeated", edit(lambda d, i=i: d["results"].insert(i, d["results"][i]))
        size = results[i]["size"]
        for other in (size * 2, size + 4, size // 2):
            yield (
                f"result {i} size {other}",
                edit(lambda d, i=i, o=other: d["results"][i].update(size=o)),
            )
    yield "errors appended", edit(lambda d: d.update(errors=[*d.get("errors", []), ERRORS[0]]))
    values: list[object] = [0, 0.0, -1, float("nan"), float("inf"), 1e300, "８", "١٢", None, "1"]
    for i in range(len(results)):
        for half in ("out_of_place", "in_place"):
            for key in ("time", "alg_bw", "bus_bw", "nwrong"):
                value = rng.choice(values)
                yield (
                    f"{i} {half} {key} = {value!r}",
                    edit(lambda d, i=i, h=half, k=key, v=value: d["results"][i][h].update({k: v})),
                )
    for value in ("yes", 1, None, "false"):
        yield f"okay = {value!r}", edit(lambda d, v=value: d["out_of_bounds"].update(okay=v))
    for value in values:
        yield (
            f"avg = {value!r}",
            edit(lambda d, v=value: d["average_bus_bandwidth"].update(bandwidth=v)),
        )
    yield "host replaced", edit(lambda d: d["config"]["devices"][0].update(hostname="intruder"))
    yield "rank replaced", edit(lambda d: d["config"]["devices"][0].update(rank=5))
    yield (
        "rank added",
        edit(lambda d: d["config"]["devices"].append(dict(d["config"]["devices"][0], rank=1))),
    )
    yield "ngpus replaced", edit(lambda d: d["config"].update(ngpus=2))
    yield "minimum_bytes replaced", edit(lambda d: d["config"].update(minimum_bytes=8))


def _check(original: NcclResult, mutants, parse, launched: NcclExpected) -> tuple[int, int]:
    """(mutants judged, mutants rejected); asserts the property for each."""
    judged = rejected = 0
    for what, text in mutants:
        mutant = parse(text, launched)
        verdict = judge_nccl_run(mutant, OK, launched)
        judged += 1
        if verdict.outcome == "pass":
            assert figures(mutant) == figures(original), f"{what}: judged pass, figures differ"
        else:
            rejected += 1
    return judged, rejected


@pytest.mark.parametrize("path", TEXTS, ids=lambda p: p.name)
def test_text_mutants_never_raise_and_never_pass_with_other_figures(path):
    text = path.read_text()
    original = parse_nccl(text)
    launched = launched_by(original, path.name)
    original = parse_nccl(text, launched)
    other = TEXTS[(TEXTS.index(path) + 1) % len(TEXTS)].read_text()
    rng = random.Random(path.name)
    judged, rejected = _check(original, text_mutants(text, other, rng), parse_nccl, launched)
    assert judged > 20
    if judge_nccl_run(original, OK, launched):
        assert rejected > judged // 2  # the property is not vacuous: most mutants are caught


@pytest.mark.parametrize("path", JSONS, ids=lambda p: p.name)
def test_json_mutants_never_raise_and_never_pass_with_other_figures(path):
    text = path.read_text()
    loose = parse_nccl_json(text)
    launched = launched_by(loose, path.name)
    original = parse_nccl_json(text, launched)
    assert judge_nccl_run(original, OK, launched), original.reason  # the real file passes
    rng = random.Random(path.name)
    judged, rejected = _check(original, json_mutants(text, rng), parse_nccl_json, launched)
    assert judged > 50 and rejected > judged // 2


def test_the_healthy_originals_pass_as_launched():
    """The property is judged against real passes: the complete real runs pass here."""
    passing = []
    for path in TEXTS:
        original = parse_nccl(path.read_text())
        launched = launched_by(original, path.name)
        if judge_nccl_run(parse_nccl(path.read_text(), launched), OK, launched):
            passing.append(path.name)
    assert "gcp-a3mega-h100-2node-16gpu.txt" in passing
    assert "cscs-alps-gh200-2node-nccl-tests-2.18.2.txt" in passing
    assert len(passing) >= 10, passing
