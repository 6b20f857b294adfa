"""hpcnet lab emulation of `dcgmi diag -r LEVEL -j`: not DCGM, and no GPU.

Prints the DCGM 4.x JSON shape recorded from a real `dcgmi diag -r 1 -j` (samples/dcgm,
GB10): `"DCGM Diagnostic"` > `test_categories` > `tests` > `results[]` per GPU entity, each
test's `test_summary`, `entity_groups` and `metadata`, tab-indented with jsoncpp's
` : ` separators, for the node's emulated GPUs. The tests of each level are DCGM 4's names
(1: software; 2: + pcie, memory; 3: + diagnostic, targeted_stress, targeted_power,
memory_bandwidth; 4: + memtest, pulse_test). Fault `dcgm-fail` (GPU, default 3): that GPU
fails the level's last hardware test, and dcgmi exits 226 as the recorded failure did.
`--version` prints `dcgmi  version: 4.2.3` as the real one prints its version.
"""

from __future__ import annotations

import json
import sys

import hpcnet_lab_gpu as gpu

VERSION = "4.2.3"
LEVELS = {
    1: [("Deployment", "software")],
    2: [("Integration", "pcie"), ("Hardware", "memory")],
    3: [
        ("Hardware", "diagnostic"),
        ("Stress", "targeted_stress"),
        ("Stress", "targeted_power"),
        ("Stress", "memory_bandwidth"),
    ],
    4: [("Hardware", "memtest"), ("Stress", "pulse_test")],
}


def diag(level: int) -> int:
    rows = gpu.gpus()
    bad = gpu._fault_gpu(gpu.node.faults(), "dcgm-fail")
    tests = [t for lv in range(1, level + 1) for t in LEVELS[lv]]
    failing = next((n for c, n in reversed(tests) if c in ("Hardware", "Stress")), tests[-1][1])
    categories: dict[str, list] = {}
    failed = False
    for category, name in tests:
        results = []
        for row in rows:
            slot = gpu.BUS_IDS.index(row["pci.bus_id"][9:11])
            result = {
                "entity_group": "GPU",
                "entity_group_id": 1,
                "entity_id": int(row["index"]),
                "status": "Pass",
            }
            if slot == bad and name == failing:
                failed = True
                result["status"] = "Fail"
                result["warnings"] = [
                    {
                        "error_category": 4,
                        "error_id": 83,
                        "error_severity": 2,
                        "warning": f"GPU {row['index']} failed the {name} test "
                        "(hpcnet lab emulation of a DCGM failure)",
                    }
                ]
            results.append(result)
        status = "Fail" if any(r["status"] == "Fail" for r in results) else "Pass"
        categories.setdefault(category, []).append(
            {"name": name, "results": results, "test_summary": {"status": status}}
        )
    doc = {
        "DCGM Diagnostic": {
            "test_categories": [{"category": c, "tests": t} for c, t in categories.items()]
        },
        "entity_groups": [
            {
                "entities": [
                    {"device_id": "2335", "entity_id": int(r["index"]), "serial_num": r["serial"]}
                    for r in rows
                ],
                "entity_group": "GPU",
                "entity_group_id": 1,
            }
        ],
        "metadata": {
            "Driver Version Detected": rows[0]["driver_version"] if rows else "",
            "version": VERSION,
        },
    }
    sys.stdout.write(json.dumps(doc, indent="\t", separators=(",", " : ")) + "\n")
    return 226 if failed else 0


def main(argv: list[str]) -> int:
    if argv == ["--version"]:  # as published: a blank line, `dcgmi  version: X`, a blank line
        sys.stdout.write(f"\ndcgmi  version: {VERSION}\n\n")
        return 0
    if argv[:1] == ["diag"] and "-j" in argv and "-r" in argv:
        value = argv[argv.index("-r") + 1] if argv.index("-r") + 1 < len(argv) else ""
        if value.isdigit() and int(value) in LEVELS:
            return diag(int(value))
    sys.stdout.write(__doc__.splitlines()[0] + "\nUsage: dcgmi diag -r 1|2|3|4 -j\n")
    return 0 if argv in ([], ["-h"], ["--help"]) else 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
