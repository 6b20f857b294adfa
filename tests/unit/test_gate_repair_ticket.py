"""A node the gate leaves for replacement gets its ticket bundle (report/ticket.py), named in
its repair record and the gate's line: a `replace` fault, the same code again while suspect,
a repair whose re-acceptance failed; never a `config` fault, a resumed node or an unconfirmed
failure."""

from __future__ import annotations

from datetime import timedelta

from pytest_hpcnet.gate import repair
from pytest_hpcnet.gate.judge import NodeJudgement
from pytest_hpcnet.gate.repair import PastRepairs, RepairError, RepairRecord
from pytest_hpcnet.gate.repair_live import write_node_ticket
from pytest_hpcnet.inventory.gate_settings import RepairSettings
from pytest_hpcnet.report.ticket import read_ticket, verify_ticket
from tests.unit.test_gate_repair import NOW, FakeRepairer, drained, failed, plan
from tests.unit.test_ticket import _forget_secrets, run

__all__ = ["_forget_secrets", "run"]


def test_replace_repeat_and_failed_get_a_ticket_config_and_resumed_do_not():
    past = PastRepairs(
        [
            RepairRecord(
                "node03",
                ["HPCNET-GPU-XID"],
                ["reboot"],
                "resumed",
                action="reboot",
                at=(NOW - timedelta(days=2)).isoformat(),
            )
        ]
    )
    judgements = [
        failed("node01", "gpu_inventory"),  # replace class
        failed("node02", "mtu"),  # config
        failed("node03", "gpu_xid"),  # again while suspect
        failed("node04", "gpu_xid"),  # rebooted, fails the re-acceptance
        failed("node05", "gpu_xid"),  # rebooted, resumed
        NodeJudgement(
            "node06",
            "fail",
            ["gpu_inventory"],
            ["bad"],
            faults=[("gpu_inventory", "HPCNET-GPU-COUNT")],
            confirmed=False,
        ),
    ]
    nodes = [f"node0{i}" for i in range(1, 7)]
    the_plan = plan(judgements, drained(*nodes), RepairSettings(max_share=1), past)
    fake = FakeRepairer(passes={"node05"})
    done = repair.execute(the_plan, fake, lambda c: None)
    records = {r.node: r for r in [*the_plan.left, *done]}
    tickets = {n: r.ticket for n, r in records.items() if r.ticket}
    assert tickets == {n: f"tickets/ticket-{n}.tar.gz" for n in ("node01", "node03", "node04")}
    assert records["node01"].line().endswith("stays drained; ticket tickets/ticket-node01.tar.gz")
    assert records["node04"].as_dict()["ticket"] == "tickets/ticket-node04.tar.gz"
    assert "replace" not in records["node05"].as_dict()


def test_a_ticket_not_written_is_said():
    class NoTicket(FakeRepairer):
        def ticket(self, node):
            raise RepairError("no record of node 'node01'")

    the_plan = plan([failed("node01", "gpu_inventory")], drained("node01"))
    repair.execute(the_plan, NoTicket(), lambda c: None)
    (record,) = the_plan.left
    assert record.ticket == ""
    assert record.why.endswith("stays drained; no ticket bundle: no record of node 'node01'")


def test_the_gate_writes_the_bundle_under_its_run_folder(run, tmp_path):
    run_dir, secret, _, key = run
    unsigned = write_node_ticket(run_dir, "node02", None)
    assert unsigned.endswith(f".gate/{run_dir.name}/tickets/ticket-{run_dir.name}-node02.tar.gz")
    files = read_ticket(unsigned)
    assert "summary.txt" in files and "signature.json" not in files
    assert secret not in b"".join(files.values()).decode()
    assert verify_ticket(unsigned) == ["signature: missing (unsigned)"]
    signed = write_node_ticket(run_dir, "node02", str(key))
    assert signed == unsigned and verify_ticket(signed, tmp_path / "signer.pub.pem") == []
