"""`hpcnet ticket RUN NODE`: what a cloud provider's support asks for about one node, as a
signed archive to attach to a ticket.

Read from the run's evidence (nothing runs on the node but `nvidia-bug-report.sh` when
`--bug-report` asks for it: `ticket_bug_report.py`): the instance id, type, zone,
region, VPC, vSwitch, address, hostname and kernel from the node's recorded facts (the
metadata service, `hostname`, `uname -r`), each GPU's index, model, serial, UUID and bus id
(`nvidia-smi --query-gpu`), the node's failed checks with their fault codes, repair classes
and failed measurements, the raw outputs they were judged on, the kernel log's Xid lines
where the facts recorded them, and `summary.txt`, a short text to paste into the ticket.

No secret leaves in it: every text is redacted with the secrets the session registers
(those of the cloud credentials file the run's `inventory.yaml` names; `--inventory` loads
the inventory itself, its `${VAR}` values and credentials file), the cloud
audit's scrubbing (signatures, tokens, `access_key_secret = ...`) and AccessKey ids masked.
`manifest.json` holds each file's sha256; `signature.json` an Ed25519 signature of the
manifest's digest (`verify_ticket`).
"""

from __future__ import annotations

import argparse
import base64
import configparser
import hashlib
import io
import json
import re
import tarfile
from contextlib import suppress
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from typing import Any

import yaml
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from pytest_hpcnet.cloud.credentials import scrub
from pytest_hpcnet.probes.gpu import GPU_QUERY, parse_query_gpu
from pytest_hpcnet.probes.metadata import parse_metadata
from pytest_hpcnet.probes.sections import split_sections
from pytest_hpcnet.redact import MASK, register_secret
from pytest_hpcnet.report.evidence import (
    INVENTORY_COPY,
    CheckRecord,
    _write_atomic,
    effective_verdict,
    read_output,
    read_records,
    read_summary,
    utc_now,
)
from pytest_hpcnet.report.signing import (
    ALGORITHM,
    canonical_json,
    key_fingerprint,
    load_private_key,
    load_public_key,
    read_facts,
)
from pytest_hpcnet.report.ticket_bug_report import LOG, TIMEOUT_S, BugReport, redacted
from pytest_hpcnet.requirements.registry import fault, title

COMMAND = "ticket"
FORMAT = "hpcnet-ticket/1"
SIGNATURE_FORMAT = "hpcnet-ticket-signature/1"
MANIFEST = "manifest.json"
SIGNATURE = "signature.json"
SUMMARY = "summary.txt"
ACCESS_KEY_ID = re.compile(r"\bLTAI[0-9A-Za-z]{12,30}\b")
"""An Alibaba Cloud AccessKey id: masked wherever it appears."""
HOST_KEYS = ("instance_id", "instance_type", "zone_id", "region_id", "vpc_id", "vswitch_id")
HOST_KEYS += ("private_ipv4",)
KLOG = "gpu_klog"


def clean(text: str) -> str:
    """`text` with registered secrets, signatures, tokens and AccessKey ids masked."""
    return ACCESS_KEY_ID.sub(MASK, scrub(text))


def _clean_data(data: Any) -> Any:
    if isinstance(data, str):
        return clean(data)
    if isinstance(data, dict):
        return {k: _clean_data(v) for k, v in data.items()}
    if isinstance(data, list | tuple):
        return [_clean_data(v) for v in data]
    return data


def register_credentials(path: str | Path) -> None:
    """Register every AccessKey secret, id and token of an SDK credentials file (ini)."""
    parser = configparser.ConfigParser(interpolation=None)
    parser.read(Path(path).expanduser())
    for section in parser.sections():
        for key in ("access_key_id", "access_key_secret", "security_token", "sts_token"):
            register_secret(parser[section].get(key))


def register_run_credentials(run_dir: str | Path) -> None:
    """Register the secrets of the cloud credentials file the run's inventory copy names
    (`cloud.credentials_file`), where that file is still there to read."""
    with suppress(OSError, yaml.YAMLError, AttributeError, TypeError):
        data = yaml.safe_load((Path(run_dir) / INVENTORY_COPY).read_text(encoding="utf-8"))
        named = (data.get("cloud") or {}).get("credentials_file")
        if named and Path(named).expanduser().is_file():
            register_credentials(named)


@dataclass
class NodeTicket:
    """What the archive holds about one node of one run."""

    node: str
    run: dict[str, Any]
    host: dict[str, str] = field(default_factory=dict)
    gpus: list[dict[str, Any]] = field(default_factory=list)
    faults: list[dict[str, Any]] = field(default_factory=list)
    kernel_log: str = ""
    records: list[CheckRecord] = field(default_factory=list)
    outputs: dict[str, str] = field(default_factory=dict)
    bug_report: BugReport | None = None
    """`nvidia-bug-report.sh`'s log from the node (`--bug-report`), None when not asked."""


def _mine(record: CheckRecord, node: str) -> bool:
    if record.kind == "pair":
        return node in record.subject.split("->")
    return record.subject == node


def _facts(run_dir: Path, records: list[CheckRecord], node: str) -> dict[str, str]:
    """The node's recorded facts sections (name -> text), from the first output holding
    its metadata."""
    for record in records:
        for command in record.commands:
            if command.node != node or not command.output_digest:
                continue
            text = read_output(run_dir, command.output_digest) or ""
            sections = split_sections(text)
            if "metadata" in sections:
                return {name: out.text for name, out in sections.items()}
    return {}


def _host(facts: dict[str, str], records: list[CheckRecord]) -> dict[str, str]:
    meta = parse_metadata(facts.get("metadata", ""))
    host = {key: getattr(meta, key) for key in HOST_KEYS if getattr(meta, key)}
    host["hostname"] = facts.get("hostname", "").strip()
    host["kernel"] = facts.get("kernel", "").strip()
    for record in records:  # what the reachability check measured, where facts are absent
        for m in record.measured:
            if m.name in (*HOST_KEYS, "hostname", "kernel") and m.value and not host.get(m.name):
                host[m.name] = str(m.value)
    return {k: v for k, v in host.items() if v}


def _gpus(facts: dict[str, str]) -> list[dict[str, Any]]:
    if GPU_QUERY.name not in facts:
        return []
    found = parse_query_gpu(facts[GPU_QUERY.name])
    keys = ("index", "name", "serial", "uuid", "bus_id", "vbios_version", "driver_version")
    return [{k: getattr(g, k) for k in keys} for g in found.gpus]


def _fault(record: CheckRecord) -> dict[str, Any]:
    codes = []
    for code in record.fault_codes():
        declared = fault(code)
        codes.append(
            {
                "code": code,
                "repair": declared.repair if declared else "",
                "meaning": declared.meaning if declared else "",
                "action": declared.action if declared else "",
            }
        )
    failed = [m.model_dump(exclude_none=True) for m in record.measured if m.outcome == "fail"]
    return {
        "check": record.check_id,
        "title": title(record.check_id),
        "subject": record.subject,
        "message": record.message,
        "codes": codes,
        "failed_measurements": failed,
        "commands": [
            {
                "command": c.command,
                "exit_status": c.exit_status,
                "output": f"outputs/{c.output_digest}.txt" if c.output_digest else None,
            }
            for c in record.commands
        ],
        "sections": record.sections,
    }


def collect(run_dir: str | Path, node: str, run_date: date | None = None) -> NodeTicket:
    """The ticket's content for `node` (ValueError: not a run folder, or no record of it)."""
    root = Path(run_dir)
    summary = read_summary(root)
    if summary is None:
        raise ValueError(f"{root}: not a run folder (no summary.json)")
    on = run_date or (summary.started_at.date() if summary.started_at else None)
    records = [r for r in read_records(root) if _mine(r, node)]
    if not records:
        raise ValueError(f"{root}: no record of node {node!r}")
    facts = _facts(root, records, node)
    failed = [r for r in records if effective_verdict(r, on) == "fail"]
    outputs = {}
    for record in failed:
        for command in record.commands:
            text = read_output(root, command.output_digest or "")
            if text is not None:
                outputs[command.output_digest or ""] = text
    certificate = read_facts(root) or {}
    run = {
        "run_id": summary.run_id,
        "cluster": summary.cluster,
        "started_at": summary.started_at.isoformat() if summary.started_at else "",
        "verdict": summary.verdict,
        "lab": summary.lab,
        "evidence_digest": certificate.get("evidence_digest", ""),
    }
    return NodeTicket(
        node=node,
        run=run,
        host=_host(facts, records),
        gpus=_gpus(facts),
        faults=[_fault(r) for r in failed],
        kernel_log=facts.get(KLOG, "").strip(),
        records=records,
        outputs=outputs,
    )


def summary_text(ticket: NodeTicket) -> str:
    """The few lines to paste into a support ticket."""
    host = ticket.host
    lines = [
        f"Node {ticket.node}: instance {host.get('instance_id', 'unknown')} "
        f"({host.get('instance_type', 'type unknown')}), zone {host.get('zone_id', 'unknown')}, "
        f"region {host.get('region_id', 'unknown')}",
        f"Host: {host.get('hostname', '?')}, kernel {host.get('kernel', '?')}, "
        f"address {host.get('private_ipv4', '?')}",
        f"Run {ticket.run['run_id']} ({ticket.run['started_at'] or 'start unknown'}), "
        f"cluster {ticket.run['cluster']}: {ticket.run['verdict']}"
        + (" (lab)" if ticket.run["lab"] else ""),
        "",
    ]
    if not ticket.faults:
        lines.append("No failed check on this node in this run.")
    for found in ticket.faults:
        codes = ", ".join(f"{c['code']} ({c['repair']})" for c in found["codes"]) or "no code"
        lines.append(f"{codes}: {found['title']} [{found['subject']}]")
        lines.append(f"  {' '.join(found['message'].split())}")
    named = [g for g in ticket.gpus if g.get("serial") or g.get("bus_id")]
    if named:
        lines += ["", "GPUs (index, model, serial, bus id):"]
        lines += [
            f"  {g['index']}: {g.get('name') or '?'}, serial {g.get('serial') or '?'}, "
            f"bus {g.get('bus_id') or '?'}"
            for g in named
        ]
    if ticket.kernel_log:
        lines += ["", "Kernel log (NVRM Xid lines since boot):"]
        lines += [f"  {line}" for line in ticket.kernel_log.splitlines()[:20]]
    lines += ["", "Evidence: ticket.json, records.jsonl and outputs/ in this archive."]
    return clean("\n".join(lines)) + "\n"


def ticket_files(ticket: NodeTicket) -> dict[str, bytes]:
    """The archive's files (name -> bytes), every text redacted; manifest and signature not
    included."""
    document = {
        "format": FORMAT,
        "node": ticket.node,
        "run": ticket.run,
        "host": ticket.host,
        "gpus": ticket.gpus,
        "faults": ticket.faults,
        "kernel_log": ticket.kernel_log,
        "bug_report": ticket.bug_report.as_dict()
        if ticket.bug_report
        else "not included: `hpcnet ticket --bug-report` runs it on the node (docs/repair.md)",
    }
    files = {
        SUMMARY: summary_text(ticket).encode(),
        "ticket.json": (json.dumps(_clean_data(document), indent=2) + "\n").encode(),
        "records.jsonl": "".join(
            clean(r.model_dump_json(exclude_none=True)) + "\n" for r in ticket.records
        ).encode(),
    }
    if ticket.kernel_log:
        files["kernel-log.txt"] = (clean(ticket.kernel_log) + "\n").encode()
    for digest, text in sorted(ticket.outputs.items()):
        files[f"outputs/{digest}.txt"] = clean(text).encode()
    if ticket.bug_report and ticket.bug_report.data:
        files[LOG] = redacted(ticket.bug_report.data, clean)
    return files


def manifest_digest(manifest: dict[str, str]) -> str:
    """The sha256 of the canonical manifest (what the signature signs)."""
    return hashlib.sha256(canonical_json(manifest)).hexdigest()


def _signature(manifest: dict[str, str], key_path: Path, passphrase: bytes | None) -> bytes:
    private_key = load_private_key(key_path, passphrase)
    public = private_key.public_key()
    raw = public.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    digest = manifest_digest(manifest)
    document = {
        "format": SIGNATURE_FORMAT,
        "algorithm": ALGORITHM,
        "digest": digest,
        "public_key": base64.b64encode(raw).decode("ascii"),
        "public_key_fingerprint": key_fingerprint(public),
        "signed_at": utc_now().isoformat(),
        "signature": base64.b64encode(private_key.sign(digest.encode())).decode("ascii"),
    }
    return (json.dumps(document, indent=2, sort_keys=True) + "\n").encode()


def write_ticket(
    run_dir: str | Path,
    node: str,
    out: str | Path,
    sign_key: str | Path | None,
    passphrase: bytes | None = None,
    bug_report: BugReport | None = None,
) -> Path:
    """Write the node's ticket archive (`.tar.gz`) to `out`, signed with `sign_key` (None:
    no `signature.json`, the manifest only), with `bug_report` when given; returns its
    path."""
    ticket = collect(run_dir, node)
    ticket.bug_report = bug_report
    files = ticket_files(ticket)
    manifest = {name: hashlib.sha256(data).hexdigest() for name, data in sorted(files.items())}
    files[MANIFEST] = (json.dumps(manifest, indent=2) + "\n").encode()
    if sign_key is not None:
        files[SIGNATURE] = _signature(manifest, Path(sign_key), passphrase)
    folder = f"ticket-{ticket.run['run_id']}-{node}"
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        for name, data in files.items():
            info = tarfile.TarInfo(f"{folder}/{name}")
            info.size, info.mode, info.mtime = len(data), 0o644, int(utc_now().timestamp())
            archive.addfile(info, io.BytesIO(data))
    target = Path(out)
    target.parent.mkdir(parents=True, exist_ok=True)
    _write_atomic(target, buffer.getvalue())
    return target


def read_ticket(path: str | Path) -> dict[str, bytes]:
    """The archive's files by name within its folder."""
    with tarfile.open(path, "r:gz") as archive:
        return {
            m.name.split("/", 1)[1]: archive.extractfile(m).read()  # type: ignore[union-attr]
            for m in archive.getmembers()
            if m.isfile()
        }


def verify_ticket(path: str | Path, public_key: str | Path | None = None) -> list[str]:
    """Problems with a ticket archive ([] when every file matches its manifest and the
    signature, by `public_key` when given, holds)."""
    files = read_ticket(path)
    manifest = json.loads(files.pop(MANIFEST, b"{}"))
    signed = SIGNATURE in files
    signature = json.loads(files.pop(SIGNATURE, b"{}"))
    problems = [
        f"{name}: does not match the manifest"
        for name, data in files.items()
        if manifest.get(name) != hashlib.sha256(data).hexdigest()
    ]
    problems += [f"{name}: missing" for name in manifest if name not in files]
    if not signed:
        return [*problems, "signature: missing (unsigned)"]
    digest = manifest_digest(manifest)
    if signature.get("digest") != digest:
        problems.append("signature: signs another manifest")
    raw = base64.b64decode(signature.get("public_key", ""))
    try:
        key = Ed25519PublicKey.from_public_bytes(raw)
        if public_key is not None:
            wanted = load_public_key(public_key)
            if key_fingerprint(wanted) != key_fingerprint(key):
                problems.append("signature: signed by another key")
        key.verify(base64.b64decode(signature.get("signature", "")), digest.encode())
    except (ValueError, InvalidSignature):
        problems.append("signature: does not verify")
    return problems


def add_command(sub: argparse._SubParsersAction) -> None:
    """Register `hpcnet ticket RUN NODE`."""
    found = sub.add_parser(
        COMMAND,
        help="a node's signed ticket archive for the cloud provider's support",
        description="Write what support asks for about one node (instance, host, GPUs and "
        "serials, fault codes, measurements, raw evidence, kernel log, summary.txt) from a "
        "run's evidence, signed; nothing runs on the node (docs/repair.md).",
    )
    found.add_argument("run_dir", type=Path, help="reports/<run-id>/")
    found.add_argument("node", help="the node's inventory name")
    found.add_argument("--sign-key", type=Path, required=True, help="Ed25519 private key")
    found.add_argument(
        "--out", type=Path, help="archive path (default ticket-<run-id>-<node>.tar.gz here)"
    )
    found.add_argument(
        "--inventory",
        type=Path,
        help="the run's inventory: its secrets and cloud credentials file are redacted too "
        "(the credentials file the run's inventory.yaml names is, without it)",
    )
    found.add_argument(
        "--bug-report",
        action="store_true",
        help=f"run nvidia-bug-report.sh on the node (over SSH, needs --inventory) and put its "
        f"{LOG}, redacted, in the archive",
    )
    found.add_argument(
        "--bug-report-timeout",
        type=float,
        default=TIMEOUT_S,
        metavar="S",
        help=f"stop nvidia-bug-report.sh after S seconds, keeping what it wrote "
        f"(default {TIMEOUT_S:g})",
    )


def node_bug_report(inventory: Any, node: str, timeout_s: float) -> BugReport:
    """`nvidia-bug-report.sh` on `node` over its SSH connection (ValueError: not a node of
    the inventory)."""
    from pytest_hpcnet.report.ticket_bug_report import collect_bug_report
    from pytest_hpcnet.transport.fanout import Transport

    if node not in {n.name for n in inventory.nodes}:
        raise ValueError(f"--bug-report: {node!r} is not a node of the inventory")
    transport = Transport(inventory, concurrency=1)
    try:
        return collect_bug_report(lambda cmd, limit: transport.run(node, cmd, limit), timeout_s)
    finally:
        transport.close()


def run(args: argparse.Namespace) -> int:
    """Carry out `hpcnet ticket`: 0 written, 2 nothing written."""
    if args.bug_report and args.inventory is None:
        print("hpcnet ticket: --bug-report runs on the node: give --inventory")
        return 2
    try:
        inventory = None
        if args.inventory is not None:
            from pytest_hpcnet.inventory.loader import InventoryError, load_inventory

            try:
                inventory = load_inventory(args.inventory)
            except InventoryError as exc:
                print(f"hpcnet ticket: {'; '.join(exc.problems)}")
                return 2
            if inventory.cloud.credentials_file:
                register_credentials(inventory.cloud.credentials_file)
        register_run_credentials(args.run_dir)
        summary = read_summary(args.run_dir) if args.run_dir.is_dir() else None
        run_id = summary.run_id if summary else "run"
        out = args.out or Path(f"ticket-{run_id}-{args.node}.tar.gz")
        collect(args.run_dir, args.node)  # the run and the node first: nothing runs in vain
        report = None
        if args.bug_report:
            report = node_bug_report(inventory, args.node, args.bug_report_timeout)
            print(f"nvidia-bug-report.sh on {args.node}: {report.note}")
        path = write_ticket(args.run_dir, args.node, out, args.sign_key, bug_report=report)
    except (OSError, ValueError) as exc:
        print(f"hpcnet ticket: {exc}")
        return 2
    print(f"wrote {path}: paste {SUMMARY} into the ticket and attach the archive")
    return 0
