"""Values that would reach YAML's or Python's own conversions unchecked are one line naming
the key (exit 4), and one inventory's every problem is shown at once, from every stage."""

from __future__ import annotations

import textwrap
from datetime import date, timedelta
from pathlib import Path

import pytest

from pytest_hpcnet.inventory.loader import InventoryError, load_inventory

pytest_plugins = ["pytester"]

HEAD = "cluster: {name: c, region: r}\nnodes:\n  - {name: n1, host: 10.0.0.1}\n"
SOON = (date.today() + timedelta(days=10)).isoformat()


def refused(tmp_path: Path, text: str) -> list[str]:
    path = tmp_path / "inv.yaml"
    path.write_text(textwrap.dedent(text))
    with pytest.raises(InventoryError) as info:
        load_inventory(path)
    return [line.removeprefix(f"{path}: ") for line in str(info.value).splitlines()]


@pytest.mark.parametrize("expires", ["2026-13-01", "2026-02-30", "tomorrow", "2026-1-1x"])
def test_an_impossible_waiver_date_names_the_key(tmp_path, expires):
    text = HEAD + f"waivers: [{{check: mtu, reason: r, by: QA, expires: {expires}}}]\n"
    (line,) = refused(tmp_path, text)
    assert line.startswith("waivers[0].expires: "), line
    assert expires in line


def test_a_good_waiver_date_still_loads(tmp_path):
    path = tmp_path / "inv.yaml"
    path.write_text(HEAD + f"waivers: [{{check: mtu, reason: r, by: QA, expires: {SOON}}}]\n")
    assert load_inventory(path).waivers[0].expires == date.fromisoformat(SOON)


@pytest.mark.parametrize(
    "jump", ["ops@@bastion:abc", "ops@bastion:abc", "ops@bastion:70000", "@bastion", "a b"]
)
def test_a_bad_jump_host_names_the_key(tmp_path, jump):
    for text, key in (
        (HEAD + f"ssh: {{jump_host: '{jump}'}}\n", "ssh.jump_host"),
        (
            "cluster: {name: c, region: r}\n"
            f"nodes:\n  - {{name: n1, host: 10.0.0.1, ssh: {{jump_host: '{jump}'}}}}\n",
            "nodes[0].ssh.jump_host",
        ),
    ):
        (line,) = refused(tmp_path, text)
        assert line.startswith(f"{key}: "), line


@pytest.mark.parametrize("jump", ["bastion", "ops@bastion", "ops@bastion:2222", "10.0.0.9:22"])
def test_good_jump_hosts_load(tmp_path, jump):
    path = tmp_path / "inv.yaml"
    path.write_text(HEAD + f"ssh: {{jump_host: '{jump}'}}\n")
    assert load_inventory(path).ssh.jump_host == jump


def test_a_bad_date_is_exit_4_in_one_line(pytester):
    pytester.makefile(
        ".yaml", inv=HEAD + "waivers: [{check: mtu, reason: r, by: QA, expires: 2026-13-01}]\n"
    )
    result = pytester.runpytest("--hpcnet-inventory", "inv.yaml", "--hpcnet-reports-dir", "o")
    assert result.ret == 4
    assert "INTERNALERROR" not in result.stderr.str() + result.stdout.str()
    (line,) = [ln for ln in result.stderr.lines if "waivers[0].expires" in ln]
    assert "2026-13-01" in line


def test_every_stage_reports_its_problems_at_once(tmp_path):
    """A schema error does not hide a missing key file, a bad range, duplicate hosts or a
    bad waiver: each is its own line."""
    text = (
        "cluster: {name: c, region: r}\n"
        "ssh: {connect_retries: 0, identity_file: /nonexistent/id_ed25519}\n"
        "nodes:\n"
        "  - {name: a1, host: 10.0.0.1}\n"
        "  - {name: b1, host: 10.0.0.1}\n"
        "  - {name: 'g[5-2]'}\n"
        "waivers: [{check: mtu, reason: '', by: QA, expires: " + SOON + "}]\n"
    )
    lines = refused(tmp_path, text)
    joined = "\n".join(lines)
    assert any(ln.startswith("ssh.connect_retries:") for ln in lines), joined
    assert "/nonexistent/id_ed25519" in joined
    assert any(ln.startswith("nodes[2].name:") for ln in lines), joined
    assert "'a1' and 'b1'" in joined
    assert any(ln.startswith("waivers[0]") and "reason" in ln for ln in lines), joined


@pytest.mark.parametrize("host", ["10.0.0.1:abc", "n1:0", "n1:99999"])
def test_a_host_with_a_bad_port_names_the_key(tmp_path, host):
    text = f"cluster: {{name: c, region: r}}\nnodes:\n  - {{name: n1, host: '{host}'}}\n"
    (line,) = refused(tmp_path, text)
    assert line.startswith("nodes: [0].host") and host in line, line


@pytest.mark.parametrize("host", ["10.0.0.1:2222", "fd00::1", "n1"])
def test_hosts_with_a_port_or_ipv6_load(tmp_path, host):
    path = tmp_path / "inv.yaml"
    path.write_text(f"cluster: {{name: c, region: r}}\nnodes:\n  - {{name: n1, host: '{host}'}}\n")
    assert load_inventory(path).nodes[0].host == host


@pytest.mark.parametrize(
    ("ports", "bad"),
    [
        ("{tcp: ['abc']}", "'abc'"),
        ("{tcp: ['99999']}", "'99999'"),
        ("{tcp: ['30-20']}", "'30-20'"),
        ("{udp: ['0']}", "'0'"),
        ("{tcp: ['1-2000']}", "1024"),
        ("{tcp: ['22;reboot']}", "'22;reboot'"),
    ],
)
def test_a_bad_port_spec_names_the_key(tmp_path, ports, bad):
    """The pair probes expand these specs at run time: a bad one failed every pair there."""
    (line,) = refused(tmp_path, HEAD + f"expect: {{ports: {ports}}}\n")
    key = "expect.ports.udp" if "udp" in ports else "expect.ports.tcp"
    assert line.startswith(f"{key}: "), line
    assert bad in line, line


def test_port_specs_as_numbers_ranges_or_lists_load(tmp_path):
    path = tmp_path / "inv.yaml"
    path.write_text(HEAD + "expect: {ports: {tcp: [22, '29500-29510', '80,443'], udp: [4791]}}\n")
    ports = load_inventory(path).expect.ports
    assert (ports.tcp, ports.udp) == (["22", "29500-29510", "80,443"], ["4791"])


def test_a_version_yaml_read_as_a_number_says_to_quote_it(tmp_path):
    """YAML reads `cuda: 12.10` as the number 12.1: the line says to quote it."""
    text = HEAD + "expect: {versions: {pin: {cuda: 12.10}}}\n"
    (line,) = refused(tmp_path, text)
    assert line.startswith("expect.versions.pin.cuda: "), line
    assert "in quotes" in line, line


@pytest.mark.parametrize("value", ["lots", "16M", "'4096 lots 16777216'", "''"])
def test_a_sysctl_minimum_that_is_no_number_names_the_key(tmp_path, value):
    """`mode: min` compares numbers on the node: a word there failed every node at run time."""
    text = HEAD + f"expect: {{sysctl: {{net.core.rmem_max: {{value: {value}, mode: min}}}}}}\n"
    (line,) = refused(tmp_path, text)
    assert line.startswith("expect.sysctl.net.core.rmem_max: "), line
    assert "numbers" in line, line


def test_sysctl_minimums_as_numbers_or_triples_load(tmp_path):
    path = tmp_path / "inv.yaml"
    path.write_text(
        HEAD + "expect: {sysctl: {net.core.rmem_max: {value: 16777216, mode: min},"
        " net.ipv4.tcp_rmem: {value: '4096 87380 16777216', mode: min},"
        " net.ipv4.tcp_congestion_control: {value: 'cubic,bbr', mode: one_of}}}\n"
    )
    assert load_inventory(path).expect.sysctl["net.core.rmem_max"].value == 16777216


@pytest.mark.parametrize(
    ("expect", "key"),
    [
        ("{ib_write_bw: {min_gbps: .inf}}", "expect.ib_write_bw.min_gbps"),
        ("{gpu_load: {max_temperature_c: .inf}}", "expect.gpu_load.max_temperature_c"),
        ("{cpfs: {max_mbs_per_node: .Inf}}", "expect.cpfs.max_mbs_per_node"),
    ],
)
def test_an_infinite_bound_names_the_key(tmp_path, expect, key):
    """YAML's `.inf` is a float no measurement reaches (or every one stays under)."""
    (line,) = refused(tmp_path, HEAD + f"expect: {expect}\n")
    assert line.startswith(f"{key}: "), line
