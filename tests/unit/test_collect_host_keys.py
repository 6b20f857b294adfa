"""`--collect-only` names the hops whose host keys known_hosts does not record, before any
node is contacted."""

from __future__ import annotations

from pytest_hpcnet.inventory.loader import load_inventory
from pytest_hpcnet.transport.fanout import Transport

pytest_plugins = ["pytester"]

KEY = "AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl"
SUITE = """\
import pytest

@pytest.mark.check("mtu", "MTU")
def test_one(check):
    pass
"""


def inventory(tmp_path, known: str, policy: str = "strict") -> str:
    hosts = tmp_path / "known_hosts"
    hosts.write_text(known)
    path = tmp_path / "inv.yaml"
    path.write_text(
        "cluster: {name: c, region: r}\n"
        f"ssh: {{known_hosts: {hosts}, host_key_policy: {policy}, jump_host: 198.18.9.9}}\n"
        "nodes:\n"
        "  - {name: n1, host: 198.18.0.1}\n"
        "  - {name: n2, host: 198.18.0.2, ssh: {port: 2222}}\n"
        "  - {name: n3, host: 198.18.0.3}\n"
        "  - {name: me, host: localhost, connection: local}\n"
    )
    return str(path)


def test_each_unrecorded_hop_is_named(tmp_path):
    known = f"198.18.0.1 ssh-ed25519 {KEY}\n198.18.9.9 ssh-ed25519 {KEY}\n"
    transport = Transport(load_inventory(inventory(tmp_path, known)))
    try:
        assert transport.unrecorded_host_keys() == ["[198.18.0.2]:2222", "198.18.0.3"]
    finally:
        transport.close()


def test_accept_new_records_them_on_first_contact(tmp_path):
    transport = Transport(load_inventory(inventory(tmp_path, "", policy="accept-new")))
    try:
        assert transport.unrecorded_host_keys() == []
    finally:
        transport.close()


def test_collect_only_says_so_in_one_line(pytester, tmp_path):
    pytester.makepyfile(test_suite=SUITE)
    inv = inventory(tmp_path, f"198.18.0.1 ssh-ed25519 {KEY}\n")
    result = pytester.runpytest(".", "--hpcnet-inventory", inv, "--collect-only", "-q")
    result.stdout.fnmatch_lines(
        [
            "*host keys: 3 not recorded in *known_hosts: 198.18.9.9, [[]198.18.0.2[]]:2222, "
            "198.18.0.3 (the run refuses them: record each with `ssh-keyscan*"
        ]
    )
