"""DCGM diagnostics: `dcgmi diag -r LEVEL -j` and a pure parser of its JSON.

Both published shapes are read (tests/fixtures/gpu_load/, provenance there): DCGM 4.x
(`"DCGM Diagnostic"` > `test_categories` > `tests` > `results[]`, one result per entity
with `entity_group`/`entity_id`, `status` Pass/Fail/Warn/Skip, `warnings[].warning`) and
DCGM 3.x (`"DCGM GPU Diagnostic"`, `null` entries between tests, `gpu_ids` as a string
"0,1,2" or an integer, statuses upper case). Text before the document (a warning line) is
skipped. Parsers never raise: an unreadable output is a result whose `error` says why.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

LEVEL_TIMEOUT_S = {1: 300, 2: 900, 3: 3600, 4: 10800}
"""How long each run level may take (level 3 runs about 10-20 minutes per node)."""
STATUSES = {"pass": "pass", "fail": "fail", "warn": "warn", "skip": "skip", "notrun": "skip"}


def dcgm_command(level: int) -> str:
    """`dcgmi diag -r LEVEL -j` with its stderr; the exit status is printed by the frame."""
    return f"dcgmi diag -r {int(level)} -j 2>&1"


@dataclass(frozen=True)
class DcgmResult:
    """One test's outcome on one GPU."""

    test: str
    gpu: int
    status: str
    """pass, fail, warn or skip (DCGM's "Skip" and "Not Run" alike); else DCGM's word."""
    warnings: tuple[str, ...] = ()


@dataclass(frozen=True)
class DcgmRun:
    """What `dcgmi diag -j` reported: per test and GPU, and the tests' summaries."""

    results: tuple[DcgmResult, ...] = ()
    summaries: dict[str, str] = field(default_factory=dict)
    """Test name -> its `test_summary` status (DCGM 4.x), for tests without GPU results."""
    version: str | None = None
    error: str | None = None

    def tests(self) -> list[str]:
        return list(dict.fromkeys([r.test for r in self.results] + list(self.summaries)))

    def for_gpu(self, index: int) -> list[DcgmResult]:
        return [r for r in self.results if r.gpu == index]


def _status(value: object) -> str:
    word = re.sub(r"[\s_-]", "", str(value or "")).lower()
    return STATUSES.get(word, word or "?")


def _gpus(result: dict) -> list[int]:
    if result.get("entity_group", "GPU") != "GPU":
        return []
    if isinstance(result.get("entity_id"), int):
        return [result["entity_id"]]
    ids = result.get("gpu_ids")
    if isinstance(ids, int):
        return [ids]
    if isinstance(ids, str):
        return [int(x) for x in ids.split(",") if x.strip().isdigit()]
    return []


def _warnings(result: dict) -> tuple[str, ...]:
    out = []
    for w in result.get("warnings") or []:
        text = w.get("warning") if isinstance(w, dict) else w
        if text:
            out.append(" ".join(str(text).split()))
    return tuple(out)


def parse_dcgm_json(text: str) -> DcgmRun:
    """Read `dcgmi diag -j` output (any text before the JSON document is skipped)."""
    start = text.find("{")
    if start < 0:
        tail = next((x.strip() for x in reversed(text.splitlines()) if x.strip()), "no output")
        return DcgmRun(error=f"dcgmi printed no JSON: {tail[:200]}")
    try:
        doc, _ = json.JSONDecoder().raw_decode(text[start:])
    except ValueError as exc:
        return DcgmRun(error=f"dcgmi's JSON is cut or invalid: {exc}")
    root = (
        doc.get("DCGM Diagnostic") or doc.get("DCGM GPU Diagnostic")
        if isinstance(doc, dict)
        else None
    )
    if not isinstance(root, dict) or not isinstance(root.get("test_categories"), list):
        return DcgmRun(error="no DCGM Diagnostic test_categories in dcgmi's JSON")
    results: list[DcgmResult] = []
    summaries: dict[str, str] = {}
    for category in root["test_categories"]:
        for test in (category or {}).get("tests") or []:
            if not isinstance(test, dict) or not test.get("name"):
                continue  # DCGM 3.x puts null between tests
            name = str(test["name"])
            summary = test.get("test_summary")
            if isinstance(summary, dict) and summary.get("status"):
                summaries[name] = _status(summary["status"])
            for result in test.get("results") or []:
                if not isinstance(result, dict):
                    continue
                for gpu in _gpus(result):
                    results.append(
                        DcgmResult(name, gpu, _status(result.get("status")), _warnings(result))
                    )
    if not results and not summaries:
        return DcgmRun(error="dcgmi's JSON lists no test result")
    metadata = doc.get("metadata") or {}
    version = metadata.get("version") if isinstance(metadata, dict) else None
    return DcgmRun(tuple(results), summaries, version)
