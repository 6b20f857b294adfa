"""The lab's inventory file: what `lab up` writes (and `set_eris` rewrites) for the suite to
run against, with strict host keys, the lab's SSH concurrency and its own cloud API."""

from __future__ import annotations

import os
from pathlib import Path

import yaml

from pytest_hpcnet.lab import benchmarks, control_plane, tuning
from pytest_hpcnet.lab.state import LabState

SESSIONS_PER_CPU = 8


def lab_concurrency(cpus: int | None = None) -> int:
    """Parallel SSH sessions for the lab: 8 per CPU (at least 16, at most the default 64).

    Every lab node's sshd and commands run on the controller's own cores, so sessions past
    that only queue for the CPU (64 nodes on 2 cores: 11.5 s at 16 against 15.9 s at 64).
    A real controller keeps the inventory default, 64: its nodes bring their own CPUs.
    """
    return max(SESSIONS_PER_CPU * 2, min(64, SESSIONS_PER_CPU * (cpus or os.cpu_count() or 1)))


def lab_cloud(state: LabState) -> dict:
    """The inventory's `cloud:` block, and `scope:` where the lab genuinely lacks the audit:
    the cloud SDK is not installed, or the control plane did not start."""
    missing = control_plane.missing_sdk()
    cloud = control_plane.inventory_cloud(state)
    if missing is None and cloud.get("enabled", True):
        return {"cloud": cloud}
    reason = (
        f"the cloud SDK is not installed ({missing}: pip install 'pytest-hpcnet[cloud]')"
        if missing
        else "the lab's control plane is not running"
    )
    return {"cloud": {"enabled": False}, "scope": {"exclude": ["cloud_audit"], "reason": reason}}


def lab_inventory(state: LabState) -> dict:
    """The inventory of the lab, usable as is with strict host-key checking."""
    return {
        "cluster": {
            "name": f"hpcnet-lab-{len(state.nodes)}",
            "region": state.region_id,
            "description": "hpcnet lab: network namespaces on one host (emulated eRDMA tools)",
            "contacts": [{"name": "Lab operator", "role": "platform engineer"}],
        },
        "ssh": {
            "user": "root",
            "port": 22,
            "identity_file": str(state.client_key),
            "known_hosts": str(state.known_hosts),
            "host_key_policy": "strict",
            "connect_timeout_s": 5,
            "command_timeout_s": 60,
            "concurrency": lab_concurrency(),
        },
        "nodes": [{"name": n.name, "host": n.address, "interface": "eth0"} for n in state.nodes],
        **lab_cloud(state),  # the lab's own ECS/VPC API (control_plane.py)
        "expect": {
            "profile": "lab",
            "erdma": {"eris": state.eris},
            "mtu": state.nodes[0].mtu if state.nodes else 8500,
            "sysctl": tuning.sysctl_expectations(state.sysctl),
            **({"flows": flows} if (flows := benchmarks.flows(state)) else {}),
        },
        "benchmarks": benchmarks.benchmarks(state),
    }


def write_inventory(state: LabState) -> Path:
    path = Path(state.inventory)
    path.parent.mkdir(parents=True, exist_ok=True)
    header = "# Written by `hpcnet lab up`; rewritten on every `lab up`.\n"
    path.write_text(header + yaml.safe_dump(lab_inventory(state), sort_keys=False))
    return path
