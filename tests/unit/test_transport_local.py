"""`connection: local`: a node's commands run on the controller, with no SSH, under the same
node-side timeout, and a whole pytest run of the shipped suites works against it."""

from __future__ import annotations

from pytest_hpcnet.campaigns.facts import FactsCampaign
from pytest_hpcnet.inventory.loader import load_inventory
from pytest_hpcnet.transport.fanout import Transport


def inventory(tmp_path):
    path = tmp_path / "inv.yaml"
    path.write_text(
        "cluster: {name: c, region: r}\n"
        "nodes:\n"
        "  - {name: here, host: localhost, connection: local}\n"
        "  - {name: far, host: 192.0.2.1}\n"
    )
    return load_inventory(path)


def test_local_node_runs_here_with_no_connection(tmp_path):
    inv = inventory(tmp_path)
    assert [n.connection for n in inv.nodes] == ["local", "ssh"]
    transport = Transport(inv)
    seen = []
    transport.listeners.append(seen.append)
    result = transport.run("here", "echo out; echo err >&2; exit 3", 10)
    assert (result.stdout, result.stderr, result.exit_status) == ("out\n", "err\n", 3)
    assert result.unreachable is None and not result.timed_out and seen == [result]
    assert transport.connections_opened()["here"] == 0
    slow = transport.run("here", "sleep 5", 1)
    assert slow.timed_out and slow.duration_s < 4
    transport.close()


def test_facts_from_a_local_node(tmp_path):
    inv = inventory(tmp_path)
    inv.nodes = inv.nodes[:1]
    transport = Transport(inv)
    facts = FactsCampaign(inv, transport).gather()["here"]
    assert facts.result.unreachable is None
    assert facts.sections["hostname"].status == 0 and facts.sections["hostname"].text
    transport.close()
