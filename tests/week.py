"""A synthetic-but-realistic week of nightly runs (7 nights, 8 nodes), written through the
real `EvidenceBundle`: figures with noise (seeded), node05 regressing from night 5, node03
flapping (its MTU fails on night 3 only), node07's NIC errors rising on night 6, node02
rebooted before night 4 (its counters start again from a small total).

The shapes follow the suites' records (tests/unit/test_trends.py names them): ib_write_bw
`bw_avg` per pair, ib_write_lat `t_avg`/`t_p99` per pair, nccl_busbw per cluster, cpfs
`write_bw`/`read_bw` per node, tuning `errors`/`dropped` per node, mtu per node.
"""

from __future__ import annotations

import random
from datetime import datetime, timedelta, timezone
from functools import partial
from pathlib import Path

from pytest_hpcnet.report.evidence import EvidenceBundle

NODES = [f"node{i:02d}" for i in range(1, 9)]
FIRST_NIGHT = datetime(2026, 11, 23, 2, 0, 7, tzinfo=timezone.utc)
REGRESSING, FLAPPING, ERRORS, REBOOTED = "node05", "node03", "node07", "node02"


def _m(name, value, unit, threshold, comparison, source=""):
    return {
        "name": name,
        "value": value,
        "unit": unit,
        "threshold": threshold,
        "comparison": comparison,
        "threshold_source": source,
    }


def _add(
    bundle, at, check_id, requirement, subject, kind, measured, ok=True, message="", suspects=()
):
    bundle.append(
        {
            "check_id": check_id,
            "requirement": requirement,
            "subject": subject,
            "kind": kind,
            "measured": measured,
            "verdict": "pass" if ok else "fail",
            "message": message,
            "suspect_nodes": list(suspects),
            "started_at": at,
            "ended_at": at,
        }
    )


def write_week(
    reports: Path, nights: int = 7, cluster: str = "prod", first: datetime = FIRST_NIGHT
) -> list[Path]:
    """Write the runs; returns their folders, oldest first."""
    rng = random.Random(17)
    totals = {n: [rng.randint(0, 40), rng.randint(0, 400)] for n in NODES}  # errors, dropped
    runs = []
    for night in range(1, nights + 1):
        start = first + timedelta(days=night - 1, seconds=rng.randint(0, 300))
        run_id = f"{start:%Y%m%d-%H%M%S}-{night:04x}"
        bundle = EvidenceBundle(reports / run_id, run_id)
        bundle.started_at = start

        add = partial(_add, bundle, start.isoformat())
        slow = night >= 5
        for node in NODES:
            mtu = 1500 if (node == FLAPPING and night == 3) else 8500
            add(
                "mtu",
                "Jumbo MTU",
                node,
                "node",
                [_m("mtu", mtu, "bytes", 8500, "==", "expect.mtu")],
                ok=mtu == 8500,
                message=f"{node}: eth0 MTU {mtu}, expected 8500" if mtu != 8500 else "",
            )
            if node == REBOOTED and night == 4:
                totals[node] = [0, rng.randint(0, 5)]
            totals[node][0] += 150 if (node == ERRORS and night == 6) else 0
            totals[node][1] += rng.randint(0, 3)
            add(
                "tuning",
                "NIC tuning",
                node,
                "node",
                [
                    _m("errors", totals[node][0], "packets", 1000, "<=", "expect.nic_max_errors"),
                    _m(
                        "dropped", totals[node][1], "packets", 10000, "<=", "expect.nic_max_dropped"
                    ),
                ],
            )
            factor = 0.6 if (slow and node == REGRESSING) else 1.0
            for rw, base in (("write", 2100.0), ("read", 2600.0)):
                value = round(base * factor * rng.gauss(1, 0.02), 1)
                add(
                    "cpfs",
                    "CPFS throughput",
                    node,
                    "node",
                    [_m(f"{rw}_bw", value, "MB/s", 1000.0, ">=", "expect.cpfs.min_write_mbs")],
                )
        for i, a in enumerate(NODES):
            b = NODES[(i + 1) % len(NODES)]
            pair = f"{a}->{b}"
            hit = slow and REGRESSING in (a, b)
            bw = round(92.0 * (0.68 if hit else 1.0) * rng.gauss(1, 0.015), 2)
            add(
                "ib_write_bw",
                "RDMA write bandwidth",
                pair,
                "pair",
                [_m("bw_avg", bw, "Gbit/s", 80.0, ">=", "expect.ib_write_bw")],
                ok=bw >= 80.0,
                message=f"{pair}: {bw} Gbit/s < 80.0 Gbit/s" if bw < 80.0 else "",
                suspects=[REGRESSING] if bw < 80.0 else (),
            )
            lat = round(6.1 * (1.4 if hit else 1.0) * rng.gauss(1, 0.02), 2)
            add(
                "ib_write_lat",
                "RDMA write latency",
                pair,
                "pair",
                [
                    _m("t_avg", lat, "usec", 12.0, "<=", "expect.ib_write_lat"),
                    _m("t_p99", round(lat * 1.3, 2), "usec", 20.0, "<=", "expect.ib_write_lat"),
                ],
            )
        busbw = round(21.5 * (0.93 if slow else 1.0) * rng.gauss(1, 0.01), 2)
        add(
            "nccl_busbw",
            "NCCL bus bandwidth",
            "cluster",
            "cluster",
            [_m("avg_busbw", busbw, "GB/s", 15.0, ">=", "expect.nccl.min_avg_busbw_gbs")],
        )
        bundle.close({"cluster": cluster, "ended_at": start + timedelta(minutes=3)})
        runs.append(bundle.run_dir)
    return runs
