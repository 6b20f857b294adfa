"""Single-node NCCL: `all_reduce_perf -g N` in one process over all of a node's GPUs (NVLink
or PCIe, no network), read by the nccl-tests parser (`probes/nccl.parse_nccl`). It tells a
fault inside a node from one in the eRDMA network."""

from __future__ import annotations

import shlex

from pytest_hpcnet.probes.nccl import NcclExpected, NcclResult, nccl_size, parse_nccl


def node_nccl_command(gpus: int, b: str, e: str, f: int, n: int, w: int) -> str:
    """all_reduce_perf over `gpus` GPUs of this node, validated (`-c 1`), stderr merged."""
    args = f"-b {shlex.quote(b)} -e {shlex.quote(e)} -f {int(f)} -g {int(gpus)} -c 1"
    return f"all_reduce_perf {args} -n {int(n)} -w {int(w)} 2>&1"


def parse_node_nccl(text: str, gpus: int, e: str) -> NcclResult:
    """The run, checked against what was launched: `gpus` ranks on one host, up to `e`."""
    expected = NcclExpected(max_bytes=nccl_size(e), ranks=gpus, nodes=1, validation=True)
    return parse_nccl(text, expected)


def nccl_code_version(code: int | None) -> str | None:
    """NCCL's version code as nccl-tests prints it (`nccl-headers=21903`) as `2.19.3`: major
    x 10000 + minor x 100 + patch from NCCL 2.9 on (NCCL_VERSION_CODE); None when absent."""
    if not code or code < 20900:
        return None
    return f"{code // 10000}.{code % 10000 // 100}.{code % 100}"
