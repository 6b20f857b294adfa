"""GPU-to-GPU bandwidth: nvbandwidth's matrix read from published outputs, and the judge of
each pair against its link as `topo -m` reports it (tests/fixtures/gpu_load/, provenance)."""

from __future__ import annotations

from pathlib import Path

from pytest_hpcnet.inventory.expectations import Expectations
from pytest_hpcnet.probes.gpu import parse_query_gpu
from pytest_hpcnet.probes.gpu_p2p import READ_CE, pair_link, parse_nvbandwidth
from pytest_hpcnet.probes.gpu_topo import parse_topo
from pytest_hpcnet.requirements.gpu_p2p import NodeP2p, judge_gpu_p2p

FIXTURES = Path(__file__).parents[1] / "fixtures"
H100 = (
    FIXTURES / "gpu_load" / "nvbandwidth-v0.10.0-h100-x8-d2d-read-ce-395GBs-cov-no-device-list.txt"
).read_text()
A6000 = (
    FIXTURES
    / "gpu_load"
    / "nvbandwidth-v0.8-rtxa6000-x6-pcie-d2d-read-ce-na-diagonal-elided-header-issue50.txt"
).read_text()
TOPO = (FIXTURES / "gpu" / "topo-8gpu-2nic-erdma.txt").read_text()
QUERY = parse_query_gpu((FIXTURES / "gpu" / "query-8gpu-h200.csv").read_text())


def read(name: str):
    return parse_nvbandwidth((FIXTURES / "gpu_load" / name).read_text())


def test_the_h100_read_ce_matrix():
    run = parse_nvbandwidth(H100)
    assert (run.version, run.cuda_runtime, run.driver) == ("v0.10.0", "13.2 (13020)", "595.71.05")
    matrix = run.matrix(READ_CE)
    assert (matrix.rows, matrix.columns, matrix.source, matrix.arrow) == (8, 8, "GPU", "->")
    assert matrix.value(0, 0) is None
    assert matrix.value(3, 2) == 395.23
    assert matrix.value(7, 0) == 395.05
    assert not run.problems and run.error is None


def test_old_and_new_formats_waived_and_aborted_runs():
    readme = read("nvbandwidth-readme-8gpu-d2d-write-ce-276GBs-vendor-example.txt")
    write = readme.matrix("device_to_device_memcpy_write_ce")
    assert (write.arrow, write.value(0, 0), write.value(6, 0)) == ("<-", 0.0, 274.89)
    waived = read("nvbandwidth-v0.2-rtx2080ti-x2-d2d-write-ce-waived-issue13.txt")
    assert waived.waived == ("device_to_device_memcpy_write_ce",) and waived.error is None
    for name in (
        "nvbandwidth-v0.7-a100-sxm4-80gb-x8-d2d-read-ce-pattern-assert-issue34.txt",
        "nvbandwidth-v0.8-h100-x8-h2d-ce-ptx-toolchain-error-hostname-line-issue61.txt",
        "nvbandwidth-v0.4-l40s-x8-one-to-all-read-sm-aborted-issue19.txt",
    ):
        assert read(name).error.startswith("nvbandwidth aborted"), name
    suite = read(
        "nvbandwidth-v0.10.0-b300-sxm6-x7-ce-suite-d2d-765-774GBs-bidir-total-dell-xe9780.txt"
    )
    assert suite.matrix("host_to_device_memcpy_ce").rows == 1
    total = suite.matrix("device_to_device_bidirectional_memcpy_read_ce", "Total")
    assert total.columns == 7 and total.arrow == "<->"
    assert suite.matrix(READ_CE).columns == 7


def test_a_cut_or_nonsense_matrix_is_a_problem():
    lines = H100.splitlines()
    cut = parse_nvbandwidth("\n".join(lines[:14]))
    assert cut.problems and cut.matrix(READ_CE) is None
    odd = parse_nvbandwidth(H100.replace("395.23", "nan", 1))
    assert odd.problems and odd.matrix(READ_CE) is None


def test_topo_cells_class_the_pairs():
    assert [pair_link(c) for c in ("NV18", "NV4", "PIX", "SYS", " X ", "", None)] == [
        "NVLink",
        "NVLink",
        "PCIe",
        "PCIe",
        None,
        None,
        None,
    ]


def node(name: str, text: str = H100, topo: str = TOPO) -> NodeP2p:
    return NodeP2p(name, parse_nvbandwidth(text), parse_topo(topo), QUERY)


def slow_pair(text: str, row: int, column: int, value: str) -> str:
    """`text` with the cell (row, column) of its matrix replaced by `value`."""
    out = []
    for line in text.splitlines():
        words = line.split()
        if words and words[0] == str(row) and len(words) == 9:
            cells = line[:3], [line[3 + 10 * i : 13 + 10 * i] for i in range(8)]
            cells[1][column] = f"{value:>10}"
            line = cells[0] + "".join(cells[1])
        out.append(line)
    return "\n".join(out) + "\n"


def test_every_nvlink_pair_of_a_healthy_node_passes_peer_relative_only():
    n = node("n1")
    verdict = judge_gpu_p2p(n, {"n1": n}, Expectations())
    assert verdict.outcome == "pass", verdict.reason
    assert "56 GPU pairs (56 over NVLink)" in verdict.reason
    assert (
        "no SKU figure (expect.gpu_load.min_p2p_nvlink_gbs), peer-relative only" in verdict.reason
    )
    first = verdict.measurements[0]
    assert (first.name, first.subject, first.value, first.unit) == (
        "p2p_nvlink_gbs",
        "GPU 0 -> GPU 1",
        395.08,
        "GB/s",
    )


def test_one_slow_nvlink_pair_fails_naming_both_gpus():
    slow = node("n2", slow_pair(H100, 2, 5, "190.20"))
    peers = {"n1": node("n1"), "n2": slow}
    verdict = judge_gpu_p2p(slow, peers, Expectations())
    assert verdict.outcome == "fail"
    assert (
        "n2 GPU 2 (00000000:3A:00.0) -> GPU 5 (00000000:AB:00.0) over NVLink (NV18)"
        in verdict.reason
    )
    assert "190.2 GB/s below 0.90 x node NVLink median" in verdict.reason
    assert verdict.reason.count("->") == 1
    assert judge_gpu_p2p(peers["n1"], peers, Expectations()).outcome == "pass"


def test_the_sku_floor_of_nvlink_pairs():
    n = node("n1")
    floor = Expectations(gpu_load={"min_p2p_nvlink_gbs": 400})
    verdict = judge_gpu_p2p(n, {"n1": n}, floor)
    assert verdict.outcome == "fail"
    assert "below expect.gpu_load.min_p2p_nvlink_gbs (SKU)" in verdict.reason
    assert verdict.measurements[0].bound == 400


def pcie_topo(gpus: int) -> str:
    """A PCIe-only topology (DERIVED from the recorded 8-GPU one: GPU columns cut to `gpus`,
    NV18 replaced by PIX within a half and SYS across halves, as a two-switch board)."""
    lines = TOPO.splitlines()
    out = []
    for line in lines:
        cells = line.split("\t")
        name = cells[0].strip()
        if name.startswith("GPU") and name[3:].isdigit() and int(name[3:]) >= gpus:
            continue
        if name.startswith(("GPU", "NIC")) or "GPU0" in line:
            keep = cells[:1] + cells[1 + 0 : 1 + gpus] + cells[9:]
            if name.startswith("GPU"):
                i = int(name[3:])
                for j in range(gpus):
                    if keep[1 + j] == "NV18":
                        keep[1 + j] = "PIX" if (i < gpus // 2) == (j < gpus // 2) else "SYS"
            cells = keep
        out.append("\t".join(cells))
    return "\n".join(out) + "\n"


def test_pcie_pairs_against_pcie_figures():
    text = A6000.replace("\n...\n", "\nRunning device_to_device_memcpy_read_ce.\n")
    topo = pcie_topo(6)
    assert parse_topo(topo).link("GPU0", "GPU4") == "SYS"
    six = parse_query_gpu(
        "\n".join((FIXTURES / "gpu" / "query-8gpu-h200.csv").read_text().splitlines()[:7])
    )
    n = NodeP2p("n1", parse_nvbandwidth(text), parse_topo(topo), six)
    verdict = judge_gpu_p2p(n, {"n1": n}, Expectations(gpu_load={"min_p2p_pcie_gbs": 20}))
    assert verdict.outcome == "pass", verdict.reason
    assert "30 GPU pairs (30 over PCIe)" in verdict.reason
    assert {m.name for m in verdict.measurements} == {"p2p_pcie_gbs"}
    strict = judge_gpu_p2p(n, {"n1": n}, Expectations(gpu_load={"min_p2p_pcie_gbs": 25}))
    assert strict.outcome == "fail" and "GPU 0 (00000000:18:00.0) -> GPU 3" in strict.reason


def test_no_engine_waived_cut_and_unreadable_topo():
    missing = NodeP2p("n1", missing="no nvbandwidth on the node's PATH", fix="install it")
    assert judge_gpu_p2p(missing, {}, Expectations()).outcome == "not_measured"
    waived = NodeP2p("n1", parse_nvbandwidth("Waiving device_to_device_memcpy_read_ce.\n"))
    verdict = judge_gpu_p2p(waived, {}, Expectations())
    assert verdict.outcome == "fail" and "no peer access" in verdict.reason
    lines = H100.splitlines()
    summed = next(i for i, line in enumerate(lines) if line.startswith("SUM "))
    for cut in range(summed):  # what follows the SUM line (COV, NOTE) may be cut away
        n = node("n1", "\n".join(H100.splitlines()[:cut]))
        assert judge_gpu_p2p(n, {"n1": n}, Expectations()).outcome != "pass", cut
    bad_topo = NodeP2p("n1", parse_nvbandwidth(H100), parse_topo("garbage"), QUERY)
    assert judge_gpu_p2p(bad_topo, {}, Expectations()).outcome == "not_measured"


def test_a_gpu_expected_by_count_but_absent_from_the_matrix_fails():
    text = A6000.replace("\n...\n", "\nRunning device_to_device_memcpy_read_ce.\n")
    six = parse_query_gpu(
        "\n".join((FIXTURES / "gpu" / "query-8gpu-h200.csv").read_text().splitlines()[:7])
    )
    n = NodeP2p("n1", parse_nvbandwidth(text), parse_topo(pcie_topo(6)), six)
    verdict = judge_gpu_p2p(n, {"n1": n}, Expectations(gpu={"count": 7}))
    assert verdict.outcome == "fail" and "n1 GPU 6: not in nvbandwidth's 6-GPU matrix" in (
        verdict.reason
    )


def test_a_complete_suite_with_waived_lines_latency_and_local_copy_is_read_whole():
    run = read("nvbandwidth-derived-v0.8-2gpu-suite-waived-lines-latency-local-copy.txt")
    assert run.error is None and run.problems == (), run.problems
    shapes = {m.testcase: (m.rows, m.columns) for m in run.matrices}
    assert shapes == {
        "host_to_device_memcpy_ce": (1, 2),
        "device_to_host_memcpy_ce": (1, 2),
        "device_to_device_memcpy_read_ce": (2, 2),
        "host_device_latency_sm": (1, 2),
        "device_local_copy": (1, 2),
    }
    assert run.matrix("host_device_latency_sm").unit == "ns"
    assert run.matrix(READ_CE).value(0, 1) == 24.10 and READ_CE not in run.waived


def test_a_cut_suite_is_still_cut():
    text = (
        FIXTURES
        / "gpu_load"
        / "nvbandwidth-derived-v0.8-2gpu-suite-waived-lines-latency-local-copy.txt"
    ).read_text()
    cut = text[: text.index(" 1     24.05")]
    assert parse_nvbandwidth(cut).problems
    no_sum = text[: text.index("SUM host_device_latency_sm")]
    assert any("host_device_latency_sm" in p for p in parse_nvbandwidth(no_sum).problems)


def test_a_bare_waived_line_after_running_waives_that_test():
    text = "nvbandwidth Version: v0.8\n\nRunning device_to_device_memcpy_read_ce.\nWaived: \n\n"
    run = parse_nvbandwidth(text)
    assert run.error is None and run.waived == (READ_CE,) and not run.problems


def test_non_ascii_or_exponent_cells_are_unreadable():
    for bad in ("２４.10", "1e300", "-1", "nan", "inf"):
        run = read("nvbandwidth-derived-v0.8-2gpu-suite-waived-lines-latency-local-copy.txt")
        text = (
            (
                FIXTURES
                / "gpu_load"
                / "nvbandwidth-derived-v0.8-2gpu-suite-waived-lines-latency-local-copy.txt"
            )
            .read_text()
            .replace("24.10", bad, 1)
        )
        run = parse_nvbandwidth(text)
        assert run.problems and run.matrix(READ_CE) is None, bad


def test_topo_with_an_empty_cpu_affinity_keeps_its_numa_columns():
    lines = TOPO.splitlines()
    row = lines[1].split("\t")
    row[-4] = ""  # CPU Affinity
    topo = parse_topo("\n".join([lines[0], "\t".join(row), *lines[2:]]))
    assert topo.error is None
    gpu0 = topo.row("GPU0")
    assert (gpu0.cpu_affinity, gpu0.numa_affinity, gpu0.gpu_numa_id) == (None, "0", "N/A")
    assert topo.row("GPU1").gpu_numa_id == "N/A"


def test_pairs_are_not_applicable_without_peer_access_or_a_second_gpu():
    from pytest_hpcnet.requirements.gpu_p2p import without_pairs

    assert not without_pairs(Expectations(gpu={"count": 8}, gpu_load={"p2p": True}))
    assert without_pairs(Expectations(gpu={"count": 1}, gpu_load={"p2p": True}))
    assert without_pairs(Expectations(gpu={"count": None}, gpu_load={"p2p": True}))
    assert without_pairs(Expectations(gpu={"count": 8}, gpu_load={"p2p": False}))
