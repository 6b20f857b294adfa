"""Mutation property of the perftest, ping and fio parsers (review findings 1-4).

Every fixture of tests/fixtures/{perftest,ping,fio} and the corpus copies in
tests/fixtures/samples/{ib_write_bw,ib_write_lat,ip_link_ping,fio_json} (provenance in
tests/fixtures/samples/PROVENANCE.md), mutated: two outputs concatenated (itself, another),
a line repeated, a cut at every offset (spread on long files, every offset of the last
lines kept), a tool error line appended after the whole result, the message size, host,
packet size or count replaced, a numeric cell set to 0, -1, nan, inf, 1e300 or digits of
another script. No parser raises, and no mutant is judged a pass with the original's
expected parameters (the command the original answered, the original's figures as the
bounds) unless it holds exactly the original's figures. Deterministic; plain parametrize.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from pytest_hpcnet.probes.fio import FioResult, parse_fio_json
from pytest_hpcnet.probes.perftest import ExpectedRun
from pytest_hpcnet.probes.perftest_parsers import (
    BandwidthResult,
    LatencyResult,
    parse_bandwidth,
    parse_latency,
)
from pytest_hpcnet.probes.ping import IPV4_ICMP_OVERHEAD, PingResult, parse_ping
from pytest_hpcnet.requirements.mtu import path_mtu_ok

FIXTURES = Path(__file__).parents[1] / "fixtures"
SPREAD_CUTS = 160
TAIL_CUTS = 160  # every offset of the output's end: where a killed run stops
CELLS = 14
TEXT_VALUES = ("0", "-1", "nan", "inf", "1e300", "１２３", "١٢٣", "٣.٥")
JSON_VALUES = ("0", "-1", "NaN", "Infinity", "1e300", '"１２３"', '"١٢٣"', '"EIO"')
_NUMBER = re.compile(r"(?<![\w.])[-+]?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?(?![\w])", re.ASCII)


def _spread(items: list, count: int) -> list:
    if len(items) <= count:
        return items
    return [items[i * (len(items) - 1) // (count - 1)] for i in range(count)]


# --------------------------------------------------------------------------- per tool


@dataclass(frozen=True)
class Tool:
    """How one tool's output is parsed with the original's expectation, when the result
    would pass under bounds set to the original's figures, and its figures."""

    name: str
    expect: Callable[[Any], dict[str, Any]]  # the original's result -> parser kwargs
    parse: Callable[..., Any]
    passes: Callable[[Any, Any], bool]  # (result, original result)
    figures: Callable[[Any], tuple]
    errors: tuple[str, ...]
    replacements: Callable[[str, Any], Iterator[tuple[str, str]]]
    json: bool = False


def _common(values: list[int]) -> int | None:
    return values[0] if values and len(set(values)) == 1 else None


def _perftest_expect(kind: str) -> Callable[[Any], dict[str, Any]]:
    def expect(original: BandwidthResult | LatencyResult) -> dict[str, Any]:
        if not original.ok or not original.rows:
            return {}
        sizes = [r.msg_size for r in original.rows]
        run = ExpectedRun(
            test=original.header.test,
            kind=kind,
            size=sizes[0] if len(sizes) == 1 else None,
            largest=max(sizes),
            iterations=_common([r.iterations for r in original.rows]),
        )
        return {"expected_size": max(sizes), "expected": run}

    return expect


def _bw_passes(r: BandwidthResult, o: BandwidthResult) -> bool:
    return r.ok and (o.avg_gbps is None or r.avg_gbps >= o.avg_gbps)


def _lat_passes(r: LatencyResult, o: LatencyResult) -> bool:
    if not r.ok:
        return False
    if o.t_avg_us is not None and r.t_avg_us > o.t_avg_us:
        return False
    return not (o.p99_us is not None and r.p99_us is not None and r.p99_us > o.p99_us)


def _perftest_replacements(text: str, original: Any) -> Iterator[tuple[str, str]]:
    for title in ("RDMA_Read", "Send", "Atomic"):
        yield f"test {title}", text.replace("RDMA_Write", title)
    lat = text.replace("BW Test", "Latency Test") if "BW Test" in text else None
    if lat:
        yield "test latency", lat
    yield "test bw", text.replace("Latency Test", "BW Test")
    for row in original.rows[-2:]:
        for old, new in ((row.msg_size, row.msg_size // 2 or 4), (row.iterations, 4321)):
            pattern = re.compile(rf"^(\s*(?:\S+\s+)?){old}\b", re.M)
            yield f"size/count {old}->{new}", pattern.sub(rf"\g<1>{new}", text, count=1)
    yield "bare 2x", re.sub(r"^(\s*)(\d+\.\d+)\s*$", r"\1\2\2", text, flags=re.M)


PERFTEST_ERRORS = (
    " Failed to complete run\n",
    "Couldn't read remote address\n",
    " Completion with error at client\n",
    "\n Failed to modify QP to RTR\n",
)


def _ping_expect(original: PingResult) -> dict[str, Any]:
    return {
        "expected_count": original.transmitted,
        "expected_packet": original.packet_size,
        "expected_target": original.target,
    }


def _ping_passes(r: PingResult, o: PingResult) -> bool:
    if not path_mtu_ok(r, o.packet_size).ok:
        return False
    return o.rtt_avg_ms is None or (r.rtt_avg_ms is not None and r.rtt_avg_ms <= o.rtt_avg_ms)


def _ping_figures(r: PingResult) -> tuple:
    return (
        r.target,
        r.payload_size,
        r.packet_size,
        r.transmitted,
        r.received,
        r.loss_percent,
        r.path_mtu,
        r.rtt_min_ms,
        r.rtt_avg_ms,
        r.rtt_max_ms,
    )


def _ping_replacements(text: str, original: PingResult) -> Iterator[tuple[str, str]]:
    if original.target:
        yield "host", text.replace(original.target, "10.9.9.9")
        yield "host in header", text.replace(original.target, "10.9.9.9", 1)
    if original.payload_size is not None and original.packet_size is not None:
        p, q = original.payload_size, original.packet_size
        yield "size", text.replace(f"{p}({q})", "1472(1500)")
        yield "reply size", text.replace(f"{p + 8} bytes", "1480 bytes")
        yield (
            "size everywhere",
            text.replace(f"{p}({q})", "1472(1500)").replace(f"{p + 8} bytes", "1480 bytes"),
        )
    if original.transmitted is not None:
        n, m = original.transmitted, original.received
        yield "count", text.replace(f"{n} packets transmitted", "9 packets transmitted")
        yield "received", text.replace(f"{m} received", f"{(m or 0) + 2} received")


def _fio_passes(r: FioResult, o: FioResult) -> bool:
    if not r.ok:
        return False
    for mine, theirs in ((r.read_bw_mb_s, o.read_bw_mb_s), (r.write_bw_mb_s, o.write_bw_mb_s)):
        if theirs is not None and theirs > 0 and (mine is None or mine < theirs):
            return False
    return True


def _fio_figures(r: FioResult) -> tuple:
    jobs = tuple((j.name, j.error, j.read.bw_mb_s, j.write.bw_mb_s) for j in r.jobs)
    return (r.read_bw_mb_s, r.write_bw_mb_s, jobs)


def _fio_replacements(text: str, original: FioResult) -> Iterator[tuple[str, str]]:
    start = text.find("{")
    try:
        data = json.loads(text[start:]) if start >= 0 else None
    except ValueError:
        return
    if not isinstance(data, dict) or not isinstance(data.get("jobs"), list) or not data["jobs"]:
        return
    twice = dict(data, jobs=[*data["jobs"], data["jobs"][0]])
    yield "job twice", text[:start] + json.dumps(twice)
    for error in ("EIO", "5", 1.5, None, True):
        first = dict(data["jobs"][0], error=error)
        yield f"error {error!r}", text[:start] + json.dumps(dict(data, jobs=[first]))


FIO_ERRORS = (
    "fio: io_u error on file /mnt/cpfs/hpcnet-seq.0.0: Input/output error: read offset=0\n",
    "fio: pid=1234, err=5/file:io_u.c:1845, func=io_u error, error=Input/output error\n",
)
PING_ERRORS = (
    "From 10.0.0.1 icmp_seq=4 Destination Host Unreachable\n",
    "ping: sendmsg: Network is unreachable\n",
    "ping: local error: message too long, mtu=1500\n",
)

BW = Tool(
    "bandwidth",
    _perftest_expect("bw"),
    parse_bandwidth,
    _bw_passes,
    lambda r: (r.avg_gbps, r.msg_size),  # peak: see `_same`
    PERFTEST_ERRORS,
    _perftest_replacements,
)
LAT = Tool(
    "latency",
    _perftest_expect("lat"),
    parse_latency,
    _lat_passes,
    lambda r: (r.t_avg_us, r.p99_us, r.p999_us, r.msg_size),  # what the judge reads
    PERFTEST_ERRORS,
    _perftest_replacements,
)
PING = Tool(
    "ping", _ping_expect, parse_ping, _ping_passes, _ping_figures, PING_ERRORS, _ping_replacements
)
FIO = Tool(
    "fio",
    lambda o: {},
    parse_fio_json,
    _fio_passes,
    _fio_figures,
    FIO_ERRORS,
    _fio_replacements,
    json=True,
)


def _plain(value: Any) -> Any:
    if isinstance(value, float) and value != value:
        return "nan"
    if isinstance(value, tuple):
        return tuple(_plain(v) for v in value)
    return value


def _same(result: Any, original: Any, tool: Tool) -> bool:
    """The mutant holds the original's figures (a bandwidth's peak may be withheld: None
    is not measured, never another figure)."""
    if _plain(tool.figures(result)) != _plain(tool.figures(original)):
        return False
    peak = getattr(result, "peak_gbps", None)
    return peak is None or peak == original.peak_gbps


def _files() -> list[tuple[Tool, Path]]:
    found: list[tuple[Tool, Path]] = []
    for folder in ("perftest", "samples/ib_write_bw", "samples/ib_write_lat"):
        for path in sorted((FIXTURES / folder).glob("*.txt")):
            found.append((LAT if "lat" in path.name else BW, path))
    for pattern in ("ping/*.txt", "samples/ip_link_ping/ping-*"):
        found += [(PING, p) for p in sorted(FIXTURES.glob(pattern))]
    for pattern in ("fio/fio*.json", "fio/real-*.json", "fio/fio-*.txt", "samples/fio_json/*"):
        found += [(FIO, p) for p in sorted(FIXTURES.glob(pattern))]
    return found


FILES = _files()


def test_the_corpus_is_there():
    tools = {t.name for t, _ in FILES}
    assert tools == {"bandwidth", "latency", "ping", "fio"} and len(FILES) > 50


# --------------------------------------------------------------------------- mutants


def mutants(tool: Tool, text: str, original: Any, others: list[str]) -> Iterator[tuple[str, str]]:
    yield "self twice", text + text
    for i, other in enumerate(others[:2]):
        yield f"then other {i}", text + other
        yield f"other {i} then", other + text
    lines = text.splitlines(keepends=True)
    numeric = [i for i, ln in enumerate(lines) if re.search(r"\d", ln)]
    for i in _spread(numeric, 10):
        yield f"line {i} twice", "".join(lines[: i + 1] + lines[i:])
    offsets = sorted(
        set(_spread(list(range(len(text))), SPREAD_CUTS))
        | set(range(max(0, len(text) - TAIL_CUTS), len(text)))
    )
    for k in offsets:
        yield f"cut at {k}", text[:k]
    whole = text if text.endswith("\n") else text + "\n"
    for line in tool.errors:
        yield f"then {line.strip()[:30]}", whole + line
    yield from tool.replacements(text, original)
    values = JSON_VALUES if tool.json else TEXT_VALUES
    for m in _spread(list(_NUMBER.finditer(text)), CELLS):
        for value in values:
            yield (
                f"cell {m.group()}@{m.start()}={value}",
                text[: m.start()] + value + text[m.end() :],
            )


STRUCTURAL = ("self twice", "then ", "other ")
"""Mutants that stay not measured whatever the original: two outputs, an error appended."""


@pytest.mark.parametrize(
    ("tool", "path"), FILES, ids=[f"{t.name}:{p.parent.name}/{p.name}" for t, p in FILES]
)
def test_no_mutant_passes_with_other_figures(tool: Tool, path: Path):
    text = path.read_text(errors="replace")
    base = tool.parse(text)
    kwargs = tool.expect(base)
    original = tool.parse(text, **kwargs)
    assert _plain(tool.figures(original)) == _plain(tool.figures(base))  # same figures
    others = [p.read_text(errors="replace") for t, p in FILES if t is tool and p != path]
    others = [o for o in others if o.strip()][:: max(1, len(others) // 2)]
    measured = tool.passes(original, original)
    bad: list[str] = []
    for name, mutant in mutants(tool, text, original, others):
        try:
            result = tool.parse(mutant, **kwargs)
        except Exception as exc:
            bad.append(f"{name}: raised {exc!r}")
            continue
        if not measured and not name.startswith(STRUCTURAL):
            continue  # a cut or edited cell can make a misread output a whole one
        if tool.passes(result, original) and not _same(result, original, tool):
            bad.append(f"{name}: passes with {tool.figures(result)}")
    assert not bad, f"{len(bad)} mutants of {path.name}:\n" + "\n".join(bad[:12])


def test_the_property_can_fail():
    """A mutant that keeps the output's shape but changes its figure is caught."""
    text = (FIXTURES / "perftest" / "bw-client-erdma-gbits-s65536.txt").read_text()
    original = parse_bandwidth(text)
    louder = parse_bandwidth(text.replace("180.77", "280.77"))
    assert BW.passes(louder, original) and not _same(louder, original, BW)


def test_ping_fixture_expectation_is_the_packet_asked():
    text = (FIXTURES / "ping" / "success-stats.txt").read_text()
    original = parse_ping(text)
    assert _ping_expect(original)["expected_packet"] == original.payload_size + IPV4_ICMP_OVERHEAD
