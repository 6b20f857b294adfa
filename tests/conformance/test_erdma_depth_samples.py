"""eRDMA-depth parsers over the real corpus: the socket-fallback INFO log, the `-J` file,
the eRDMA `ibv_devinfo` block, and the NCCL INFO lines of every nccl_allreduce sample."""

from __future__ import annotations

import pytest

from pytest_hpcnet.probes.erdma import parse_gid_tables
from pytest_hpcnet.probes.nccl import NcclExpected, parse_nccl
from pytest_hpcnet.probes.nccl_debug import parse_nccl_debug, split_nccl_log
from pytest_hpcnet.probes.nccl_json import parse_nccl_json
from pytest_hpcnet.requirements.erdma_judges import judge_nccl_transport
from tests.corpus import corpus_files, sample

FALLBACK = sample("nccl_allreduce", "h200-nccl-tests-2.19.6-g1-debug-info-socket-fallback-c0.txt")
JSON = sample("nccl_allreduce", "h200-nccl-tests-2.19.6-g1-json.json")


def test_real_socket_fallback_is_flagged_naming_the_host():
    text = FALLBACK.read_text()
    log = parse_nccl_debug(text)
    vm = log.host("vm")
    assert [h.host for h in log.hosts] == ["vm"] and log.socket_hosts == ("vm",)
    assert vm.ib_missing and vm.ib_devices == () and vm.socket_devices == ("eth0",)
    assert vm.networks == ("Socket",) and vm.nccl_version == "2.28.3+cuda13.0"
    found = judge_nccl_transport(log, ["vm"])
    assert not found[0].ok
    assert found[0].reason == "vm: NCCL used Socket (NET/IB : No device found), IB expected"
    info, table = split_nccl_log(text)
    assert len(info.splitlines()) == log.info_lines == 93
    assert parse_nccl(table).rows == parse_nccl(text).rows


def test_real_json_matches_what_the_table_parser_gives_for_the_same_binary():
    r = parse_nccl_json(JSON.read_text(), NcclExpected(max_bytes=256 * 2**20, ranks=1))
    t = parse_nccl(FALLBACK.read_text(), NcclExpected(max_bytes=64 * 2**20, ranks=1))
    assert r.ok and t.ok
    assert [x.size_bytes for x in r.rows] == [2**20 * 2**i for i in range(9)]
    assert r.hosts == t.hosts == ("vm",) and r.ranks[0].gpu == t.ranks[0].gpu == "NVIDIA H200"
    assert r.nccl_version == t.nccl_version == 22803
    assert r.rows[6].size_bytes == t.rows[0].size_bytes == 67108864
    assert r.rows[6].oop_busbw_gbs == t.rows[0].oop_busbw_gbs == 0.0  # one rank
    assert (r.oob_failed, t.oob_failed) == (False, False)


def test_real_erdma_devinfo_block_has_no_gid_lines():
    path = sample("ibv_devinfo", "erdma-h20-stepmesh-pr32-erdma_0-block.txt")
    choice = parse_gid_tables(path.read_text()).choose("erdma_0")
    assert choice.index is None and "without -v" in choice.reason


# file -> {host: networks} from its NCCL INFO lines ({} where the run printed none)
INFO = {
    "h200-nccl-tests-2.19.6-g1-debug-info-socket-fallback-c0.txt": {"vm": ("Socket",)},
    "superbench-a100x8-single-node.txt": {"hostname": ()},  # one "Launch mode" line only
}


@pytest.mark.parametrize("path", corpus_files("nccl_allreduce", ".txt"), ids=lambda p: p.name)
def test_info_lines_of_every_sample(path):
    text = path.read_text(errors="replace")
    log = parse_nccl_debug(text)
    assert {h.host: h.networks for h in log.hosts} == INFO.get(path.name, {})
    assert bool(log.problems) == (path.name not in INFO)
    info, rest = split_nccl_log(text)
    assert log.info_lines == len(info.splitlines()) and " NCCL INFO " not in rest
