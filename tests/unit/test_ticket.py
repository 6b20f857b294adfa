"""`hpcnet ticket RUN NODE`: a node's signed archive for the cloud provider's support, read
from the run's evidence, with no secret in it."""

from __future__ import annotations

import io
import json
import secrets
import tarfile

import pytest

from pytest_hpcnet.cli import main
from pytest_hpcnet.lab.control_plane import KEY_ID
from pytest_hpcnet.probes.sections import MARK
from pytest_hpcnet.redact import clear_secrets
from pytest_hpcnet.report.evidence import EvidenceBundle, write_inventory_copy
from pytest_hpcnet.report.signing import generate_keypair
from pytest_hpcnet.report.ticket import SUMMARY, read_ticket, verify_ticket


@pytest.fixture(autouse=True)
def _forget_secrets():
    yield
    clear_secrets()


def framed(sections: dict[str, str]) -> str:
    return "".join(
        f"{MARK} begin {name}\n{text.rstrip()}\n{MARK} end {name} 0\n"
        for name, text in sections.items()
    )


@pytest.fixture
def run(tmp_path, fixture_text):
    """A closed run: node02 failed gpu_health and gpu_xid, node01 failed mtu; the lab's dummy
    AccessKey leaked into node02's recorded output and a message."""
    secret = secrets.token_urlsafe(24)
    bundle = EvidenceBundle(tmp_path / "20261203-101500-ab12")
    leak = f"access_key_id = {KEY_ID}\naccess_key_secret = {secret}\nAK {KEY_ID} {secret}"
    facts = framed(
        {
            "hostname": "iZ2zeaaaabbbbccccdddd1Z",
            "kernel": "5.10.134-16.al8.x86_64",
            "metadata": fixture_text("metadata", "token-all-keys.txt"),
            "gpu_query": fixture_text("gpu", "query-8gpu-ecc-gpu2.csv"),
            "gpu_klog": "hpcnet-klog: journalctl\n"
            "Dec 03 10:01:02 h kernel: NVRM: Xid (PCI:0000:3a:00): 48, pid=1, DBE",
            "env": leak,
        }
    )
    digest = bundle.store_output(facts)
    command = {"node": "node02", "command": "facts", "exit_status": 0, "output_digest": digest}
    failed = {
        "name": "ecc_uncorrected_volatile",
        "value": 4,
        "threshold": 0,
        "comparison": "==",
        "subject": "GPU 2",
        "outcome": "fail",
        "code": "HPCNET-GPU-ECC-DBE",
    }
    bundle.append(
        {
            "check_id": "gpu_health",
            "requirement": "GPU memory health",
            "subject": "node02",
            "verdict": "fail",
            "message": f"node02: GPU 2 4 volatile uncorrected ECC errors (token {secret})",
            "measured": [failed],
            "commands": [command],
            "codes": ["HPCNET-GPU-ECC-DBE"],
        }
    )
    bundle.append(
        {
            "check_id": "reachability",
            "requirement": "Nodes reachable",
            "subject": "node02",
            "verdict": "pass",
            "commands": [command],
        }
    )
    bundle.append(
        {
            "check_id": "mtu",
            "requirement": "Jumbo MTU",
            "subject": "node01",
            "verdict": "fail",
            "message": "node01: eth1 MTU 1500",
            "codes": ["HPCNET-MTU"],
        }
    )
    credentials = tmp_path / "cloud-credentials.ini"
    credentials.write_text(
        f"[default]\ntype = access_key\naccess_key_id = {KEY_ID}\naccess_key_secret = {secret}\n"
    )
    inventory = tmp_path / "inv.yaml"
    inventory.write_text(
        "cluster: {name: unit, region: cn-beijing}\n"
        f"cloud: {{credentials_file: {credentials}}}\n"
        'nodes:\n  - {name: "node01", host: "198.18.0.1"}\n'
        '  - {name: "node02", host: "198.18.0.2"}\n'
    )
    write_inventory_copy(bundle.run_dir, inventory.read_text())
    bundle.close({"cluster": "unit"})
    key = tmp_path / "signer.pem"
    generate_keypair(key, tmp_path / "signer.pub.pem")
    return bundle.run_dir, secret, inventory, key


def test_the_ticket_holds_what_support_asks_for_and_no_secret(run, tmp_path, capsys):
    run_dir, secret, inventory, key = run
    out = tmp_path / "t.tar.gz"
    argv = ["ticket", str(run_dir), "node02", "--sign-key", str(key), "--out", str(out)]
    assert main([*argv, "--inventory", str(inventory)]) == 0
    assert "summary.txt" in capsys.readouterr().out
    files = read_ticket(out)
    assert verify_ticket(out, tmp_path / "signer.pub.pem") == []
    everything = b"".join(files.values()).decode()
    assert secret not in everything and KEY_ID not in everything
    ticket = json.loads(files["ticket.json"])
    assert ticket["host"]["instance_id"] == "i-2zeaaaabbbbccccdddd1"
    assert ticket["host"]["instance_type"] == "ecs.ebmgn8v.48xlarge"
    assert ticket["host"]["zone_id"] == "cn-beijing-l"
    assert ticket["host"]["kernel"] == "5.10.134-16.al8.x86_64"
    gpu2 = ticket["gpus"][2]
    assert (gpu2["serial"], gpu2["bus_id"]) == ("1654124006922", "00000000:3A:00.0")
    (fault,) = ticket["faults"]  # node01's MTU is not node02's
    assert fault["codes"][0]["code"] == "HPCNET-GPU-ECC-DBE"
    assert fault["codes"][0]["repair"] == "reset"
    assert fault["failed_measurements"][0]["value"] == 4
    assert fault["commands"][0]["output"] in {f"{n}" for n in files}
    assert "Xid (PCI:0000:3a:00): 48" in files["kernel-log.txt"].decode()
    summary = files[SUMMARY].decode()
    assert summary.startswith("Node node02: instance i-2zeaaaabbbbccccdddd1 (ecs.ebmgn8v.48xlarge)")
    assert "HPCNET-GPU-ECC-DBE (reset): GPU memory health (ECC, row remapping) [node02]" in summary
    assert "2: NVIDIA H200, serial 1654124006922, bus 00000000:3A:00.0" in summary


def test_the_runs_own_inventory_names_the_credentials_to_redact(run, tmp_path):
    run_dir, secret, _, key = run
    out = tmp_path / "t.tar.gz"
    assert main(["ticket", str(run_dir), "node02", "--sign-key", str(key), "--out", str(out)]) == 0
    everything = b"".join(read_ticket(out).values()).decode()
    assert secret not in everything and KEY_ID not in everything


def test_a_tampered_ticket_does_not_verify(run, tmp_path):
    run_dir, _, _, key = run
    out = tmp_path / "t.tar.gz"
    assert main(["ticket", str(run_dir), "node02", "--sign-key", str(key), "--out", str(out)]) == 0
    files = read_ticket(out)
    files[SUMMARY] = b"nothing wrong here\n"
    forged = tmp_path / "forged.tar.gz"
    with tarfile.open(forged, "w:gz") as archive:
        for name, data in files.items():
            info = tarfile.TarInfo(f"t/{name}")
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    assert verify_ticket(forged) == ["summary.txt: does not match the manifest"]


def test_a_node_without_records_writes_nothing(run, tmp_path, capsys):
    run_dir, _, _, key = run
    out = tmp_path / "t.tar.gz"
    assert main(["ticket", str(run_dir), "node09", "--sign-key", str(key), "--out", str(out)]) == 2
    assert "no record of node 'node09'" in capsys.readouterr().out
    assert not out.exists()
