"""fio sequential throughput against a shared filesystem, and the mount check.

Bandwidth in results is MB/s = 10^6 bytes/s (fio's own JSON `bw` is KiB/s,
`bw_bytes` bytes/s). fio 2.x prints `io_bytes` in KiB and `clat` in usec; fio 3.x
prints `io_bytes` in bytes (with `io_kbytes` beside it) and `clat_ns` in ns.
Completion latencies in results are microseconds.

Fail closed: a run interrupted by a signal (`fio: terminating on signal N` before the
JSON) or shorter than the time-based runtime asked (by the caller, or by the JSON's own
`runtime` + `time_based` job options) is an `error`, not a throughput. An output that is
not one whole run (a job `error` that is no integer, two JSON documents, text after the
JSON such as an io_u error line, one job listed twice) is `not_measured`. Never raises.
"""

from __future__ import annotations

import json
import math
import re
import shlex
from dataclasses import dataclass
from typing import Any

from pytest_hpcnet.probes.sections import Section
from pytest_hpcnet.probes.text import ascii_number, strip_ansi

# --------------------------------------------------------------------------- commands

_JOB_NAME_RE = re.compile(r"^[A-Za-z0-9_.-]+$")


@dataclass(frozen=True)
class FioJobSpec:
    """A sequential read or write job in `directory` (files named `<name>.<n>.<m>`)."""

    directory: str
    rw: str = "write"  # "read" or "write"
    name: str = "hpcnet-seq"
    bs: str = "1m"
    numjobs: int = 4
    size: str = "4g"  # per job
    runtime_s: int = 60
    iodepth: int = 16
    ioengine: str = "libaio"
    direct: bool = True
    extra_args: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.rw not in ("read", "write"):
            raise ValueError(f"fio rw must be 'read' or 'write', not {self.rw!r}")
        if not _JOB_NAME_RE.match(self.name):
            raise ValueError(f"fio job name must match {_JOB_NAME_RE.pattern}: {self.name!r}")
        if not self.directory:
            raise ValueError("fio needs a directory")


def fio_command(spec: FioJobSpec) -> str:
    """`fio` for one sequential job with group reporting and JSON output."""
    args = [
        "fio",
        f"--name={shlex.quote(spec.name)}",
        f"--directory={shlex.quote(spec.directory)}",
        f"--rw={spec.rw}",
        f"--bs={shlex.quote(spec.bs)}",
        f"--direct={1 if spec.direct else 0}",
        f"--ioengine={shlex.quote(spec.ioengine)}",
        f"--iodepth={int(spec.iodepth)}",
        f"--numjobs={int(spec.numjobs)}",
        f"--size={shlex.quote(spec.size)}",
        f"--runtime={int(spec.runtime_s)}",
        "--time_based",
        "--group_reporting",
        "--output-format=json",
    ]
    args += [shlex.quote(a) for a in spec.extra_args]
    return " ".join(args)


def fio_cleanup_command(spec: FioJobSpec) -> str:
    """Remove the job's data files (`<name>.*` directly in the directory) and nothing else."""
    return (
        f"find {shlex.quote(spec.directory)} -maxdepth 1 -type f "
        f"-name {shlex.quote(spec.name + '.*')} -delete"
    )


# --------------------------------------------------------------------------- fio results


@dataclass(frozen=True)
class FioDirection:
    """One direction (read or write) of one job."""

    io_bytes: int = 0
    bw_mb_s: float = 0.0  # 10^6 bytes/s
    iops: float = 0.0
    runtime_ms: int = 0
    clat_mean_us: float | None = None
    clat_p99_us: float | None = None


@dataclass(frozen=True)
class FioJob:
    """One entry of fio's `jobs` (one per job, or one per group with group_reporting)."""

    name: str
    error: int
    read: FioDirection
    write: FioDirection
    rw: str | None = None
    runtime_asked_s: float | None = None  # `runtime` of a `time_based` job, from its options

    @property
    def runtime_ms(self) -> int:
        """How long the job ran (the longer of its two directions)."""
        return max(self.read.runtime_ms, self.write.runtime_ms)


@dataclass(frozen=True)
class FioResult:
    """A fio JSON run: per job, and summed over jobs (run concurrently) in MB/s."""

    jobs: tuple[FioJob, ...] = ()
    read_bw_mb_s: float | None = None
    write_bw_mb_s: float | None = None
    fio_version: str | None = None
    preamble: tuple[str, ...] = ()  # text lines printed before the JSON
    problems: tuple[str, ...] = ()
    error: str | None = None
    not_measured: str | None = None
    """Why the output is not one whole fio run (a job's `error` that is no integer, two
    JSON documents, text after the JSON such as an io_u error line, one job counted twice):
    never a pass, never a failure; its figures are withheld."""

    @property
    def ok(self) -> bool:
        return self.error is None and self.not_measured is None and bool(self.jobs)


def _number(value: Any) -> float | None:
    """A finite number, else None (NaN/Infinity are caught first: see `_non_finite`)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        try:
            number = float(value)
        except OverflowError:  # an int past float's range: no figure
            return None
    elif isinstance(value, str):
        return ascii_number(value)  # `float("１２３")` would read full-width digits
    else:
        return None
    return number if math.isfinite(number) else None


MAX_BW_BYTES = 1e14
"""No one client moves more (100 TB/s): a bandwidth above it is a misread."""
_READ_KEYS = ("io_bytes", "io_kbytes", "bw_bytes", "bw", "iops", "runtime", "clat_ns", "clat")


def _non_finite(value: Any) -> bool:
    """NaN/Infinity (as JSON numbers or strings) anywhere in `value`."""
    if isinstance(value, dict):
        return any(_non_finite(v) for v in value.values())
    if isinstance(value, list):
        return any(_non_finite(v) for v in value)
    if isinstance(value, float):
        return not math.isfinite(value)
    if isinstance(value, str):
        return bool(re.fullmatch(r"\s*[-+]?(?:nan|inf(?:inity)?)\s*", value, re.I))
    return False


def _non_finite_cells(raw: dict[str, Any], name: str) -> list[str]:
    """`job X read.iops: nan` for each cell the parser reads that holds NaN/Infinity."""
    found = [f"job {name} error: {raw['error']!r}"] if _non_finite(raw.get("error")) else []
    for side in ("read", "write"):
        block = raw.get(side)
        if isinstance(block, dict):
            found += [
                f"job {name} {side}.{key}: non-finite value"
                for key in _READ_KEYS
                if _non_finite(block.get(key))
            ]
    return found


def _percentile(block: dict[str, Any], wanted: float) -> float | None:
    found = block.get("percentile")
    for key, value in (found if isinstance(found, dict) else {}).items():
        try:
            if abs(float(key) - wanted) < 1e-6:
                return _number(value)
        except ValueError:
            continue
    return None


def _direction(side: Any, problems: list[str], where: str) -> FioDirection:
    if not isinstance(side, dict):
        return FioDirection()
    fio3 = "io_kbytes" in side
    io = _number(side.get("io_bytes")) or 0.0
    io_bytes = int(io if fio3 else io * 1024)
    bw_bytes = _number(side.get("bw_bytes"))
    if bw_bytes is None:
        kib = _number(side.get("bw"))
        bw_bytes = kib * 1024 if kib is not None else None
    if bw_bytes is None or math.isnan(bw_bytes) or not 0 <= bw_bytes <= MAX_BW_BYTES:
        problems.append(f"{where}: unreadable bandwidth {side.get('bw')!r}")
        bw_bytes = math.nan
    clat_mean = clat_p99 = None
    if isinstance(side.get("clat_ns"), dict):
        block = side["clat_ns"]
        mean, p99 = _number(block.get("mean")), _percentile(block, 99.0)
        clat_mean = mean / 1000 if mean is not None else None
        clat_p99 = p99 / 1000 if p99 is not None else None
    elif isinstance(side.get("clat"), dict):
        block = side["clat"]
        clat_mean, clat_p99 = _number(block.get("mean")), _percentile(block, 99.0)
    return FioDirection(
        io_bytes=io_bytes,
        bw_mb_s=bw_bytes / 1e6,
        iops=_number(side.get("iops")) or 0.0,
        runtime_ms=int(_number(side.get("runtime")) or 0),
        clat_mean_us=clat_mean,
        clat_p99_us=clat_p99,
    )


RUNTIME_TOLERANCE = 0.05
"""A time-based job may end this fraction short of its runtime and still count as complete."""
_SIGNAL_RE = re.compile(r"^fio: terminating on signal \d+", re.M)


def _time_based_runtime(options: dict[str, Any], global_options: dict[str, Any]) -> float | None:
    """The `runtime` of a `time_based` job in seconds (fio's default unit), else None."""
    merged = {**global_options, **options}
    if "time_based" not in merged or str(merged["time_based"]) in ("0", "false"):
        return None
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h)?\s*", str(merged.get("runtime", "")))
    if not m:
        return None
    scale = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}[m.group(2) or "s"]
    return float(m.group(1)) * scale


def _short_jobs(jobs: list[FioJob], expected_runtime_s: float | None) -> str | None:
    """`job J ran 2.8 s of 30 s asked` for jobs that stopped early, else None."""
    short = []
    for job in jobs:
        asked = expected_runtime_s if expected_runtime_s is not None else job.runtime_asked_s
        if asked and job.runtime_ms < asked * 1000 * (1 - RUNTIME_TOLERANCE):
            short.append(f"job {job.name} ran {job.runtime_ms / 1000:.1f} s of {asked:g} s asked")
    return "; ".join(short) + " (run cut short?)" if short else None


def _job_error(value: Any) -> str | None:
    """Why a job's `error` is not fio's integer errno (0 on success), or None."""
    if isinstance(value, bool) or not isinstance(value, int):
        return f"error field {value!r} is not an integer"
    return None


def _not_one_run(raw_jobs: list[Any], after: list[str]) -> str | None:
    """Why the JSON is not one whole run: a job's unreadable `error`, a job listed twice,
    a second JSON document or any text after the JSON (an io_u error line)."""
    why: list[str] = []
    names: list[str] = []
    for i, raw in enumerate(raw_jobs):
        if not isinstance(raw, dict):
            continue
        name = str(raw.get("jobname", f"#{i}"))
        if (bad := _job_error(raw.get("error"))) is not None:
            why.append(f"job {name}: {bad}")
        names.append(name)
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        why.append(f"job {', '.join(twice)} counted twice in `jobs`")
    if any(ln.startswith("{") for ln in after):
        why.append("two JSON documents in one output (one run asked)")
    elif after:
        why.append(f"text after the JSON: {after[0][:120]}")
    return "; ".join(why) if why else None


def parse_fio_json(text: str, expected_runtime_s: float | None = None) -> FioResult:
    """Parse `fio --output-format=json` output, tolerating text lines before the JSON.

    `expected_runtime_s` is the time-based runtime the caller asked for; a job that ran
    shorter (or a run fio says it was interrupted), or a figure read as NaN/Infinity, is
    an `error`. Never raises.
    """
    text = strip_ansi(text if isinstance(text, str) else "")
    start = text.find("{")
    preamble = tuple(ln.strip() for ln in text[: max(start, 0)].splitlines() if ln.strip())
    if start < 0:
        lines = tuple(ln.strip() for ln in text.splitlines() if ln.strip())
        if lines:
            return FioResult(preamble=lines, error="\n".join(lines))
        return FioResult(error="unparseable output: empty output")
    try:
        data, end = json.JSONDecoder().raw_decode(text[start:])
    except (json.JSONDecodeError, RecursionError) as exc:
        if isinstance(exc, RecursionError):
            return FioResult(error="unparseable output: JSON nested too deep")
        if preamble:
            return FioResult(preamble=preamble, error="\n".join(preamble))
        return FioResult(error=f"unparseable output: invalid JSON ({exc.msg} at {exc.pos})")
    if not isinstance(data, dict) or not isinstance(data.get("jobs"), list) or not data["jobs"]:
        return FioResult(
            preamble=preamble,
            error="\n".join(preamble) or "unparseable output: JSON without jobs",
        )

    problems: list[str] = []
    non_finite: list[str] = []  # cells read as NaN/Infinity: never a figure
    jobs: list[FioJob] = []
    global_options = data.get("global options")
    global_options = global_options if isinstance(global_options, dict) else {}
    for i, raw in enumerate(data["jobs"]):
        if not isinstance(raw, dict):
            problems.append(f"job #{i}: not an object")
            continue
        name = str(raw.get("jobname", f"#{i}"))
        non_finite += _non_finite_cells(raw, name)
        options = raw.get("job options") if isinstance(raw.get("job options"), dict) else {}
        jobs.append(
            FioJob(
                name=name,
                error=raw["error"] if _job_error(raw.get("error")) is None else 0,
                read=_direction(raw.get("read"), problems, f"{name} read"),
                write=_direction(raw.get("write"), problems, f"{name} write"),
                rw=options.get("rw"),
                runtime_asked_s=_time_based_runtime(options, global_options),
            )
        )
    version = data.get("fio version")
    after = [ln.strip() for ln in text[start + end :].splitlines() if ln.strip()]
    other_run = _not_one_run(data["jobs"], after)
    if not jobs:
        return FioResult(
            fio_version=version,
            preamble=preamble,
            problems=tuple(problems),
            error="unparseable output: no readable job",
        )
    read_bw = sum(j.read.bw_mb_s for j in jobs)
    write_bw = sum(j.write.bw_mb_s for j in jobs)
    failed = [j for j in jobs if j.error]
    error: str | None = None
    problems += non_finite
    if non_finite:
        more = f" (+{len(non_finite) - 1} more)" if len(non_finite) > 1 else ""
        error = f"unparseable output: non-finite value in {non_finite[0]}{more}"
    elif failed:
        error = "\n".join(preamble) or "; ".join(f"job {j.name}: error={j.error}" for j in failed)
    elif math.isnan(read_bw) or math.isnan(write_bw):
        error = "unparseable output: " + "; ".join(problems)
    elif signal := _SIGNAL_RE.search(text):
        error = f"interrupted: {signal.group(0)} (the figures cover part of the run)"
    else:
        error = _short_jobs(jobs, expected_runtime_s)
    if other_run and not non_finite:
        return FioResult(
            jobs=tuple(jobs),
            fio_version=version,
            preamble=preamble,
            problems=tuple(problems),
            error=error if error and failed else None,
            not_measured=other_run,
        )
    return FioResult(
        jobs=tuple(jobs),
        read_bw_mb_s=None if math.isnan(read_bw) else read_bw,
        write_bw_mb_s=None if math.isnan(write_bw) else write_bw,
        fio_version=version,
        preamble=preamble,
        problems=tuple(problems),
        error=error,
    )


# --------------------------------------------------------------------------- mount check

DEFAULT_ALLOWED_FSTYPES: tuple[str, ...] = ("cpfs", "cpfs-nfs", "nfs", "alinas")
"""Filesystem types a CPFS / NAS mount may show (nfs3/nfs4 count as nfs, fuse.X as X)."""


@dataclass(frozen=True)
class MountInfo:
    """The mount holding a path."""

    target: str | None = None
    source: str | None = None
    fstype: str | None = None
    options: tuple[str, ...] = ()
    error: str | None = None


def normalize_fstype(fstype: str) -> str:
    """`nfs4`/`nfs3` -> `nfs`, `fuse.cpfs` -> `cpfs`, lower case."""
    name = fstype.strip().lower()
    if name.startswith("fuse."):
        name = name[len("fuse.") :]
    if re.fullmatch(r"nfs\d*", name):
        return "nfs"
    return name


def fstype_allowed(fstype: str | None, allowed: tuple[str, ...] = DEFAULT_ALLOWED_FSTYPES) -> bool:
    """Whether `fstype` is one of `allowed`, after normalization of both sides."""
    if not fstype:
        return False
    return normalize_fstype(fstype) in {normalize_fstype(a) for a in allowed}


def mount_check_command(path: str) -> str:
    """`findmnt -J -T PATH`, falling back to /proc/mounts where findmnt is missing."""
    return f"findmnt -J -T {shlex.quote(path)} 2>/dev/null || cat /proc/mounts"


def _unescape_mounts(field_text: str) -> str:
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), field_text)


def _under(path: str, target: str) -> bool:
    target = target.rstrip("/") or "/"
    return target == "/" or path == target or path.startswith(target + "/")


def parse_mount(text: str, path: str | None = None) -> MountInfo:
    """The mount of `path` from `findmnt -J [-T path]` JSON or `/proc/mounts` lines.

    With findmnt -T the single entry is the answer; with /proc/mounts (or several
    findmnt entries) the longest mount target containing `path` wins.
    """
    text = strip_ansi(text if isinstance(text, str) else "")
    entries: list[MountInfo] = []
    start = text.find("{")
    if start >= 0:
        try:
            data, _ = json.JSONDecoder().raw_decode(text[start:])
        except (json.JSONDecodeError, RecursionError):
            data = None
        found = data.get("filesystems") if isinstance(data, dict) else None
        stack = list(found) if isinstance(found, list) else []
        while stack:
            item = stack.pop(0)
            if not isinstance(item, dict):
                continue

            def text_of(key: str, item: dict = item) -> str | None:
                value = item.get(key)
                return value if isinstance(value, str) else None

            entries.append(
                MountInfo(
                    target=text_of("target"),
                    source=text_of("source"),
                    fstype=text_of("fstype"),
                    options=tuple(str(item.get("options") or "").split(","))
                    if item.get("options")
                    else (),
                )
            )
            children = item.get("children")
            stack.extend(children if isinstance(children, list) else [])
    if not entries:
        for line in text.splitlines():
            parts = line.split()
            if len(parts) >= 4 and parts[1].startswith("/"):
                entries.append(
                    MountInfo(
                        target=_unescape_mounts(parts[1]),
                        source=_unescape_mounts(parts[0]),
                        fstype=parts[2],
                        options=tuple(parts[3].split(",")),
                    )
                )
    if not entries:
        flat = " ".join(text.split())[:120]
        return MountInfo(error=flat or "unparseable output: empty output")
    if path is None:
        return entries[0]
    matching = [e for e in entries if e.target and _under(path, e.target)]
    if not matching:
        return MountInfo(error=f"no mount holds {path}")
    # Later mounts shadow earlier ones on the same target: take the last of the longest.
    longest = max(len(e.target or "") for e in matching)
    return [e for e in matching if len(e.target or "") == longest][-1]


@dataclass(frozen=True)
class MountListing:
    """`mount_check_command` output, read for the path a check asks about."""

    text: str

    def of(self, path: str | None) -> MountInfo:
        """The mount of `path` as the listing shows it."""
        return parse_mount(self.text, path)


CPFS_MOUNT: Section[MountListing] = Section(
    "cpfs_mount", MountListing, build=lambda node, expect: mount_check_command(expect.cpfs.mount)
)
