"""Inventory loading: the example loads; every bad inventory gives one line naming the key."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pytest_hpcnet.inventory.loader import InventoryError, expand_range, load_inventory
from pytest_hpcnet.redact import clear_secrets, redact

ROOT = Path(__file__).resolve().parents[2]
GOOD = """\
cluster: {name: c1, region: cn-lab}
ssh: {user: root}
nodes:
  - {name: n1, host: 198.18.0.11}
  - {name: n2, host: 198.18.0.12}
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "inv.yaml"
    path.write_text(textwrap.dedent(text))
    return path


def test_example_inventory_loads(ssh_home):
    inv = load_inventory(ROOT / "inventories" / "example.yaml")
    assert [n.name for n in inv.nodes][:3] == ["gpu-001", "gpu-002", "gpu-003"]
    assert inv.nodes[15].host == "192.168.10.26"
    assert inv.node("gpu-017").ssh.port == 2222
    assert inv.expect.ib_write_bw.bound_gbps == 90  # inventory bound replaces the profile reference
    assert inv.expect.rdma.min_devices == 2  # from the ebmgn7ex profile
    assert inv.waivers == []  # a commented example: nobody copying it inherits a waiver
    assert len(inv.sha256) == 64 and len(inv.expect_sha256) == 64


def test_defaults_and_profile_reference(tmp_path):
    inv = load_inventory(write(tmp_path, GOOD + "expect: {profile: ebmgn8is}\n"))
    assert inv.ssh.host_key_policy == "strict"
    assert inv.expect.mtu == 8500
    assert inv.expect.ib_write_bw.bound_gbps == pytest.approx(64.0)  # 80 Gbit/s per ERI - 20 %


def test_one_nic_index_rule_only_on_ebmgn7ex(tmp_path):
    """S1 states the 100 Gbit/s one-NIC-index ceiling for ebmgn7ex only; ebmgn8is used to
    borrow it as its per-pair reference (100 - 20 %), which is neither figure of 8is."""
    for profile, same_index in (("ebmgn7ex", 100), ("ebmgn8is", None), ("gn9gc", None)):
        inv = load_inventory(write(tmp_path, GOOD + f"expect: {{profile: {profile}}}\n"))
        assert inv.expect.erdma.same_nic_index_gbps == same_index, profile
    inv = load_inventory(write(tmp_path, GOOD + "expect: {profile: ebmgn8is}\n"))
    assert (inv.expect.erdma.per_eri_gbps, inv.expect.erdma.per_instance_gbps) == (80, 160)
    assert inv.expect.ib_write_bw.reference.value == 80


def test_erdma_keys_override_like_the_others(tmp_path):
    text = GOOD + "expect: {profile: ebmgn8is, erdma: {per_eri_gbps: 70, cc: mpcc}}\n"
    inv = load_inventory(write(tmp_path, text))
    assert inv.expect.erdma.per_eri_gbps == 70 and inv.expect.erdma.cc == "mpcc"
    assert inv.expect.erdma.per_instance_gbps == 160  # the rest of the profile stays


def test_range_with_host_range_and_name_pattern(tmp_path):
    inv = load_inventory(
        write(
            tmp_path,
            """\
            cluster: {name: c, region: r}
            nodes:
              - {name: "gpu-[008-011]", host: "10.0.0.[1-4]"}
              - {name: "cpu-[1-2]", host: "{name}.example"}
            """,
        )
    )
    assert [(n.name, n.host) for n in inv.nodes] == [
        ("gpu-008", "10.0.0.1"),
        ("gpu-009", "10.0.0.2"),
        ("gpu-010", "10.0.0.3"),
        ("gpu-011", "10.0.0.4"),
        ("cpu-1", "cpu-1.example"),
        ("cpu-2", "cpu-2.example"),
    ]
    assert expand_range("x") == ["x"]


def test_env_values_are_used_and_redacted(tmp_path, monkeypatch):
    clear_secrets()
    monkeypatch.setenv("HX_PASS", "s3cr3t-passphrase")
    inv = load_inventory(write(tmp_path, GOOD + "  \nexpect: {}\n").parent / "inv.yaml")
    path = write(tmp_path, GOOD.replace("{user: root}", "{user: root, passphrase: '${HX_PASS}'}"))
    inv = load_inventory(path)
    assert inv.ssh.passphrase == "s3cr3t-passphrase"
    assert redact("ssh -o pass=s3cr3t-passphrase") == "ssh -o pass=***"
    clear_secrets()


BAD = {
    "unknown-top-key": (GOOD + "nodez: []\n", "nodez: unknown key"),
    "typo-suggestion": (
        GOOD.replace("ssh: {user: root}", "ssh: {usr: root}"),
        "did you mean 'user'",
    ),
    "typo-in-expect": (
        GOOD + "expect: {mut: 9000}\n",
        "expect.mut: unknown key (did you mean 'mtu'",
    ),
    "nested-typo": (
        GOOD + "expect: {ib_write_bw: {min_gpbs: 9}}\n",
        "expect.ib_write_bw.min_gpbs: unknown key (did you mean 'min_gbps'",
    ),
    "wrong-type": (GOOD.replace("{user: root}", "{port: twenty-two}"), "ssh.port"),
    "missing-host-key": (
        "cluster: {name: c, region: r}\nnodes:\n  - {host: 1.2.3.4}\n",
        "nodes[0].name: required key is missing",
    ),
    "missing-cluster": ("nodes:\n  - {name: n1}\n", "cluster: required key is missing"),
    "no-nodes": ("cluster: {name: c, region: r}\nnodes: []\n", "nodes:"),
    "duplicate-node": (GOOD + "  - {name: n1, host: 198.18.0.13}\n", "duplicate node name 'n1'"),
    "bad-range": (
        GOOD + "  - {name: 'g-[9-3]', host: 'h-{name}'}\n",
        "range end 3 is below its start 9",
    ),
    "range-count-mismatch": (
        GOOD + "  - {name: 'g-[1-3]', host: '10.0.0.[1-2]'}\n",
        "range gives 2 hosts for 3 names",
    ),
    "negative-threshold": (
        GOOD + "expect: {ib_write_bw: {min_gbps: -5}}\n",
        "expect.ib_write_bw.min_gbps",
    ),
    "unknown-profile": (GOOD + "expect: {profile: ebmgn7}\n", "unknown profile 'ebmgn7'"),
    "yaml-syntax": (GOOD + "expect: {mtu: [8500\n", "YAML syntax error"),
    "not-a-mapping": ("- just\n- a list\n", "expected a mapping"),
    "empty-file": ("", "got empty"),
    "bad-policy": (
        GOOD.replace("{user: root}", "{host_key_policy: yes-please}"),
        "ssh.host_key_policy",
    ),
    "bad-name": (GOOD + "  - {name: 'n;rm -rf', host: h}\n", "not a valid node name"),
    "option-like-host": (
        GOOD + "  - {name: n9, host: '-oProxyCommand=touch /tmp/x'}\n",
        "is not a host name or address",
    ),
    "shell-in-host": (GOOD + "  - {name: n9, host: 'h$(id)'}\n", "is not a host name"),
    "bad-interface": (
        GOOD + "  - {name: n9, host: h9, interface: 'eth0; reboot'}\n",
        "is not a Linux interface name",
    ),
    "duplicate-yaml-key": (GOOD + "cluster: {name: d, region: r}\n", "duplicate key 'cluster'"),
    "unset-env": (
        GOOD.replace("{user: root}", "{user: '${HX_UNSET_VAR_1}'}"),
        "${HX_UNSET_VAR_1} is not set",
    ),
    "bad-waiver-date": (
        GOOD + "waivers: [{check: mtu, reason: r, expires: someday}]\n",
        "waivers[0].expires",
    ),
    "mtu-out-of-range": (GOOD + "expect: {mtu: 70000}\n", "expect.mtu"),
    "both-bw-sources": (
        GOOD + "expect: {ib_write_bw: {min_gbps: 9, reference: {value: 10, lower: -0.1}}}\n",
        "give min_gbps or reference, not both",
    ),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_inventory_gives_one_line_naming_the_key(tmp_path, case):
    text, expected = BAD[case]
    path = write(tmp_path, text)
    with pytest.raises(InventoryError) as info:
        load_inventory(path)
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith(str(path))
    assert expected in message


def test_unreadable_file(tmp_path):
    with pytest.raises(InventoryError, match="cannot read inventory"):
        load_inventory(tmp_path / "missing.yaml")
    folder = tmp_path / "dir.yaml"
    folder.mkdir()
    with pytest.raises(InventoryError, match="cannot read inventory"):
        load_inventory(folder)


def test_binary_file(tmp_path):
    path = tmp_path / "bin.yaml"
    path.write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(InventoryError, match="not UTF-8"):
        load_inventory(path)


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    text=st.one_of(
        st.text(max_size=400), st.binary(max_size=200).map(lambda b: b.decode("latin-1"))
    )
)
def test_any_text_loads_or_gives_one_line_per_problem(tmp_path, text):
    path = tmp_path / "fuzz.yaml"
    path.write_text(GOOD + text if text[:1] in (" ", "\n") else text, encoding="utf-8")
    try:
        load_inventory(path)
    except InventoryError as exc:
        assert all(line.startswith(f"{path}: ") for line in str(exc).splitlines())


YAML_VALUES = st.recursive(
    st.one_of(
        st.none(), st.booleans(), st.integers(), st.floats(allow_nan=True), st.text(max_size=20)
    ),
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=12), inner, max_size=4)
    ),
    max_leaves=20,
)


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    section=st.sampled_from(
        ["cluster", "ssh", "nodes", "expect", "waivers", "benchmarks", "cloud"]
    ),
    value=YAML_VALUES,
)
def test_any_structure_loads_or_gives_one_line_per_problem(tmp_path, section, value):
    import yaml

    data = yaml.safe_load(GOOD)
    data[section] = value
    path = tmp_path / "fuzz.yaml"
    path.write_text(yaml.safe_dump(data))
    try:
        load_inventory(path)
    except InventoryError as exc:
        assert all(line.startswith(f"{path}: ") for line in str(exc).splitlines())


def test_missing_identity_file_is_one_line_naming_key_and_path(tmp_path):
    """Caught at load time, before any connection (not as every node unreachable)."""
    path = write(tmp_path, GOOD.replace("{user: root}", "{user: root, identity_file: nokey}"))
    with pytest.raises(InventoryError) as err:
        load_inventory(path)
    assert str(err.value) == f"{path}: ssh.identity_file: nokey: no such file"


def test_missing_identity_file_of_one_node_names_the_node(tmp_path):
    key = tmp_path / "key"
    key.write_text("k")
    text = GOOD.replace("{user: root}", f"{{user: root, identity_file: {key}}}")
    text = text.replace("host: 198.18.0.12}", "host: 198.18.0.12, ssh: {identity_file: ~/nokey}}")
    with pytest.raises(
        InventoryError, match=r"nodes\[n2\]\.ssh\.identity_file: ~/nokey \(.*nokey\): no such file$"
    ):
        load_inventory(write(tmp_path, text))


def test_named_known_hosts_must_exist_when_host_keys_are_strict(tmp_path):
    text = GOOD.replace("{user: root}", "{user: root, known_hosts: kh}")
    with pytest.raises(
        InventoryError, match=r"ssh\.known_hosts: kh: no such file \(host_key_policy strict"
    ):
        load_inventory(write(tmp_path, text))
    lenient = text.replace("known_hosts: kh}", "known_hosts: kh, host_key_policy: accept-new}")
    assert load_inventory(write(tmp_path, lenient)).ssh.known_hosts == "kh"  # created on first use


def test_unreadable_or_directory_files_are_refused(tmp_path):
    folder = tmp_path / "keys"
    folder.mkdir()
    text = GOOD.replace("{user: root}", f"{{user: root, identity_file: {folder}}}")
    with pytest.raises(InventoryError, match=r"ssh\.identity_file: .*keys: not a file$"):
        load_inventory(write(tmp_path, text))
