"""Measurements as a Prometheus textfile (node_exporter textfile collector format).

One gauge per measurement name (`hpcnet_<check>_<measurement>`, or
`hpcnet_<measurement>` where the name already starts with the check id), labelled
with check, node or pair, unit and the caller's labels; plus
`hpcnet_check_passed{check,subject}` 1 for pass, 0 for fail/error/waived, and
`hpcnet_fault{check,subject,code,repair}` 1 for each fault code of a failed check
(docs/fault-codes.md).
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Iterable, Mapping
from datetime import date
from pathlib import Path

from pytest_hpcnet.redact import redact
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
            sample_labels = {
                "check": record.check_id,
                **_subject_labels(record),
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
