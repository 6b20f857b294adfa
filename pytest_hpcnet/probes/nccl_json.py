"""nccl-tests JSON output (`-J FILE`, nccl-tests 2.17.3+) into the table parser's `NcclResult`.

The same fields as `parse_nccl` and the same fail-closed rules: a cut-short or unreadable
file, fewer sizes than asked, a missing out-of-bounds or average-bandwidth section, or
another number of ranks or hosts than launched is an `error`, never a measurement.
Pure; never raises.
"""

from __future__ import annotations

import json
import math
import os
import re
from typing import Any

from pytest_hpcnet.probes.nccl import (
    NcclExpected,
    NcclRank,
    NcclResult,
    NcclRow,
    WrongCell,
    _incomplete,
    tally_wrong,
)
from pytest_hpcnet.probes.text import strip_ansi


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) and value >= 0 else None


def _int(value: Any) -> int:
    """An integer field (`count`, `device`), 0 when absent or not a finite whole number."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        return int(value)
    return 0


def _non_finite(value: Any) -> bool:
    """A NaN/Infinity in a result's figures (JSON that Python reads as non-finite floats);
    `nwrong` is left to the #wrong rules."""
    if isinstance(value, float):
        return not math.isfinite(value)
    if isinstance(value, dict):
        return any(_non_finite(v) for k, v in value.items() if k != "nwrong")
    if isinstance(value, list):
        return any(_non_finite(v) for v in value)
    return False


def _nwrong(half: dict) -> float | str | None:
    """A half's `nwrong` as a #wrong cell: None is N/A (nccl-tests writes null under -c 0),
    a str is not a count ("missing", or the value as written)."""
    if "nwrong" not in half:
        return "missing"
    value = half["nwrong"]
    if value is None or (isinstance(value, str) and value.strip().upper() == "N/A"):
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        return str(value)[:20] or repr(value)
    return float(value)


def _cells(row: NcclRow, item: dict) -> list[WrongCell]:
    """The row's #wrong cells, as written in the file."""
    cells: list[WrongCell] = [
        (row.size_bytes, row.redop, "out-of-place", _nwrong(item["out_of_place"]))
    ]
    if isinstance(item.get("in_place"), dict):
        cells.append((row.size_bytes, row.redop, "in-place", _nwrong(item["in_place"])))
    return cells


def _count(value: float | str | None) -> float | None:
    return float("nan") if isinstance(value, str) else value


def _row(item: Any) -> NcclRow | None:
    """A result row, or None when unreadable (a NaN/Infinity time, bandwidth or count)."""
    if not isinstance(item, dict) or _non_finite(item):
        return None
    oop, ip = item.get("out_of_place"), item.get("in_place")
    size = item.get("size")
    if not isinstance(oop, dict) or not isinstance(size, int) or isinstance(size, bool):
        return None
    measured = [_number(oop.get(k)) for k in ("time", "alg_bw", "bus_bw")]
    if any(v is None for v in measured) or size < 0:
        return None
    if ip is not None and not isinstance(ip, dict):
        return None  # an in-place half that is not an object: not read
    ip = ip or {}
    if ip and any(_number(ip.get(k)) is None for k in ("time", "alg_bw", "bus_bw")):
        return None  # an in-place cell that is not a number: the row is not read
    root = str(item.get("root", "")).strip()
    return NcclRow(
        size_bytes=item["size"],
        count=_int(item.get("count")),
        dtype=str(item.get("type", "")),
        redop=str(item["redop"]) if item.get("redop") is not None else None,
        root=int(root) if re.fullmatch(r"-?[0-9]+", root, re.A) else None,
        oop_time_us=measured[0],  # type: ignore[arg-type]
        oop_algbw_gbs=measured[1],  # type: ignore[arg-type]
        oop_busbw_gbs=measured[2],  # type: ignore[arg-type]
        oop_wrong=_count(_nwrong(oop)),
        ip_time_us=_number(ip.get("time")),
        ip_algbw_gbs=_number(ip.get("alg_bw")),
        ip_busbw_gbs=_number(ip.get("bus_bw")),
        ip_wrong=_count(_nwrong(ip)) if ip else None,
    )


def _okay(value: Any) -> bool | None:
    """`okay` as nccl-tests writes it (`"true"`/`"false"`, or a JSON boolean); None else."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    return None


def _ranks(config: dict) -> list[NcclRank]:
    out = []
    for d in config.get("devices") or []:
        if isinstance(d, dict) and type(d.get("rank")) is int:
            out.append(
                NcclRank(
                    rank=d["rank"],
                    host=str(d.get("hostname", "")),
                    device=_int(d.get("device")),
                    bus_id=str(d.get("device_hex", "")),
                    gpu=str(d.get("device_info", "")),
                    pid=d.get("pid") if isinstance(d.get("pid"), int) else None,
                    group=d.get("group") if isinstance(d.get("group"), int) else None,
                )
            )
    return out


def parse_nccl_json(text: str, expected: NcclExpected | None = None) -> NcclResult:
    """Parse one nccl-tests `-J` file; `expected` as for `parse_nccl`."""
    expected = expected or NcclExpected()
    body = strip_ansi(text).strip()
    try:
        data = json.loads(body)
    except ValueError as exc:
        flat = " ".join(body.split())[-60:] or "empty file"
        return NcclResult(error=f"unparseable JSON ({exc.msg}; cut short?): ...{flat}")
    if not isinstance(data, dict) or not isinstance(data.get("results"), list):
        return NcclResult(error="unparseable JSON: no `results` list")
    config = data.get("config") if isinstance(data.get("config"), dict) else {}
    facts: dict[str, object] = {}
    for key, name in (
        ("minimum_bytes", "min_bytes_asked"),
        ("maximum_bytes", "max_bytes_asked"),
        ("step_factor", "step_factor"),
        ("step_bytes", "step_bytes"),
        ("validation", "validation"),
        ("ngpus", "n_gpus_per_thread"),
    ):
        if isinstance(config.get(key), int) and not isinstance(config.get(key), bool):
            facts[name] = config[key]
    if facts.get("step_factor") == 1:  # nccl-tests steps by bytes when the factor is 1
        facts.pop("step_factor")
    args = data.get("args") if isinstance(data.get("args"), list) else []
    if args:
        facts["collective"] = os.path.basename(str(args[0]))
    if isinstance(data.get("nccl_version"), int):
        facts["nccl_version"] = data["nccl_version"]
    oob = data.get("out_of_bounds")
    okay = _okay(oob.get("okay")) if isinstance(oob, dict) else None
    count = oob.get("count") if isinstance(oob, dict) else None
    unread: list[str] = []
    if isinstance(count, int) and not isinstance(count, bool) and count >= 0 and okay is not None:
        facts["oob_values"] = count
        facts["oob_failed"] = not okay or count > 0
    elif isinstance(oob, dict):
        unread.append(f"out_of_bounds not a count and true/false: {json.dumps(oob)[:60]}")
    avg = data.get("average_bus_bandwidth")
    saw_avg = isinstance(avg, dict) and _number(avg.get("bandwidth")) is not None
    if saw_avg:
        facts["avg_busbw_gbs"] = _number(avg.get("bandwidth"))  # type: ignore[union-attr]
    failures = tuple(str(e) for e in data.get("errors") or [] if str(e).strip())
    ranks = _ranks(config)
    tables = (len(ranks),) if ranks else ()
    common = {"ranks": tuple(ranks), "tables": tables, "failures": failures, **facts}
    rows, problems = [], unread
    cells: list[WrongCell] = []
    for item in data["results"]:
        row = _row(item)
        if row is None:
            problems.append(f"unreadable result: {json.dumps(item)[:80]}")
        else:
            rows.append(row)
            cells += _cells(row, item)
    if not rows:
        why = failures[0] if failures else "no result in `results`"
        return NcclResult(problems=tuple(problems), error=why, **common)  # type: ignore[arg-type]
    wrong = tally_wrong(cells)  # NaN, negative, fractional or missing: not a count
    wrong_column = "#wrong" if facts.get("validation") == 1 else None
    why = _incomplete(rows, facts, saw_avg, expected, ranks, wrong_column, wrong, tables)
    if problems:
        why.append(f"{len(problems)} unreadable result(s): {problems[0]}")
    if why and failures:
        why.append(failures[0])
    top = max(rows, key=lambda r: r.size_bytes)
    return NcclResult(
        rows=tuple(rows),
        error="; ".join(why) or None,
        busbw_at_max_size_gbs=top.oop_busbw_gbs,
        max_size_bytes=top.size_bytes,
        wrong_column=wrong_column,
        **wrong.fields(),  # type: ignore[arg-type]
        problems=tuple(problems),
        **common,  # type: ignore[arg-type]
    )
