"""Waivers at load: a known requirement, a known subject, a reason, a grantor and an expiry
within the inventory's horizon; any other waiver is one line and exit 4, no node contacted."""

from __future__ import annotations

import textwrap
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from pytest_hpcnet.inventory.loader import InventoryError, load_inventory
from pytest_hpcnet.run_scope import check_waivers

pytest_plugins = ["pytester"]

GOOD = """\
cluster: {name: c1, region: cn-lab}
ssh: {user: root, connect_timeout_s: 1, connect_retries: 1}
nodes:
  - {name: "node0[1-3]", host: "198.18.0.[201-203]"}
"""
TODAY = datetime.now(timezone.utc).date()
SOON = (TODAY + timedelta(days=30)).isoformat()


def waiver(
    check: str = "mtu", reason: str = "vendor ticket 42", by: str | None = "QA", expires: str = SOON
) -> str:
    """One waiver as a YAML flow mapping (a key left out when its value is None)."""
    fields = {"check": check, "reason": reason, "by": by, "expires": expires}
    return "{" + ", ".join(f"{k}: {v!r}" for k, v in fields.items() if v is not None) + "}"


def write(tmp_path: Path, *waivers: str, extra: str = "") -> Path:
    path = tmp_path / "inv.yaml"
    body = GOOD + extra + "waivers:\n" + "".join(f"  - {w}\n" for w in waivers)
    path.write_text(textwrap.dedent(body))
    return path


def load_error(path: Path) -> str:
    with pytest.raises(InventoryError) as exc:
        load_inventory(path)
    message = str(exc.value)
    assert "\n" not in message
    return message


def test_a_complete_waiver_loads(tmp_path):
    inv = load_inventory(write(tmp_path, waiver(), waiver("path_mtu[node01->node02]")))
    assert [w.by for w in inv.waivers] == ["QA", "QA"]
    assert inv.waiver_horizon_days == 90


@pytest.mark.parametrize(
    ("fields", "problem"),
    [
        ({"reason": ""}, "reason is empty"),
        ({"reason": "   "}, "reason is empty"),
        ({"by": None}, "by: who granted it is missing"),
        ({"by": " "}, "by: who granted it is missing"),
        ({"expires": "9999-12-31"}, "expires 9999-12-31 is more than 90 days from today"),
    ],
)
def test_an_incomplete_waiver_is_one_line_naming_it(tmp_path, fields, problem):
    message = load_error(write(tmp_path, waiver(), waiver("gpu_xid[node02]", **fields)))
    assert "waivers[1] (gpu_xid[node02])" in message and problem in message


def test_the_horizon_is_the_inventorys_own(tmp_path):
    later = (TODAY + timedelta(days=200)).isoformat()
    inv = load_inventory(write(tmp_path, waiver(expires=later), extra="waiver_horizon_days: 365\n"))
    assert inv.waivers[0].expires.isoformat() == later
    edge = (TODAY + timedelta(days=90)).isoformat()
    assert load_inventory(write(tmp_path, waiver(expires=edge))).waivers
    assert "more than 90 days" in load_error(write(tmp_path, waiver(expires=later)))


def test_an_expired_waiver_still_loads_and_is_shown_as_not_applied(tmp_path):
    assert load_inventory(write(tmp_path, waiver(expires="2000-01-01"))).waivers


@pytest.mark.parametrize(
    "check",
    [
        "mtu",
        "mtu[node01]",
        "path_mtu[node01->node03]",
        "erdma_eri_bw[node02 erdma_1]",
        "gpu_health[node03 GPU 7]",
        "nccl_busbw[cluster]",
    ],
)
def test_known_checks_and_subjects_pass(tmp_path, check):
    check_waivers(load_inventory(write(tmp_path, waiver(check))))


@pytest.mark.parametrize(
    ("check", "problem"),
    [
        (
            "ib_write_latency",
            "unknown requirement 'ib_write_latency' (did you mean 'ib_write_lat'?",
        ),
        ("mtu[gpu-999]", "unknown subject 'gpu-999': not a node of the inventory"),
        ("path_mtu[node01->gpu-9]", "unknown subject 'node01->gpu-9': 'gpu-9' is not a node"),
        ("path_mtu[node01->node01]", "a pair names two different nodes"),
        ("erdma_eri_bw[gpu-9 erdma_1]", "'gpu-9' is not a node of the inventory"),
        ("mtu[]", "empty subject"),
        ("mtu[node01", "not a check id or id[subject]"),
    ],
)
def test_unknown_checks_and_subjects_are_usage_errors(tmp_path, check, problem):
    inv = load_inventory(write(tmp_path, waiver(), waiver(check)))
    with pytest.raises(pytest.UsageError) as exc:
        check_waivers(inv)
    message = str(exc.value)
    assert "\n" not in message
    assert f"waivers[1] ({check})" in message and problem in message


def test_a_bad_waiver_stops_the_run_with_exit_4_before_any_node(pytester: pytest.Pytester):
    pytester.makefile(".yaml", inv=GOOD + f"waivers:\n  - {waiver('mtu[gpu-999]')}\n")
    result = pytester.runpytest("--inventory", "inv.yaml", "--reports-dir", "r")
    assert result.ret == 4
    result.stderr.fnmatch_lines(["*waivers[[]0] (mtu[[]gpu-999]): unknown subject 'gpu-999'*"])
    assert not (pytester.path / "r").exists() or not any((pytester.path / "r").iterdir())
