"""The lab's slurm.conf and process bookkeeping (no Slurm needed)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

from pytest_hpcnet.lab import slurm as lab_slurm
from pytest_hpcnet.lab.state import BRIDGE_ADDRESS, LabNode, LabState


def test_config_names_every_node_at_its_address_and_the_controller_on_the_bridge(tmp_path):
    state = LabState(
        state_dir=str(tmp_path),
        inventory="x",
        nodes=[LabNode("node01", "198.18.0.11", 8500), LabNode("node02", "198.18.0.12", 8500)],
    )
    text = lab_slurm.config_text(state, "ctl")
    assert f"SlurmctldHost=ctl({BRIDGE_ADDRESS})\n" in text  # the host's link-local bridge address
    assert "NodeName=node02 NodeAddr=198.18.0.12 CPUs=1 RealMemory=64 State=UNKNOWN\n" in text
    assert "ProctrackType=proctrack/linuxproc\n" in text and "TaskPlugin=task/none\n" in text
    assert f"AuthInfo=socket={tmp_path}/slurm/munge.socket\n" in text


def test_stop_kills_only_recorded_pids_still_running_their_program(tmp_path):
    folder = lab_slurm.slurm_dir(tmp_path)
    folder.mkdir()
    script = tmp_path / "fake_munged.py"
    script.write_text("import time\ntime.sleep(60)\n")
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    other = subprocess.Popen([sys.executable, str(script)])
    try:
        for _ in range(200):  # just after spawn the kernel may show an empty cmdline briefly
            if all(
                lab_slurm._runs(p.pid, "python3")
                or lab_slurm._runs(p.pid, Path(sys.executable).name)
                for p in (sleeper, other)
            ):
                break
            time.sleep(0.01)
        pids = {
            "slurmd-node01": {"pid": sleeper.pid, "program": "python3-not-this"},
            "munged": {"pid": other.pid, "program": "fake_munged.py"},
        }
        (folder / "pids.json").write_text(json.dumps(pids))
        assert lab_slurm.recorded(tmp_path) == {"slurmd-node01": sleeper.pid, "munged": other.pid}
        assert lab_slurm.stop(tmp_path) == ["munged"]
        assert other.wait(timeout=10) is not None
        assert sleeper.poll() is None  # its PID runs another program: not ours, not killed
        assert lab_slurm.stop(tmp_path) == [] and lab_slurm.recorded(tmp_path) == {}
    finally:
        sleeper.kill()
        other.kill()
        sleeper.wait()
        other.wait()


def test_missing_packages_give_one_line(monkeypatch):
    monkeypatch.setitem(lab_slurm.PROGRAMS, "slurmd", "/nonexistent/slurmd")
    reason = lab_slurm.missing()
    assert reason is not None and "\n" not in reason
    assert reason.startswith("lab Slurm needs slurmd (apt-get install slurmctld slurmd")


def test_lab_up_takes_slurm():
    from pytest_hpcnet import cli

    lab = cli._lab_parser("", Path("lab"))
    assert lab.parse_args(["up", "--slurm"]).slurm is True
    assert lab.parse_args(["up"]).slurm is False
