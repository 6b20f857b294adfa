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
LEVEL_TESTS = {
    1: ("software",),
    2: ("pcie", "memory"),
    3: ("diagnostic", "targeted_stress", "targeted_power", "memory_bandwidth"),
    4: ("memtest", "pulse_test"),
}
"""The tests each run level adds to the one below, by DCGM 4's canonical names (DCGM user
guide, "Run Levels" table, docs.nvidia.com/datacenter/dcgm/latest/user-guide/
dcgm-diagnostics.html: r1 software; r2 + PCIe, GPU memory; r3 + diagnostic, targeted
stress, targeted power, memory bandwidth; r4 + memtest, pulse test). DCGM 3.x names the
same tests in words ("Memory", "Targeted Stress") and splits software into its Deployment
checks ("Denylist", "NVML Library", ...): `canonical_test` maps both onto these names."""
ALIASES = {"gpu_memory": "memory", "pcie_gpu_bandwidth": "pcie", "input_edpp": "pulse_test"}


def planned_tests(level: int) -> tuple[str, ...]:
    """The canonical tests `dcgmi diag -r LEVEL` runs on every GPU (see `LEVEL_TESTS`)."""
    return tuple(t for lv in sorted(LEVEL_TESTS) if lv <= int(level) for t in LEVEL_TESTS[lv])


def canonical_test(name: str, category: str = "") -> str:
    """DCGM 4's name of a test as 3.x or 4.x printed it: a Deployment check is `software`."""
    if str(category).strip().lower() == "deployment":
        return "software"
    word = re.sub(r"[^a-z0-9]+", "_", str(name).lower()).strip("_")
    return ALIASES.get(word, word)


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
    category: str = ""
    """The test's category (`Deployment`, `Hardware`, ...), as DCGM printed it."""

    @property
    def canonical(self) -> str:
        """The test's DCGM 4 name (`software` for 3.x's Deployment checks)."""
        return canonical_test(self.test, self.category)


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
    entity = result.get("entity_id")
    if isinstance(entity, int) and not isinstance(entity, bool):
        return [entity] if entity >= 0 else []
    ids = result.get("gpu_ids")
    if isinstance(ids, int) and not isinstance(ids, bool):
        return [ids] if ids >= 0 else []
    if isinstance(ids, str):  # ASCII digits only: int() reads a full-width "１" as 1
        return [int(x) for x in ids.split(",") if re.fullmatch(r"[0-9]+", x.strip())]
    return []


def _warnings(result: dict) -> tuple[str, ...]:
    out = []
    found = result.get("warnings")
    for w in found if isinstance(found, list) else []:
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
        doc, end = json.JSONDecoder().raw_decode(text[start:])
    except ValueError as exc:
        return DcgmRun(error=f"dcgmi's JSON is cut or invalid: {exc}")
    after = text[start + end :].strip()
    if after:  # an error after the document, or a second run: not one whole result
        return DcgmRun(error=f"text after dcgmi's JSON document: {after.splitlines()[0][:160]}")
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
        if not isinstance(category, dict):
            continue
        group = str(category.get("category") or "")
        tests = category.get("tests")
        for test in tests if isinstance(tests, list) else []:
            if not isinstance(test, dict) or not test.get("name"):
                continue  # DCGM 3.x puts null between tests
            name = str(test["name"])
            summary = test.get("test_summary")
            if isinstance(summary, dict) and summary.get("status"):
                summaries[name] = _status(summary["status"])
            found = test.get("results")
            for result in found if isinstance(found, list) else []:
                if not isinstance(result, dict):
                    continue
                for gpu in _gpus(result):
                    status = _status(result.get("status"))
                    results.append(DcgmResult(name, gpu, status, _warnings(result), group))
    if not results and not summaries:
        return DcgmRun(error="dcgmi's JSON lists no test result")
    metadata = doc.get("metadata") or {}
    version = metadata.get("version") if isinstance(metadata, dict) else None
    return DcgmRun(tuple(results), summaries, version)
