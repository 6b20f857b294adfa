"""NCCL_DEBUG=INFO parser (probes/nccl_debug.py) on derived IB logs (see fixtures PROVENANCE)."""

from __future__ import annotations

from pytest_hpcnet.probes.nccl import parse_nccl
from pytest_hpcnet.probes.nccl_debug import IbDevice, parse_nccl_debug, split_nccl_log

AREA = "nccl_debug"


def test_ib_on_both_erdma_devices(fixture_text):
    log = parse_nccl_debug(fixture_text(AREA, "derived-h200-2node-ib-erdma.txt"))
    assert [h.host for h in log.hosts] == ["gpu-a", "gpu-b"]
    a = log.host("gpu-a")
    assert a.networks == ("IB",) and not a.on_socket and not a.ib_missing
    assert a.ib_devices == (IbDevice(0, "erdma_0", 1, "RoCE"), IbDevice(1, "erdma_1", 1, "RoCE"))
    assert a.gdr is False and "Disabled" in a.gdr_evidence
    assert a.nccl_version == "2.28.3+cuda13.0"
    assert log.socket_hosts == ()


def test_gdrdma_on_a_renamed_device(fixture_text):
    log = parse_nccl_debug(fixture_text(AREA, "derived-h200-2node-ib-gdrdma-rocep.txt"))
    b = log.host("gpu-b")
    assert b.ib_devices == (IbDevice(0, "rocep26s0", 1, "RoCE"),) and b.gdr is True


def test_socket_fallback_names_the_host(fixture_text):
    log = parse_nccl_debug(fixture_text(AREA, "derived-h200-2node-one-socket.txt"))
    assert log.socket_hosts == ("gpu-b",)
    b = log.host("gpu-b")
    assert b.ib_missing and b.socket_devices == ("eth0",) and b.ib_devices == ()
    assert b.gdr is None  # NET/Socket channels say nothing of GDR


def test_log_is_kept_apart_from_the_table(fixture_text):
    text = fixture_text(AREA, "derived-h200-2node-ib-erdma.txt")
    info, rest = split_nccl_log(text)
    assert "NCCL INFO" not in rest and all(" NCCL INFO " in ln for ln in info.splitlines())
    assert parse_nccl(rest).rows == parse_nccl(text).rows
    assert len(parse_nccl(rest).rows) == 1


def test_no_info_lines_is_a_problem_not_a_verdict():
    log = parse_nccl_debug("# nccl-tests version 2.19.6\n")
    assert log.hosts == () and log.problems == ("no NCCL INFO lines (NCCL_DEBUG=INFO not set?)",)


def test_mpirun_prefixes_and_ansi():
    text = (
        "[1,0]<stdout>:\x1b[0mh1:1:1 [0] NCCL INFO NET/IB : Using [0]erdma_0:1/RoCE [RO]; OOB e\n"
        "[1,1]<stdout>:h2:2:2 [0] NCCL INFO Using network Socket\n"
    )
    log = parse_nccl_debug(text)
    assert log.host("h1").ib_devices[0].name == "erdma_0" and log.socket_hosts == ("h2",)


def test_gdr_from_channel_lines_alone():
    on = "h:1:1 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] [send] via NET/IB/0/GDRDMA\n"
    off = "h:1:1 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] [send] via NET/IB/0\n"
    assert parse_nccl_debug(on).host("h").gdr is True
    assert parse_nccl_debug(off).host("h").gdr is False
    assert parse_nccl_debug(off + on).host("h").gdr is True  # one GDRDMA channel is proof
