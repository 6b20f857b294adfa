"""Every parser never raises, and what it cannot read is never a pass (issue 23, finding 9).

For every sample in tests/fixtures/ and the parser(s) that read it: every prefix at a line
boundary (sampled on long files), a bounded number of byte cuts, and a bounded number of
numeric cells replaced by `nan`, `inf`, `-1` and `1e300` (`NaN`/`Infinity` in JSON). None
raises. A result that holds a non-finite number is never a pass (the parser's own `ok`, or
no error/problem/incomplete flag); a pass after a cell became `nan`/`inf` holds no number
the whole sample's result lacks (the cell was not read, never turned into a figure); a pass
after a cut of a framed format (perftest table, nccl, nccl/fio JSON, ping) holds exactly the
whole sample's numbers (the cut took only what follows the measurement). `-1` and `1e300`
may be read as the numbers they are; whether they pass is the judges' business. Every parser
also reads every other sample whole without raising. Deterministic; about 5 s on 2 cores.
"""

from __future__ import annotations

import dataclasses
import importlib
import math
import pkgutil
import re
from collections import Counter
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest

import pytest_hpcnet.probes as probes
from pytest_hpcnet.inventory.expectations import Expectations
from pytest_hpcnet.probes import (
    burnin,
    counters,
    erdma,
    erdma_gdr,
    fio,
    firmware,
    gpu,
    gpu_dcgm,
    gpu_fabric,
    gpu_host,
    gpu_load,
    gpu_nccl_node,
    gpu_nvlink,
    gpu_p2p,
    gpu_p2p_torch,
    gpu_rdma,
    gpu_topo,
    gpu_xid,
    host_hardware,
    host_settings,
    links,
    metadata,
    nccl,
    nccl_debug,
    nccl_json,
    pcie_aer,
    perftest_parsers,
    ping,
    ports,
    rdma,
    rdma_parsers,
    sysctl,
    timesync,
    versions,
)
from pytest_hpcnet.requirements import gpu as gpu_judges

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"

PARSERS: dict[str, Callable[[str], Any]] = {
    "bandwidth": perftest_parsers.parse_bandwidth,
    "latency": perftest_parsers.parse_latency,
    "nccl": nccl.parse_nccl,
    "nccl_json": nccl_json.parse_nccl_json,
    "nccl_debug": nccl_debug.parse_nccl_debug,
    "fio": fio.parse_fio_json,
    "mount": fio.parse_mount,
    "rdma_output": rdma_parsers.parse_rdma_output,
    "ibv_devinfo": rdma_parsers.parse_ibv_devinfo,
    "ibstat": rdma_parsers.parse_ibstat,
    "rdma_link": rdma_parsers.parse_rdma_link,
    "erdma_module": rdma.parse_erdma_module,
    "compat_mode": rdma.parse_compat_mode,
    "erdma_identity": erdma.parse_erdma_identity,
    "gid_tables": erdma.parse_gid_tables,
    "erdma_driver": erdma.parse_erdma_driver,
    "gdr": erdma_gdr.parse_gdr,
    "interfaces": links.parse_interfaces,
    "ip_json": links.parse_ip_json,
    "ip_text": links.parse_ip_text,
    "ping": ping.parse_ping,
    "connect": ports.parse_connect,
    "listener": ports.parse_listener,
    "metadata": metadata.parse_metadata,
    "listing": metadata.parse_listing,
    "query_gpu": gpu.parse_query_gpu,
    "driver_version": gpu_host.parse_driver_version,
    "modules": gpu_host.parse_modules,
    "memlock": gpu_host.parse_memlock,
    "topo": gpu_topo.parse_topo,
    "kernel_log": gpu_xid.parse_kernel_log,
    "rdma_sysfs": gpu_rdma.parse_rdma_sysfs,
    "cuda_version": gpu_rdma.parse_cuda_version,
    "sysctl": sysctl.parse_sysctl,
    "rdma_counters": counters.parse_rdma_counters,
    "versions": versions.parse_versions,
    "gpu_engines": gpu_load.parse_engines,
    "gpu_load": gpu_load.parse_load,
    "gpu_samples": gpu_load.parse_samples,
    "burnin_samples": burnin.parse_lines,
    "burnin_collect": burnin.parse_collect,
    "nvlink_status": gpu_nvlink.parse_nvlink_status,
    "nvlink_errors": gpu_nvlink.parse_nvlink_errors,
    "dcgm": gpu_dcgm.parse_dcgm_json,
    "nvbandwidth": gpu_p2p.parse_nvbandwidth,
    "fabric": gpu_fabric.parse_fabric,
    "torch_p2p": gpu_p2p_torch.parse_torch_p2p,
    "nccl_node": partial(gpu_nccl_node.parse_node_nccl, gpus=8, e="10G"),
    "smi_firmware": firmware.parse_smi_firmware,
    "nic_info": firmware.parse_nic_info,
    "ethtool_info": partial(firmware.parse_ethtool_info, "eth0"),
    "bios": firmware.parse_bios,
    "host_hardware": host_hardware.parse_host_hardware,
    "pcie_devices": pcie_aer.parse_pcie_devices,
    "host_settings": host_settings.parse_host_settings,
    "timesync": timesync.parse_timesync,
}

# Which parsers read which samples (glob under tests/fixtures/, parser names).
CORPUS: list[tuple[str, tuple[str, ...]]] = [
    ("perftest/bw-*", ("bandwidth",)),
    ("perftest/real-*-bw-*", ("bandwidth",)),
    ("samples/ib_write_bw/*", ("bandwidth",)),
    ("perftest/lat-*", ("latency",)),
    ("perftest/real-*-lat-*", ("latency",)),
    ("samples/ib_write_lat/*", ("latency",)),
    ("nccl/*.txt", ("nccl",)),
    ("samples/nccl_allreduce/*.txt", ("nccl",)),
    ("nccl_corpus/*.txt", ("nccl",)),
    ("nccl_collectives/*.txt", ("nccl",)),
    ("samples/nccl_allreduce/*.json", ("nccl_json",)),
    ("nccl_debug/*.txt", ("nccl_debug",)),
    ("fio/fio*", ("fio",)),
    ("fio/real-*.json", ("fio",)),
    ("samples/fio_json/*", ("fio",)),
    ("fio/findmnt-*", ("mount",)),
    ("fio/proc-mounts-*", ("mount",)),
    ("gpu/query-*", ("query_gpu",)),
    ("gpu/smi-*", ("query_gpu",)),
    ("samples/nvidia_smi/smi-query*.csv", ("query_gpu",)),
    ("gpu/kernel-log-*", ("kernel_log",)),
    ("gpu/lsmod-*", ("modules",)),
    ("gpu/proc-modules-*", ("modules",)),
    ("gpu/nv-version-*", ("driver_version",)),
    ("samples/nvidia_smi/nv-version.txt", ("driver_version",)),
    ("gpu/topo-*", ("topo",)),
    ("samples/nvidia_smi/smi-topo.txt", ("topo",)),
    ("erdma/*lspci*", ("gdr",)),
    ("erdma/derived-two-eni-ibv_devinfo-v.txt", ("rdma_output", "gid_tables")),
    ("erdma/derived-two-eni-identity.txt", ("erdma_identity",)),
    ("erdma/derived-two-eni-ip-j-addr.json", ("interfaces",)),
    ("erdma/derived-two-eni-rdma-link.txt", ("rdma_output", "rdma_link")),
    ("links/*", ("interfaces",)),
    ("samples/ip_link_ping/ip-*", ("interfaces",)),
    ("ping/*.txt", ("ping",)),
    ("samples/ip_link_ping/ping-*", ("ping",)),
    ("metadata/*", ("metadata",)),
    ("samples/metadata/*", ("listing",)),
    ("ports/connect-*", ("connect",)),
    ("ports/listener-*", ("listener",)),
    ("rdma/*-v.txt", ("rdma_output", "gid_tables")),
    ("rdma/real-*", ("rdma_output",)),
    ("rdma/erdma-*", ("rdma_output",)),
    ("rdma/ibstat-*", ("rdma_output",)),
    ("rdma/ibv_devinfo-*", ("rdma_output",)),
    ("rdma/published-heioy-mlx4_1-i2.txt", ("rdma_output",)),
    ("rdma/rdma-link-*", ("rdma_output", "rdma_link")),
    ("rdma/lsmod-*", ("erdma_module",)),
    ("samples/ibv_devinfo/*", ("rdma_output",)),
    ("samples/rdma_link/*", ("rdma_output", "rdma_link")),
    ("sysctl/*", ("sysctl",)),
    ("gpu_load/engines-*", ("gpu_engines",)),
    ("gpu_load/load-*", ("gpu_load",)),
    ("gpu_load/samples-*", ("gpu_samples",)),
    ("burnin/samples-*", ("burnin_samples", "burnin_collect")),
    ("gpu_load/nvidia-smi-nvlink-s-*", ("nvlink_status",)),
    ("gpu_load/nvidia-smi-nvlink-status-*", ("nvlink_status",)),
    ("gpu_load/nvidia-smi-nvlink-e-*", ("nvlink_errors",)),
    ("gpu_load/dcgm-*", ("dcgm",)),
    ("gpu_load/nvvs-*", ("dcgm",)),
    ("gpu_load/nccl-tests-*", ("nccl", "nccl_node")),
    ("gpu_load/nvbandwidth-*", ("nvbandwidth",)),
    ("gpu_load/nvidia-smi-q-*", ("fabric",)),
    ("gpu_load/derived-nvidia-smi-q-*", ("fabric",)),
    ("gpu_load/p2p-torch-*", ("torch_p2p",)),
    ("gpu_load/derived-p2p-torch-*", ("torch_p2p",)),
    ("firmware/nvidia-smi-q-*", ("smi_firmware", "fabric")),
    ("firmware/ethtool-i-*", ("ethtool_info",)),
    ("firmware/dmidecode-*", ("bios",)),
    ("host/real-lscpu-*", ("host_hardware",)),
    ("host/real-aer_dev_*", ("pcie_devices",)),  # the sysfs files, not the section's lines
    ("host/real-chronyc-*", ("timesync",)),
    ("host/real-timedatectl-*", ("timesync",)),
]

LINE_PREFIXES = 24
BYTE_CUTS = 6
MUTATED_CELLS = 10
TEXT_VALUES = ("nan", "inf", "-1", "1e300")
JSON_VALUES = ("NaN", "Infinity", "-1", "1e300")
NON_ASCII = "full-width digits"
NON_FINITE = {"nan", "inf", "NaN", "Infinity", NON_ASCII}
FULL_WIDTH = str.maketrans("0123456789", "０１２３４５６７８９")
_NUMBER = re.compile(r"(?<![\w.])[-+]?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?(?![\w])")


def _samples() -> list[Path]:
    skip = {"cloud", "inventory_sources", "slurm", "iperf3"}  # not probe outputs
    return sorted(
        p
        for p in FIXTURES.rglob("*")
        if p.is_file() and p.suffix != ".md" and not skip & set(p.relative_to(FIXTURES).parts)
    )


def _cases() -> list[tuple[str, str]]:
    cases: dict[tuple[str, str], None] = {}
    for pattern, names in CORPUS:
        for path in sorted(FIXTURES.glob(pattern)):
            for name in names:
                cases[(name, path.relative_to(FIXTURES).as_posix())] = None
    return list(cases)


def _spread(items: list, count: int) -> list:
    """`count` items spread evenly over `items` (all of them when there are fewer)."""
    if len(items) <= count:
        return items
    return [items[i * (len(items) - 1) // (count - 1)] for i in range(count)]


def cuts(text: str) -> Iterator[str]:
    """Proper prefixes: at line boundaries (sampled), then a few byte cuts inside lines."""
    ends = [m.end() for m in re.finditer(r"\n", text) if m.end() < len(text)]
    for end in _spread([0, *ends], LINE_PREFIXES):
        yield text[:end]
    for i in range(1, BYTE_CUTS + 1):
        yield text[: len(text) * i // (BYTE_CUTS + 1)]


def mutations(text: str, json_file: bool) -> Iterator[tuple[str, str]]:
    """(value, text) with one numeric cell replaced, over a bounded spread of cells."""
    values = JSON_VALUES if json_file else TEXT_VALUES
    for m in _spread(list(_NUMBER.finditer(text)), MUTATED_CELLS):
        for value in values:
            yield value, text[: m.start()] + value + text[m.end() :]
        wide = m.group().translate(FULL_WIDTH)  # Python's int() and float() read these
        yield NON_ASCII, text[: m.start()] + wide + text[m.end() :]


COUNTS = {"info_lines", "wrong_cells"}
"""Fields that count lines or cells of text rather than hold a measured number."""


def _walk(value: Any) -> Iterator[Any]:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        for f in dataclasses.fields(value):
            if f.name not in COUNTS:
                yield from _walk(getattr(value, f.name))
    elif isinstance(value, dict):
        for v in value.values():
            yield from _walk(v)
    elif isinstance(value, (tuple, list, set, frozenset)):
        for v in value:
            yield from _walk(v)
    else:
        yield value


def numbers(result: Any) -> list[float]:
    """Every number a result holds (its measurement as data), sorted."""
    found = [v for v in _walk(result) if isinstance(v, (int, float)) and not isinstance(v, bool)]
    return sorted(float(v) for v in found if not (isinstance(v, float) and math.isnan(v)))


def non_finite(result: Any) -> bool:
    return any(isinstance(v, float) and not math.isfinite(v) for v in _walk(result))


_FLAGS = ("error", "problems", "incomplete", "unreadable", "missing", "lost", "tool_missing")


def passes(result: Any) -> bool:
    """The parser's own word that its result is a whole, usable measurement."""
    if hasattr(result, "ok"):
        return bool(result.ok)
    if any(getattr(result, flag, None) for flag in _FLAGS):
        return False
    return getattr(result, "state", "ok") == "ok"


def _new_numbers(result: Any, whole: Any) -> list[float]:
    """The numbers of `result` that the whole sample's result does not hold (multiset)."""
    left = Counter(numbers(whole))
    left.subtract(numbers(result))
    return sorted(v for v, n in left.items() if n < 0)


def _check(name: str, what: str, text: str, whole: Any = None, same: bool = False) -> list[str]:
    """Problems with one parse of `text`. Given the whole sample's result (`whole`), a pass
    holds exactly its numbers (`same`), or at least no number it does not hold."""
    try:
        result = PARSERS[name](text)
    except Exception as exc:  # the property under test
        return [f"{what}: raised {exc!r}"]
    if not passes(result):
        return []
    if non_finite(result):
        return [f"{what}: a pass holding a non-finite number: {result!r:.300}"]
    if whole is None:
        return []
    if same and numbers(result) != numbers(whole):
        return [f"{what}: a pass with other numbers than the whole sample: {result!r:.300}"]
    if new := _new_numbers(result, whole):
        return [f"{what}: a pass with numbers the sample lacks {new[:3]}: {result!r:.300}"]
    return []


# Parsers whose output format has no end: a cut between two complete records (devices,
# GPUs, interfaces, mounts, modules, settings) is a shorter listing, not a broken one.
# Their cut prefixes are checked for raising only; the framed formats (perftest, nccl,
# fio JSON, ping) must flag a cut that loses a measurement.
UNFRAMED = {
    "rdma_output",
    "rdma_link",
    "gid_tables",
    "erdma_module",
    "query_gpu",
    "kernel_log",
    "modules",
    "driver_version",
    "topo",
    "gdr",
    "erdma_identity",
    "gpu_samples",
    "burnin_samples",
    "burnin_collect",
    "gpu_engines",
    "nvlink_status",
    "nvlink_errors",
    "interfaces",
    "metadata",
    "listing",
    "connect",
    "listener",
    "mount",
    "sysctl",
    "nccl_debug",
    "host_hardware",
}


BARE_NUMBERS = {
    "perftest/bw-bare-output-bandwidth.txt",
    "samples/ib_write_lat/output-latency-only-physical-qingcloud.txt",
    "samples/ib_write_lat/output-latency-only-vm-qingcloud.txt",
}
"""perftest `--output=bandwidth|latency`: one bare number, nothing to tell a cut one by."""
TWO_RUNS = {
    "nccl/real-issue290-h100x8-twice-no-mpi.txt",
    "gpu_load/nvbandwidth-v0.10.0-b300-sxm6-x7-ce-suite-d2d-765-774GBs-bidir-total-dell-xe9780.txt",
    "gpu_load/nvbandwidth-derived-v0.8-2gpu-suite-waived-lines-latency-local-copy.txt",
}
"""Two whole runs one after the other (the NCCL suite's fixture; nvbandwidth's default run,
one test after another): cut between them, the first is a whole run of its own (the P2P judge
asks for its one test by name, and a test cut inside is flagged)."""


@pytest.mark.parametrize(("name", "sample"), _cases())
def test_prefixes_and_mutated_cells_never_raise_nor_pass(name, sample):
    text = (FIXTURES / sample).read_text(errors="replace")
    whole = PARSERS[name](text)
    bad: list[str] = []
    for cut in cuts(text):
        framed = name not in UNFRAMED and sample not in BARE_NUMBERS | TWO_RUNS
        framed = framed and bool(text[len(cut) :].strip())
        bad += _check(
            name, f"cut at {len(cut)} of {len(text)}", cut, whole if framed else None, True
        )
    for value, mutated in mutations(text, sample.endswith(".json")):
        # nan/inf must never become a number; -1 and 1e300 may be read as the numbers they are
        bad += _check(name, f"a cell -> {value}", mutated, whole if value in NON_FINITE else None)
    assert not bad, f"{name} on {sample}: {len(bad)} case(s), e.g.\n" + "\n".join(bad[:5])


@pytest.mark.parametrize("name", sorted(PARSERS))
def test_every_sample_read_whole_by_every_parser_never_raises(name):
    raised = []
    for path in _samples():
        try:
            PARSERS[name](path.read_text(errors="replace"))
        except Exception as exc:
            raised.append(f"{path.relative_to(FIXTURES)}: {exc!r}")
    assert not raised, "\n".join(raised[:5])


WHOLE_ONLY = {
    f"samples/nvidia_smi/{name}"
    for name in (
        "help-query-gpu.txt",
        "query-gpu-all-fields.tsv",
        "smi-L.txt",
        "smi-q-health.txt",
        "smi-q.txt",
        "smi-q.xml",
        "smi.txt",
    )
} | {
    f"repair/{name}"  # the repair loop's and the ticket's commands (their lab emulation's tests)
    for name in (
        "compute-apps.csv",
        "nvidia-bug-report-stdout.txt",
        "nvidia-smi-r-in-use.txt",
        "nvidia-smi-r-reset.txt",
    )
}
"""Outputs of commands no probe runs: only read whole, by every parser."""


def test_every_parser_and_sample_is_covered():
    """A new `parse_*` in probes/ or a new sample joins the property test."""
    covered = {sample for _, sample in _cases()} | WHOLE_ONLY
    samples = {p.relative_to(FIXTURES).as_posix() for p in _samples()}
    assert samples <= covered, sorted(samples - covered)
    listed = {getattr(p, "func", p) for p in PARSERS.values()}
    unlisted = [
        f"{info.name}.{fn}"
        for info in pkgutil.iter_modules(probes.__path__)
        for fn, obj in vars(importlib.import_module(f"{probes.__name__}.{info.name}")).items()
        if fn.startswith("parse_")
        and callable(obj)
        and obj.__module__.endswith(info.name)
        and obj not in listed
    ]
    assert not unlisted, unlisted


GPU_EXPECT = Expectations.model_validate(
    {"gpu": {"count": 8, "model": "NVIDIA H200", "persistence": True, "mig": False}}
)
"""A lab-like H200 node: what `query-8gpu-h200.csv` passes."""
GPU_JUDGES = {
    "count_model": lambda q: gpu_judges.judge_count_model("n1", q, GPU_EXPECT),
    "ecc": lambda q: gpu_judges.judge_ecc("n1", q),
    "throttle": lambda q: gpu_judges.judge_throttle("n1", q),
    "pcie": lambda q: gpu_judges.judge_pcie("n1", q),
    "persistence": lambda q: gpu_judges.judge_persistence("n1", q, GPU_EXPECT),
    "mig": lambda q: gpu_judges.judge_mig("n1", q, GPU_EXPECT),
}
JUDGED_GPU_CELLS = (
    "pcie.link.gen.current",
    "pcie.link.gen.max",
    "pcie.link.width.current",
    "pcie.link.width.max",
    "persistence_mode",
    "clocks_event_reasons.active",
    "ecc.mode.current",
    "ecc.errors.uncorrected.volatile.total",
)
"""The cells of `nvidia-smi --query-gpu` a GPU judge reads (`mig.mode.current` left out: an
unreadable MIG mode is a GPU without MIG, by design of `judge_mig`)."""


@pytest.mark.parametrize("cell", JUDGED_GPU_CELLS)
def test_a_judged_gpu_cell_read_as_nonsense_is_never_a_pass(cell):
    """No parser flag here: the GPU judges decide, and one of them fails the node."""
    text = (FIXTURES / "gpu" / "query-8gpu-h200.csv").read_text()
    header, row, *rest = text.splitlines(keepends=True)
    assert all(judge(gpu.parse_query_gpu(text)) for judge in GPU_JUDGES.values())
    column = [name.strip() for name in header.split(",")].index(cell)
    for value in (*TEXT_VALUES, "-nan"):
        cells = row.rstrip("\n").split(", ")
        cells[column] = value
        query = gpu.parse_query_gpu("".join([header, ", ".join(cells) + "\n", *rest]))
        failed = [name for name, judge in GPU_JUDGES.items() if not judge(query)]
        assert failed, f"{cell} = {value}: every GPU judge passes"
