"""The evidence shown is the evidence judged: a facts check's excerpt is the sections it read."""

from __future__ import annotations

import hashlib

from pytest_hpcnet.campaigns.cluster import ReadFacts
from pytest_hpcnet.campaigns.facts import NodeFacts
from pytest_hpcnet.probes.sections import split_sections
from pytest_hpcnet.report.certificate.evidence import section_excerpt
from pytest_hpcnet.report.recording import Check
from pytest_hpcnet.transport.fanout import CommandResult

FACTS = (
    "@@hpcnet begin links\n2: eth0: <UP> mtu 1500\n@@hpcnet end links 0\n"
    "@@hpcnet begin gpu_klog\nNVRM: Xid (PCI:0000:19:00): 79, GPU has fallen off the bus\n"
    "@@hpcnet end gpu_klog 0\n"
    "@@hpcnet begin versions\nkernel 6.8\n" + "x\n" * 200 + "@@hpcnet end versions 0\n"
)


def stored(tmp_path, text: str) -> str:
    digest = hashlib.sha256(text.encode()).hexdigest()
    (tmp_path / "outputs").mkdir(exist_ok=True)
    (tmp_path / "outputs" / f"{digest}.txt").write_text(text)
    return digest


def test_the_excerpt_is_the_sections_the_judge_read_not_the_tail(tmp_path):
    digest = stored(tmp_path, FACTS)
    shown = section_excerpt(tmp_path, digest, ["links"])
    assert shown.startswith("[links] (exit 0)\n2: eth0: <UP> mtu 1500")
    assert "Xid" not in shown and "kernel 6.8" not in shown
    cut = stored(tmp_path, "@@hpcnet begin gpu_klog\n")
    assert section_excerpt(tmp_path, cut, ["gpu_klog"]) == "[gpu_klog] (cut short)\n"
    assert section_excerpt(tmp_path, digest, []) == ""


def test_a_check_reading_facts_names_each_section_it_read():
    result = CommandResult("n1", "facts", 0, FACTS, "", 0.1, 0.0)
    check = Check("mtu", "MTU", "n1", "node", "t::x[n1]", None)
    facts = ReadFacts(NodeFacts("n1", result, split_sections(FACTS)), check)
    assert "mtu 1500" in facts.text("links")
    facts.text("links")
    assert check.sections == ["links"]
    assert check.record("pass", "", None)["sections"] == ["links"]
