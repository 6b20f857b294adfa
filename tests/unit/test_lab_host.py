"""How the lab fits its host: the backlog that keeps bridge floods from counting as drops, and
the SSH concurrency for nodes that share the controller's cores."""

from __future__ import annotations

from pytest_hpcnet.lab.cluster import lab_concurrency
from pytest_hpcnet.lab.state import LabState
from pytest_hpcnet.lab.tuning import BACKLOG_PER_NODE, raise_host_backlog, restore_host_backlog


def test_backlog_raised_for_a_large_lab_and_restored(tmp_path):
    knob = tmp_path / "netdev_max_backlog"
    knob.write_text("1000\n")
    previous = raise_host_backlog(128, knob)
    assert previous == 1000
    assert int(knob.read_text()) == 128 * BACKLOG_PER_NODE
    restore_host_backlog(previous, knob)
    assert knob.read_text() == "1000\n"


def test_backlog_never_lowered(tmp_path):
    knob = tmp_path / "netdev_max_backlog"
    knob.write_text("50000\n")
    assert raise_host_backlog(128, knob) is None
    restore_host_backlog(None, knob)
    assert knob.read_text() == "50000\n"


def test_previous_backlog_survives_the_state_file(tmp_path):
    state = LabState(state_dir=str(tmp_path), inventory="lab.yaml", host_backlog=1000)
    state.save()
    assert LabState.load(tmp_path).host_backlog == 1000


def test_lab_concurrency_follows_the_cores_within_bounds():
    assert lab_concurrency(1) == 16
    assert lab_concurrency(2) == 16
    assert lab_concurrency(4) == 32
    assert lab_concurrency(32) == 64
