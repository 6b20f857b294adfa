"""pytest-html additions: the environment table and per-test extras (measured vs threshold).

Only used when pytest-html is installed; everything here is optional decoration of the
standard report, the evidence bundle stays the record of truth.
"""

from __future__ import annotations

import html
from typing import Any

import pytest

from pytest_hpcnet.inventory.models import Inventory

try:
    from pytest_html import extras as html_extra
except ImportError:  # pragma: no cover - pytest-html is a dependency, but stay optional
    html_extra = None

try:
    from pytest_metadata.plugin import metadata_key
except ImportError:  # pragma: no cover
    metadata_key = None


def environment_rows(inventory: Inventory) -> dict[str, str]:
    """Cluster, region, node count and digests for the report's environment table."""
    return {
        "Cluster": f"{inventory.cluster.name} ({inventory.cluster.region})",
        "Nodes": str(len(inventory.nodes)),
        "Inventory sha256": inventory.sha256,
        "Expectations sha256": inventory.expect_sha256,
    }


def add_environment(config: pytest.Config, inventory: Inventory) -> None:
    """Put the cluster rows into pytest-metadata's table if it was already gathered
    (its `pytest_configure` may run before ours; otherwise `pytest_metadata` adds them)."""
    if metadata_key is not None and metadata_key in config.stash:
        config.stash[metadata_key].update(environment_rows(inventory))


def _measurement_rows(record: dict[str, Any]) -> str:
    rows = []
    for m in record.get("measured", []):
        threshold = (
            "" if m.get("threshold") is None else f"{m.get('comparison') or ''} {m['threshold']}"
        )
        rows.append(
            "<tr>"
            + "".join(
                f"<td>{html.escape(str(v))}</td>"
                for v in (
                    m["name"],
                    m.get("value"),
                    m.get("unit", ""),
                    threshold,
                    m.get("threshold_source", ""),
                )
            )
            + "</tr>"
        )
    if not rows:
        return ""
    head = "".join(f"<th>{h}</th>" for h in ("measured", "value", "unit", "threshold", "from"))
    return f"<table><tr>{head}</tr>{''.join(rows)}</table>"


def html_extras(report: pytest.TestReport, record: dict[str, Any]) -> None:
    """Attach measured-vs-threshold and the commands run to the test's row."""
    if html_extra is None:
        return
    parts = [_measurement_rows(record)]
    commands = record.get("commands", [])
    if commands:
        lines = [
            f"{c['node']}: exit {c['exit_status']} in {c['duration_s']}s, output "
            f"outputs/{c['output_digest']}.txt"
            for c in commands[:10]
        ]
        parts.append("<pre>" + html.escape("\n".join(lines)) + "</pre>")
    if record.get("suspect_nodes"):
        parts.append(f"<p>suspect: {html.escape(', '.join(record['suspect_nodes']))}</p>")
    content = "".join(p for p in parts if p)
    if content:
        report.extras = [*getattr(report, "extras", []), html_extra.html(f"<div>{content}</div>")]
