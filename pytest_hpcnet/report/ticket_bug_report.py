"""`hpcnet ticket --bug-report`: NVIDIA's `nvidia-bug-report.sh` run on the node, into the
ticket bundle.

The script runs as root in a fresh folder under `/var/tmp`, bounded by `timeout` (it can
hang on a sick GPU; whatever it wrote by then is kept, marked incomplete), and its
`nvidia-bug-report.log.gz` comes back base64-encoded over the node's SSH connection, up to
`MAX_BYTES` (a larger one stays on the node, its path said). In the bundle it is the same
name, gzip-compressed, its text redacted as every other file of the bundle is; the bundle's
`summary.txt` does not change.
"""

from __future__ import annotations

import base64
import binascii
import gzip
import shlex
import zlib
from collections.abc import Callable
from dataclasses import dataclass

from pytest_hpcnet.transport.results import CommandResult

LOG = "nvidia-bug-report.log.gz"
MARK = "hpcnet-bug-report:"
TIMEOUT_S = 600.0
"""NVIDIA: the script usually runs in seconds and may hang; ten minutes at most here."""
MAX_BYTES = 6 * 1024 * 1024
"""The largest report fetched (its base64 stays under the transport's 8 MiB of output)."""
SLACK_S = 60.0
Run = Callable[[str, float], CommandResult]
"""Run one command on the node: (command, timeout_s) -> its result."""


@dataclass
class BugReport:
    """What `--bug-report` got: the compressed log (None: none), and what happened."""

    data: bytes | None
    exit_status: int | None
    note: str
    seconds: float = 0.0
    size: int = 0

    @property
    def timed_out(self) -> bool:
        return self.exit_status == 124

    def as_dict(self) -> dict:
        """What ticket.json says of it."""
        return {
            "file": LOG if self.data else None,
            "exit_status": self.exit_status,
            "timed_out": self.timed_out,
            "seconds": round(self.seconds, 1),
            "bytes_on_node": self.size,
            "note": self.note,
        }


def bug_report_command(timeout_s: float = TIMEOUT_S, max_bytes: int = MAX_BYTES) -> str:
    """The shell command: the script in a fresh folder, bounded; one line `hpcnet-bug-report:
    STATUS BYTES FOLDER`, then the log in base64 when it is at most `max_bytes` (the folder
    removed), else nothing more (the folder kept for a person to fetch)."""
    limit = shlex.quote(f"{timeout_s:g}")
    return (
        'd=$(mktemp -d /var/tmp/hpcnet-bug-report.XXXXXX) || exit 1; cd "$d" || exit 1; '
        f"timeout -k 10 {limit} nvidia-bug-report.sh >/dev/null 2>&1; rc=$?; "
        f'f="$d/{LOG}"; n=$(wc -c < "$f" 2>/dev/null || echo 0); '
        f'echo "{MARK} $rc $n $d"; '
        f'if [ "$n" -gt 0 ] && [ "$n" -le {max_bytes} ]; then base64 "$f"; cd /; rm -rf "$d"; '
        'elif [ "$n" -eq 0 ]; then cd /; rm -rf "$d"; fi; exit 0'
    )


def parse_bug_report(stdout: str) -> BugReport:
    """The command's output as a `BugReport` (never raises)."""
    head, _, body = stdout.partition("\n")
    words = head.split(maxsplit=3)
    if len(words) != 4 or words[0] != MARK or not all(w.isdigit() for w in words[1:3]):
        return BugReport(None, None, f"no report: unexpected output {head[:80]!r}")
    status, size, folder = int(words[1]), int(words[2]), words[3]
    if size == 0:
        why = "timed out before writing it" if status == 124 else f"exited {status}, no log"
        return BugReport(None, status, f"no report: nvidia-bug-report.sh {why}")
    if not body.strip():
        note = f"{size} bytes, more than fetched: left on the node in {folder}"
        return BugReport(None, status, note, size=size)
    try:
        data = base64.b64decode("".join(body.split()), validate=True)
    except (binascii.Error, ValueError):
        return BugReport(None, status, "no report: its base64 did not decode", size=size)
    if len(data) != size:
        note = f"no report: {len(data)} of its {size} bytes came back"
        return BugReport(None, status, note, size=size)
    late = ", timed out: incomplete" if status == 124 else ""
    return BugReport(data, status, f"{size} bytes from the node{late}", size=size)


def collect_bug_report(run: Run, timeout_s: float = TIMEOUT_S) -> BugReport:
    """Run the script on the node through `run` and fetch its log."""
    result = run(bug_report_command(timeout_s), timeout_s + SLACK_S)
    if not result.stdout.startswith(MARK):
        return BugReport(None, result.exit_status, f"no report: {result.failure or 'no output'}")
    found = parse_bug_report(result.stdout)
    if result.truncated and found.data is None:
        found.note += " (output cut by the transport)"
    found.seconds = result.duration_s
    return found


def _inflate(data: bytes) -> bytes:
    """Every gzip member's text (the script appends one per section), as far as it goes: a
    log cut by the timeout gives what was written."""
    out, rest = [], data
    while rest:
        inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
        try:
            out.append(inflater.decompress(rest))
        except zlib.error:
            break
        rest = inflater.unused_data
    return b"".join(out)


def redacted(data: bytes, clean: Callable[[str], str]) -> bytes:
    """The log with `clean` applied to its text, compressed again (one gzip member)."""
    text = _inflate(data).decode("utf-8", "surrogateescape")
    return gzip.compress(clean(text).encode("utf-8", "surrogateescape"), mtime=0)
