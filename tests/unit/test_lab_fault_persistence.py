"""Lab faults are transient (a reboot clears them) or persistent (they stay)."""

from __future__ import annotations

from pytest_hpcnet.lab import faults


def test_every_transient_fault_is_a_lab_fault():
    assert set(faults.KINDS) >= faults.TRANSIENT


def test_transient_and_persistent():
    assert faults.persistence("gpu-xid") == "transient"
    assert faults.persistence("gpu-ecc") == "transient"
    assert faults.persistence("gpu-throttle") == "persistent"
    assert faults.persistence("mtu") == "persistent"
    assert faults.persistence("block:tcp/22") == "persistent"
