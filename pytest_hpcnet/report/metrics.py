"""Measurements as a Prometheus textfile (node_exporter textfile collector format).

One gauge per measurement name (`hpcnet_<check>_<measurement>`, or
`hpcnet_<measurement>` where the name already starts with the check id), labelled
with check, node or pair, unit and the caller's labels; plus
`hpcnet_check_passed{check,subject}` 1 for pass, 0 for fail/error/waived, and
`hpcnet_fault{check,subject,code,repair}` 1 for each fault code of a failed check
(docs/fault-codes.md). A measurement of one device or GPU of its subject carries it as
`device`. Each node's burn-in adds its summary (`burnin_lines`): duration asked and achieved,
outcome, first failure's time with its GPU and quantity, hottest temperature, TFLOPS drift.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Iterable, Mapping
from datetime import date
from pathlib import Path

from pytest_hpcnet.redact import redact
from pytest_hpcnet.report.burnin_summary import NodeSummary, burnin_summaries
from pytest_hpcnet.report.evidence import CheckRecord, _write_atomic, effective_verdict
from pytest_hpcnet.requirements.registry import fault

PREFIX = "hpcnet_"
_NAME_BAD = re.compile(r"[^a-zA-Z0-9_]")


def metric_name(check_id: str, measurement: str) -> str:
    """A valid metric name for one measurement of one check."""
    base = measurement if measurement.startswith(check_id) else f"{check_id}_{measurement}"
    name = PREFIX + _NAME_BAD.sub("_", base).strip("_").lower()
    return re.sub(r"_+", "_", name)


def label_name(name: str) -> str:
    """A valid label name (`[a-zA-Z_][a-zA-Z0-9_]*`, not starting with `__`)."""
    cleaned = _NAME_BAD.sub("_", name) or "_"
    if cleaned.startswith("__"):
        cleaned = cleaned.lstrip("_") or "label"
    return "_" + cleaned if cleaned[0].isdigit() else cleaned


def escape_label_value(value: str) -> str:
    """A label value escaped for the exposition format (backslash, quote, newline)."""
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def format_sample_value(value: float) -> str:
    """A sample value as the exposition format spells it (`NaN`, `+Inf`, `-Inf`)."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return repr(float(value))


def _labels(pairs: Mapping[str, str]) -> str:
    body = ",".join(
        f'{label_name(k)}="{escape_label_value(redact(str(v)))}"' for k, v in pairs.items()
    )
    return "{" + body + "}"


def _subject_labels(record: CheckRecord) -> dict[str, str]:
    if record.kind == "pair":
        return {"pair": record.subject}
    if record.kind == "node":
        return {"node": record.subject}
    return {}


def prometheus_text(
    records: Iterable[CheckRecord],
    labels: Mapping[str, str] | None = None,
    run_date: date | None = None,
) -> str:
    """The exposition text for these records (grouped per metric, last sample wins)."""
    records = list(records)  # read twice: each measurement, then each node's burn-in
    common = dict(labels or {})
    families: dict[str, dict[str, str]] = {}
    helps: dict[str, str] = {}
    passed: dict[str, str] = {}
    faults: dict[str, str] = {}
    for record in records:
        for measurement in record.measured:
            value = measurement.value
            if isinstance(value, bool) or not isinstance(value, int | float):
                continue
            name = metric_name(record.check_id, measurement.name)
            helps.setdefault(name, f"{record.requirement}: {measurement.name}")
            device = measurement.subject.strip()
            sample_labels = {
                "check": record.check_id,
                **_subject_labels(record),
                **({"device": device} if device and device != record.subject else {}),
                "unit": measurement.unit,
                **common,
            }
            key = _labels(sample_labels)
            families.setdefault(name, {})[key] = format_sample_value(float(value))
        verdict = effective_verdict(record, run_date)
        if verdict == "skipped":
            continue
        key = _labels({"check": record.check_id, "subject": record.subject, **common})
        passed[key] = "1" if verdict == "pass" else "0"
        if verdict != "fail":
            continue
        for code in record.fault_codes():
            declared = fault(code)
            coded = {"check": record.check_id, "subject": record.subject, "code": code}
            coded["repair"] = declared.repair if declared else ""
            faults[_labels({**coded, **common})] = "1"
    lines: list[str] = []
    for name, help_text, samples in burnin_families(burnin_summaries(records, run_date), common):
        helps[name] = help_text
        families[name] = samples
    for name in sorted(families):
        help_text = helps[name].replace("\\", "\\\\").replace("\n", "\\n")
        lines.append(f"# HELP {name} {redact(help_text)}")
        lines.append(f"# TYPE {name} gauge")
        lines.extend(f"{name}{key} {value}" for key, value in families[name].items())
    if passed:
        name = PREFIX + "check_passed"
        lines.append(f"# HELP {name} 1 when the check passed on the subject, else 0")
        lines.append(f"# TYPE {name} gauge")
        lines.extend(f"{name}{key} {value}" for key, value in passed.items())
    if faults:
        name = PREFIX + "fault"
        lines.append(f"# HELP {name} 1 for each fault code of a check that failed on the subject")
        lines.append(f"# TYPE {name} gauge")
        lines.extend(f"{name}{key} {value}" for key, value in faults.items())
    return "\n".join(lines) + "\n" if lines else ""


BURNIN_FAMILIES: tuple[tuple[str, str], ...] = (
    ("burnin_asked_seconds", "the burn-in duration asked"),
    ("burnin_achieved_seconds", "the burn-in duration achieved (the judge's burnin.duration)"),
    ("burnin_outcome", "1 for the node's burn-in outcome (pass, fail, not_measured, ...)"),
    (
        "burnin_first_failure_seconds",
        "seconds into the burn-in of the node's first failure, with its GPU and quantity",
    ),
    ("burnin_max_temperature_celsius", "the hottest GPU temperature the burn-in judge reported"),
    ("burnin_tflops_drift_percent", "the largest TFLOPS drift below a GPU's first windows"),
)


def burnin_families(
    summaries: Iterable[NodeSummary], common: Mapping[str, str]
) -> list[tuple[str, str, dict[str, str]]]:
    """Each node's burn-in summary as gauge families (name, help, {labels: value})."""
    found: dict[str, dict[str, str]] = {name: {} for name, _ in BURNIN_FAMILIES}
    for s in summaries:
        node = {"node": s.node}
        values = {
            "burnin_asked_seconds": s.asked_s,
            "burnin_achieved_seconds": s.achieved_s,
            "burnin_max_temperature_celsius": s.max_temperature_c,
            "burnin_tflops_drift_percent": s.tflops_drift_pct,
        }
        for name, value in values.items():
            if value is not None:
                found[name][_labels({**node, **common})] = format_sample_value(value)
        outcome = _labels({**node, "outcome": s.outcome, **common})
        found["burnin_outcome"][outcome] = "1"
        first = s.first
        if first is not None and first.t is not None:
            key = _labels({**node, "device": first.subject, "quantity": first.quantity, **common})
            found["burnin_first_failure_seconds"][key] = format_sample_value(first.t)
    return [
        (PREFIX + name, help_text, found[name])
        for name, help_text in BURNIN_FAMILIES
        if found[name]
    ]


def write_prometheus_textfile(
    path: str | os.PathLike[str],
    records: Iterable[CheckRecord],
    labels: Mapping[str, str] | None = None,
    run_date: date | None = None,
) -> Path:
    """Write the records' metrics to `path` atomically (temp file + rename), mode 0644."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    _write_atomic(target, prometheus_text(records, labels, run_date).encode("utf-8"))
    os.chmod(target, 0o644)
    return target
