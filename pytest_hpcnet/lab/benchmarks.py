"""The lab inventory's `benchmarks:` block and ACL flows, sized for a small (2-core) host.

perftest runs short duration-mode pairs; all_reduce_perf is launched by the real Open MPI
`mpirun` over the lab's own SSH key and known_hosts (one rank per node, its hostfile in the
lab state folder); fio runs buffered with psync on the nodes' tmpfs /mnt/cpfs, small
enough that 64 nodes x numjobs x size fits in memory comfortably.
"""

from __future__ import annotations

from pytest_hpcnet.lab.firewall import acl_denials
from pytest_hpcnet.lab.state import LabState

NCCL_ARGS = {"b": "1M", "e": "16M", "f": 2, "g": 1, "c": 1, "n": 3, "w": 1}


def plm_rsh_args(state: LabState) -> str:
    """ssh options Open MPI uses to start `orted` on the other nodes."""
    return (
        f"-i {state.client_key} -o UserKnownHostsFile={state.known_hosts} "
        "-o StrictHostKeyChecking=yes -o BatchMode=yes -o ConnectTimeout=5"
    )


def benchmarks(state: LabState) -> dict:
    """The inventory's `benchmarks:` block for this lab."""
    return {
        "perftest": {
            "schedule": "matchings",
            "rounds": 2,
            "port_base": 18515,
            "size": 65536,
            "qps": 2,
            "duration_s": 2,
            "latency_iterations": 1000,
            "timeout_s": 60,
        },
        "nccl": {
            "launcher": "mpirun",
            "binary": "all_reduce_perf",
            "gpus_per_node": 1,
            "args": dict(NCCL_ARGS),
            # NCCL_DEBUG, NCCL_IB_HCA (every ERI) and the GID index come from the campaign
            "env": {"NCCL_SOCKET_IFNAME": "eth0"},
            "plm_rsh_args": plm_rsh_args(state),
            "allow_run_as_root": True,
            "hostfile": str(state.root / "hostfile"),
            "timeout_s": 300,
            # opt-in here: the four emulated collectives take ~110 s on 4 nodes of a 2-core
            # host (pure-Python data over TCP); `run: [alltoall, ...]` selects them
            "collectives": {"run": []},
        },
        "fio": {
            "bs": "1m",
            "numjobs": 2,
            "size": "32m",
            "runtime_s": 3,
            "iodepth": 1,
            "ioengine": "psync",
            "direct": False,
            "timeout_s": 120,
        },
        # the emulated torch paces GEMMs like an H200: 10 s of load, big GEMMs, few wake-ups
        "gpu_load": {
            "seconds": 10,
            "size": 16384,
            "copy_mib": 1024,
            "nccl": {"b": "128M", "e": "8G", "n": 5, "w": 1},
        },
    }


def flows(state: LabState) -> dict:
    """`expect.flows` the baseline ACL makes true (empty below two nodes)."""
    if len(state.nodes) < 2:
        return {}
    first, second = state.nodes[0].name, state.nodes[1].name
    allow = [{"source": first, "target": second, "protocol": "tcp", "port": 22}]
    deny = [
        {"source": d.source, "target": d.target, "protocol": d.proto, "port": d.port}
        for d in acl_denials(state)
    ]
    return {"allow": allow, "deny": deny}
