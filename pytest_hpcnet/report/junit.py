"""The run's verdict in junit.xml: a CI job that reads JUnit sees INCOMPLETE and REJECTED."""

from __future__ import annotations

from pathlib import Path
from xml.etree import ElementTree

from pytest_hpcnet.report.records import RunSummary
from pytest_hpcnet.report.verdict import verdict_line


def junit_verdict(path: str | None, summary: RunSummary) -> None:
    """Put the run's verdict into junit.xml's testsuite `<properties>`, so a CI job that
    reads JUnit sees INCOMPLETE and REJECTED, not "0 failures"; a lab run's verdict reads
    `LAB ACCEPTED` beside `hpcnet_lab=true`, so no gate takes it for a cluster's."""
    if not path or not Path(path).is_file():
        return
    try:
        tree = ElementTree.parse(path)
    except ElementTree.ParseError:
        return
    root = tree.getroot()
    suites = [root] if root.tag == "testsuite" else list(root.iter("testsuite"))
    values = {
        "hpcnet_lab": "true" if summary.lab else "false",
        "hpcnet_verdict": f"LAB {summary.verdict}" if summary.lab else summary.verdict,
        "hpcnet_verdict_line": verdict_line(summary),
        "hpcnet_run_id": summary.run_id,
        **{f"hpcnet_checks_{k}": str(v) for k, v in summary.counts.items()},
    }
    for suite in suites:
        properties = suite.find("properties")
        if properties is None:
            properties = ElementTree.Element("properties")
            suite.insert(0, properties)
        for name, value in values.items():
            ElementTree.SubElement(properties, "property", name=name, value=value)
    tree.write(path, encoding="utf-8", xml_declaration=True)
