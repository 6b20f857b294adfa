"""GPUDirect RDMA readiness (probes/erdma_gdr.py, judge_erdma_gdr): ACS on a bridge fails
naming it, ACS unreadable fails closed, the peer-memory module is reported."""

from __future__ import annotations

from pytest_hpcnet.inventory.expectations import Expectations
from pytest_hpcnet.probes.erdma_gdr import ACS_MARK, gdr_command, parse_gdr
from pytest_hpcnet.requirements.erdma import judge_erdma_gdr

EXPECT = Expectations(erdma={"gdr": True})


def output(fixture_text, name: str, modules: str = "nvidia_peermem 16384 0 - Live 0x0\n") -> str:
    return modules + ACS_MARK + "\n" + fixture_text("erdma", name)


def test_acs_on_fails_naming_the_bridges(fixture_text):
    state = parse_gdr(output(fixture_text, "real-lspci-amd-gpp-bridges-acs-on.txt"))
    assert state.peermem == "nvidia_peermem" and state.acs_on == ("00:01.1", "00:01.2")
    got = judge_erdma_gdr("node05", state, EXPECT)
    assert not got and got.reason.startswith("node05: PCIe ACS on (ACSCtl SrcValid+) at 00:01.1")


def test_acs_off_passes_and_says_the_peer_memory_path(fixture_text):
    text = output(fixture_text, "derived-lspci-amd-gpp-bridges-acs-off.txt", "hpcnet: none\n")
    got = judge_erdma_gdr("node05", parse_gdr(text), EXPECT)
    assert got and "ACS off on 2 bridges" in got.reason and "dma-buf" in got.reason


def test_acs_not_readable_fails_closed():
    denied = "nvidia_peermem 1 0\n" + ACS_MARK + "\n\tCapabilities: <access denied>\n"
    assert "not root" in judge_erdma_gdr("n1", parse_gdr(denied), EXPECT).reason
    missing = ACS_MARK + "\nhpcnet: lspci not installed\n"
    assert not judge_erdma_gdr("n1", parse_gdr(missing), EXPECT)
    assert not judge_erdma_gdr("n1", parse_gdr(""), EXPECT)  # cut before the marker


def test_command_reads_modules_and_acs_lines_only():
    cmd = gdr_command()
    assert "/proc/modules" in cmd and "ACSCtl:" in cmd and "lspci -vvv" in cmd
