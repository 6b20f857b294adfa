"""The evidence bundle: one JSON line per finished check, raw outputs, a run summary.

Layout of one run folder (`reports/<run-id>/`)::

    evidence.jsonl        one `CheckRecord` per line, appended (written through to the kernel)
                          as each check ends, fsynced at most once a second and at close
    outputs/<sha256>.txt  raw command output (redacted, bounded), named by its own sha256
    summary.json          written by `EvidenceBundle.close()` at the end of the session

Everything written passes through `pytest_hpcnet.redact.redact`. Records are plain
JSON (`record.model_dump(mode="json")`), so xdist workers can ship them to the
controller, which alone appends them; `store_output` is safe from any process.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import shutil
import threading
import time
from collections.abc import Iterable, Mapping
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, BinaryIO

from pytest_hpcnet.inventory.models import Waiver  # noqa: F401 - re-exported
from pytest_hpcnet.redact import has_secrets, mentions_secret, redact
from pytest_hpcnet.report.records import (  # noqa: F401 - re-exported
    VERDICTS,
    CheckRecord,
    CommandRecord,
    Comparison,
    Measurement,
    OverallVerdict,
    RecordVerdict,
    RunSummary,
)
from pytest_hpcnet.report.verdict import (  # noqa: F401 - re-exported
    check_verdict,
    count_verdicts,
    effective_verdict,
    overall_verdict,
    run_date,
    run_date_of,
    scope_of,
)

EVIDENCE_FILE = "evidence.jsonl"
SUMMARY_FILE = "summary.json"
OUTPUTS_DIR = "outputs"
MAX_OUTPUT_BYTES = 4 * 1024 * 1024


def node_list_sha256(names: Iterable[str]) -> str:
    """The digest of a cluster's node list, in its order (one name a line)."""
    return hashlib.sha256("".join(f"{n}\n" for n in names).encode("utf-8")).hexdigest()


def cluster_node_facts(cluster: Iterable[str], covered: Iterable[str]) -> dict[str, Any]:
    """The summary's `cluster_nodes` (with digest and count) and `partition_nodes`: the
    whole cluster's node list and the share of it a run covered."""
    names = list(cluster)
    return {
        "cluster_nodes": names,
        "cluster_nodes_sha256": node_list_sha256(names),
        "cluster_node_count": len(names),
        "partition_nodes": list(covered),
    }


class EvidenceError(ValueError):
    """The evidence file cannot be read (a damaged line other than the last)."""


def utc_now() -> datetime:
    """The current time, timezone-aware UTC."""
    return datetime.now(timezone.utc)


def new_run_id(now: datetime | None = None) -> str:
    """A run id such as `20261130-052750-ab12`: UTC time plus four random hex digits."""
    moment = (now or utc_now()).astimezone(timezone.utc)
    return f"{moment:%Y%m%d-%H%M%S}-{secrets.token_hex(2)}"


def sha256_file(path: Path) -> str:
    """The hex sha256 of a file's bytes."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


SYNC_INTERVAL_S = 1.0
"""evidence.jsonl is fsynced at most this often while a run appends (and at close): each
record is written to the kernel at once, so a killed run keeps it; only a host crash can lose
the last second (thousands of fsyncs cost seconds on a disk at 256 nodes)."""


def redact_data(data: Any) -> Any:
    """`data` (JSON-able) with `redact()` applied to every string, keys included."""
    if isinstance(data, str):
        return redact(data)
    if isinstance(data, Mapping):
        return {redact(str(key)): redact_data(value) for key, value in data.items()}
    if isinstance(data, list | tuple):
        return [redact_data(item) for item in data]
    return data


def bound_output(text: str, limit: int = MAX_OUTPUT_BYTES) -> str:
    """`text` cut to about `limit` UTF-8 bytes, keeping head and tail around a note."""
    raw = text.encode("utf-8")
    if len(raw) <= limit:
        return text
    half = limit // 2
    head = raw[:half].decode("utf-8", errors="ignore")
    tail = raw[-half:].decode("utf-8", errors="ignore")
    note = f"\n[hpcnet: output truncated: kept the first and last {half} of {len(raw)} bytes]\n"
    return head + note + tail


def _write_atomic(path: Path, data: bytes) -> None:
    """Write `data` to `path` through a temporary file, fsync and rename."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    with open(tmp, "wb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)


def evidence_line(record: CheckRecord | Mapping[str, Any]) -> str:
    """The record's line of `evidence.jsonl`: validated, every string redacted, compact JSON
    (made once per check, where its report is made, and appended as is)."""
    if not isinstance(record, CheckRecord):
        record = CheckRecord.model_validate(record)
    data = record.model_dump(mode="json")
    text = json.dumps(data, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    if has_secrets() and mentions_secret(text):  # else no string of it holds one
        data = redact_data(data)
        text = json.dumps(data, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    return text + "\n"


class EvidenceBundle:
    """One run's evidence folder; appends survive an interrupted run."""

    def __init__(self, run_dir: str | os.PathLike[str], run_id: str | None = None) -> None:
        self.run_dir = Path(run_dir)
        self.run_id = run_id or self.run_dir.name
        self.outputs_dir.mkdir(parents=True, exist_ok=True)
        self.started_at = utc_now()
        self._lock = threading.Lock()
        self._handle: BinaryIO | None = None
        self._synced_at: float | None = None
        self._stored: dict[tuple[str, int], str] = {}
        """Digest of each text stored: every check of a node records the same facts output."""
        self.closed_records: list[CheckRecord] | None = None
        """The records `close` read back and judged the run on."""

    @classmethod
    def create(
        cls, reports_dir: str | os.PathLike[str] = "reports", run_id: str | None = None
    ) -> EvidenceBundle:
        """A new bundle at `<reports_dir>/<run_id>/` (a fresh run id when none is given)."""
        run_id = run_id or new_run_id()
        return cls(Path(reports_dir) / run_id, run_id=run_id)

    @property
    def evidence_path(self) -> Path:
        return self.run_dir / EVIDENCE_FILE

    @property
    def outputs_dir(self) -> Path:
        return self.run_dir / OUTPUTS_DIR

    def output_path(self, digest: str) -> Path:
        """Where the output with this digest is stored."""
        return self.outputs_dir / f"{digest}.txt"

    def store_output(self, text: str | bytes, limit: int = MAX_OUTPUT_BYTES) -> str:
        """Store raw output (decoded, redacted, bounded); return the sha256 naming it."""
        if isinstance(text, bytes):
            text = text.decode("utf-8", errors="replace")
        known = self._stored.get((text, limit))
        if known is not None:
            return known
        data = bound_output(redact(text), limit).encode("utf-8")
        digest = hashlib.sha256(data).hexdigest()
        path = self.output_path(digest)
        if not path.exists():
            _write_atomic(path, data)
        self._stored[(text, limit)] = digest
        return digest

    def append(self, record: CheckRecord | Mapping[str, Any]) -> CheckRecord:
        """Append one record to `evidence.jsonl`, written to the kernel before returning
        (fsynced when the last sync is `SYNC_INTERVAL_S` old; `close` syncs the rest)."""
        if not isinstance(record, CheckRecord):
            record = CheckRecord.model_validate(record)
        self.append_line(evidence_line(record))
        return record

    def append_line(self, line: str) -> None:
        """Append one line made by `evidence_line` (written through and synced like `append`)."""
        data = line.encode("utf-8")
        with self._lock:
            if self._handle is None:
                self._handle = open(self.evidence_path, "ab")  # noqa: SIM115 (kept open)
            self._handle.write(data)
            self._handle.flush()
            now = time.monotonic()
            if self._synced_at is None or now - self._synced_at >= SYNC_INTERVAL_S:
                os.fsync(self._handle.fileno())
                self._synced_at = now

    def sync(self) -> None:
        """fsync evidence.jsonl and close the appending handle (a later append reopens it)."""
        with self._lock:
            if self._handle is not None:
                os.fsync(self._handle.fileno())
                self._handle.close()
                self._handle, self._synced_at = None, None

    def records(self) -> list[CheckRecord]:
        """The records appended so far."""
        return read_records(self.run_dir)

    def close(self, summary: RunSummary | Mapping[str, Any] | None = None) -> RunSummary:
        """Write `summary.json`: the given facts (cluster, inventory/expectations sha256,
        unreachable_nodes, ...) plus run id, end time, counts and the overall verdict."""
        if isinstance(summary, RunSummary):
            given = summary.model_dump(exclude_unset=True)
        else:
            given = dict(summary or {})
        given.setdefault("run_id", self.run_id)
        given.setdefault("started_at", self.started_at)
        given.setdefault("ended_at", utc_now())
        result = RunSummary.model_validate(given)
        self.sync()
        records = self.closed_records = self.records()
        on = run_date_of(result, records)
        result.counts = count_verdicts(records, on)
        result.scope = scope_of(records, result.scope, on)
        result.verdict = overall_verdict(
            records, result.unreachable_nodes, on, result.interrupted, result.scope
        )
        data = redact_data(result.model_dump(mode="json"))
        text = json.dumps(data, ensure_ascii=False, indent=2, sort_keys=True) + "\n"
        _write_atomic(self.run_dir / SUMMARY_FILE, text.encode("utf-8"))
        return result


_PARSED: dict[Path, tuple[bytes, tuple[CheckRecord, ...]]] = {}
_PARSED_KEEP = 4
_PARSED_LOCK = threading.Lock()


def read_records(run_dir: str | os.PathLike[str]) -> list[CheckRecord]:
    """Every record of a run folder (or of an `evidence.jsonl` path).

    A damaged last line (the run was killed mid-write) is ignored; a damaged line
    elsewhere raises `EvidenceError`. A file whose bytes are those last read (by digest,
    never by timestamp) is not parsed again: the bundle's close, the certificate and its
    evidence page read one run's records once. Each call returns its own list.
    """
    path = Path(run_dir)
    if path.is_dir():
        path = path / EVIDENCE_FILE
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return []
    key, stamp = path.resolve(), hashlib.blake2b(data, digest_size=32).digest()
    with _PARSED_LOCK:
        found = _PARSED.get(key)
    if found is not None and found[0] == stamp:
        return list(found[1])
    records = _parse_records(path, data)
    with _PARSED_LOCK:
        _PARSED[key] = (stamp, tuple(records))
        while len(_PARSED) > _PARSED_KEEP:
            _PARSED.pop(next(iter(_PARSED)))
    return records


def _parse_records(path: Path, data: bytes) -> list[CheckRecord]:
    lines = data.split(b"\n")
    records: list[CheckRecord] = []
    last = max((i for i, line in enumerate(lines) if line.strip()), default=-1)
    for index, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            records.append(CheckRecord.model_validate_json(line))
        except ValueError as exc:
            if index == last:
                break
            raise EvidenceError(f"{path}: line {index + 1} is not a valid record: {exc}") from exc
    return records


def read_summary(run_dir: str | os.PathLike[str]) -> RunSummary | None:
    """The run's `summary.json`, or None where the run never closed."""
    path = Path(run_dir) / SUMMARY_FILE
    if not path.exists():
        return None
    return RunSummary.model_validate_json(path.read_bytes())


INVENTORY_COPY = "inventory.yaml"
"""The run's inventory as written, secrets redacted: a file of the bundle, so signed."""


def write_inventory_copy(run_dir: str | os.PathLike[str], text: str) -> Path:
    """Put the inventory's text, redacted, into the bundle as `inventory.yaml`."""
    path = Path(run_dir) / INVENTORY_COPY
    _write_atomic(path, redact(text).encode("utf-8"))
    return path


def read_output(run_dir: str | os.PathLike[str], digest: str) -> str | None:
    """The stored output with this digest, or None where it is absent."""
    if not digest or not all(c in "0123456789abcdef" for c in digest):
        return None
    path = Path(run_dir) / OUTPUTS_DIR / f"{digest}.txt"
    return path.read_text(encoding="utf-8", errors="replace") if path.exists() else None


def merge_bundles(
    controller_dir: str | os.PathLike[str], worker_dirs: Iterable[str | os.PathLike[str]]
) -> EvidenceBundle:
    """Fold worker bundles into the controller's: outputs copied, records appended."""
    bundle = EvidenceBundle(controller_dir)
    for worker_dir in worker_dirs:
        worker = Path(worker_dir)
        for output in sorted((worker / OUTPUTS_DIR).glob("*.txt")):
            target = bundle.outputs_dir / output.name
            if not target.exists():
                shutil.copyfile(output, target)
        for record in read_records(worker):
            bundle.append(record)
    bundle.sync()
    return bundle
