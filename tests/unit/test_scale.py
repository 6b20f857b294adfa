"""Large parametrizations stay cheap: 1,000 nodes collect in well under 10 s of CPU, no
connection. CPU time, not wall time: a loaded machine stretches the one, not the other."""

from __future__ import annotations

import resource
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
INVENTORY = """\
cluster: {name: big, region: cn-test}
nodes:
  - {name: "gpu-[0001-1000]", host: "{name}.cluster.invalid"}
"""


def test_collecting_1000_nodes_takes_under_10_cpu_seconds(tmp_path):
    inventory = tmp_path / "big.yaml"
    inventory.write_text(INVENTORY)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "--collect-only",
            "-q",
            "-p",
            "no:cacheprovider",
            "--inventory",
            str(inventory),
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=180,  # wall: a loaded machine stretches it; the bound below is CPU
    )
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    assert proc.returncode == 0, proc.stdout[-2000:]
    lines = proc.stdout.splitlines()
    mtu = "pytest_hpcnet/suites/test_mtu.py"
    assert f"{mtu}::test_interface_mtu_is_expected[gpu-1000]" in lines
    assert f"{mtu}::test_full_mtu_crosses_the_path[gpu-1000->gpu-0001]" in lines
    assert sum(1 for ln in lines if "::" in ln) > 17000
    print(f"collected 1,000 nodes in {cpu:.1f} s of CPU")
    assert cpu < 10
