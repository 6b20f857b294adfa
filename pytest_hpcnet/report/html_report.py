"""pytest-html additions: the environment table and per-test extras (measured vs threshold).

Only used when pytest-html is installed; everything here is optional decoration of the
standard report, the evidence bundle stays the record of truth.
"""

from __future__ import annotations

import html
from typing import Any

import pytest

from pytest_hpcnet.inventory.models import Inventory
from pytest_hpcnet.report.verdict import LAB_EVIDENCE

try:
    from pytest_html import extras as html_extra
except ImportError:  # pragma: no cover - pytest-html is a dependency, but stay optional
    html_extra = None

try:
    from pytest_metadata.plugin import metadata_key
except ImportError:  # pragma: no cover
    metadata_key = None


def verdict_html(line: str) -> str:
    """The run's verdict line for the top of report.html (escaped); a lab run's
    (`LAB ...`) says, beside it, that its evidence is the lab's."""
    lab = f" · {html.escape(LAB_EVIDENCE)}" if line.startswith("LAB ") else ""
    return f'<p id="hpcnet-verdict">hpcnet verdict: <strong>{html.escape(line)}</strong>{lab}</p>'


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
    (its `pytest_configure` may run before ours; otherwise `pytest_metadata` adds them);
    and group the report's skips by reason (`SkipGroups`) when pytest-html is active."""
    if metadata_key is not None and metadata_key in config.stash:
        config.stash[metadata_key].update(environment_rows(inventory))
    if config.pluginmanager.hasplugin("html") and not config.pluginmanager.has_plugin(SKIP_GROUPS):
        config.pluginmanager.register(SkipGroups(), SKIP_GROUPS)


SKIP_GROUPS = "hpcnet-html-skip-groups"


def skip_reason(report: pytest.TestReport) -> str:
    """The reason a test was skipped, without pytest's `(file, line, "Skipped: ...")` wrapping."""
    longrepr = report.longrepr
    text = longrepr[2] if isinstance(longrepr, tuple) and len(longrepr) == 3 else str(longrepr)
    return str(text).removeprefix("Skipped: ").strip() or "no reason given"


def skips_html(groups: dict[str, list[str]]) -> str:
    """Skipped tests grouped by reason, most frequent first, as an escaped HTML block."""
    items = []
    for reason, tests in sorted(groups.items(), key=lambda item: (-len(item[1]), item[0])):
        names = "".join(f"<li>{html.escape(t)}</li>" for t in tests)
        items.append(
            f"<details><summary>{len(tests)} × {html.escape(reason)}</summary>"
            f"<ul>{names}</ul></details>"
        )
    total = sum(len(t) for t in groups.values())
    return f'<div class="hpcnet-skips"><h3>Skipped: {total}, by reason</h3>{"".join(items)}</div>'


class SkipGroups:
    """pytest-html hooks: a skipped row's log is its reason on one line (not pytest's raw
    tuple), and the skips are listed once, grouped by reason, below the result counts."""

    def __init__(self) -> None:
        self.groups: dict[str, list[str]] = {}

    @pytest.hookimpl(optionalhook=True)
    def pytest_html_results_table_html(self, report: pytest.TestReport, data: list) -> None:
        if not report.skipped or hasattr(report, "wasxfail"):
            return
        reason = skip_reason(report)
        self.groups.setdefault(reason, []).append(report.nodeid)
        data[:] = [html.escape(f"skipped: {reason}")]

    @pytest.hookimpl(optionalhook=True)
    def pytest_html_results_summary(self, prefix: list, summary: list, postfix: list) -> None:
        if self.groups:
            postfix.append(skips_html(self.groups))


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


def command_line(command: dict[str, Any]) -> str:
    """`node01: exit 0 in 0.4 s, output outputs/<digest>.txt`; what is unknown is left out
    (`no exit status`: the command was cut off or never ended)."""
    status = command.get("exit_status")
    said = f"exit {status}" if status is not None else "no exit status"
    took = f" in {command['duration_s']} s" if command.get("duration_s") is not None else ""
    digest = command.get("output_digest")
    output = f", output outputs/{digest}.txt" if digest else ""
    return f"{command['node']}: {said}{took}{output}"


def html_extras(report: pytest.TestReport, record: dict[str, Any]) -> None:
    """Attach measured-vs-threshold and the commands run to the test's row."""
    if html_extra is None:
        return
    parts = [_measurement_rows(record)]
    commands = record.get("commands", [])
    if commands:
        lines = [command_line(c) for c in commands[:10]]
        parts.append("<pre>" + html.escape("\n".join(lines)) + "</pre>")
    if record.get("suspect_nodes"):
        parts.append(f"<p>suspect: {html.escape(', '.join(record['suspect_nodes']))}</p>")
    content = "".join(p for p in parts if p)
    if content:
        report.extras = [*getattr(report, "extras", []), html_extra.html(f"<div>{content}</div>")]
