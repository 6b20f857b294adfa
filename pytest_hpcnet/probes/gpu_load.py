"""GPUs under load: the load command, its engines, and pure parsers of what it prints.

One command per node loads all its GPUs at once: the load program (`gpu_load_program.py`,
PyTorch) runs one child per GPU while `nvidia-smi --query-gpu=... -lms` samples clocks,
power, temperature and clock-event reasons (both bounded by the node's `timeout`). Its
output is two sections framed like the facts (`@@hpcnet begin|end NAME`): `gpu_load` (the
program) and `gpu_samples` (nvidia-smi). The engines a node has are found once, in the
facts round trip (`ENGINES_COMMAND`). Parsers never raise: what they cannot read is an
`error` or a `problems` line of the result.
"""

from __future__ import annotations

import math
import re
import shlex
import statistics
from dataclasses import dataclass, field
from pathlib import Path

from pytest_hpcnet.probes.gpu import CLOCK_EVENT_BITS, OLD_NAMES, value_or_none
from pytest_hpcnet.probes.sections import MARK, Section, on_gpu

PROGRAM = Path(__file__).parent / "remote" / "gpu_load_program.py"
PROGRAM_FORMAT = "hpcnet-gpu-load 1"
SAMPLE_FIELDS = (
    "index",
    "pci.bus_id",
    "serial",
    "clocks.sm",
    "power.draw",
    "temperature.gpu",
    "clocks_event_reasons.active",
)
SAMPLE_MS = 500
SLOWDOWN_BITS = {0x8, 0x20, 0x40, 0x80}
"""hw_slowdown, sw_thermal_slowdown, hw_thermal_slowdown, hw_power_brake_slowdown (nvml.h)."""
POWER_CAP_BIT = 0x4

ENGINES_COMMAND = (
    'python3 -c "import importlib.util as u, importlib.metadata as m\n'
    "for p in ('torch', 'cupy'):\n"
    "    s = u.find_spec(p)\n"
    "    v = '-'\n"
    "    if s is not None:\n"
    "        try: v = m.version(p)\n"
    "        except Exception: v = 'unknown'\n"
    "    print('python', p, v if s is not None else 'missing')\" 2>&1"
    " || echo 'python python3 missing'; "
    "for t in nvbandwidth dcgmi all_reduce_perf; do "
    'p=$(command -v "$t" 2>/dev/null) && echo "tool $t $p" || echo "tool $t missing"; done; '
    "command -v dcgmi >/dev/null 2>&1 && timeout 20 dcgmi --version 2>/dev/null"
    " | sed -n 's/^dcgmi *version: *\\([^ ]*\\).*/version dcgmi \\1/p' | head -n 1; "
    "command -v nvbandwidth >/dev/null 2>&1 && timeout 20 nvbandwidth -h 2>/dev/null"
    " | sed -n 's/^nvbandwidth Version: *\\([^ ]*\\).*/version nvbandwidth \\1/p' | head -n 1; true"
)
"""One line per engine: `python torch 2.5.1`, `python cupy missing`, `tool dcgmi /usr/bin/dcgmi`,
and `version dcgmi 3.3.9` (`dcgmi --version`), `version nvbandwidth v0.10.0` (the first line
of `nvbandwidth -h`, printed before any CUDA call). torch's version from package metadata:
nothing is imported, so the facts pay no CUDA start-up. all_reduce_perf prints its version
only when it runs (the single-node run's records carry it)."""
VERSION_KEYS = {"torch": "torch", "dcgmi": "dcgm", "nvbandwidth": "nvbandwidth"}
"""Engine -> the `tool_versions` key its version is recorded under."""


@dataclass(frozen=True)
class Engines:
    """The load engines a node has (name -> version or path)."""

    found: dict[str, str] = field(default_factory=dict)
    missing: tuple[str, ...] = ()
    error: str | None = None
    versions: dict[str, str] = field(default_factory=dict)
    """`tool_versions` key (`torch`, `dcgm`, `nvbandwidth`) -> the version the node reported."""

    def has(self, name: str) -> bool:
        return name in self.found


def parse_engines(text: str) -> Engines:
    """Read `ENGINES_COMMAND`'s lines; an output with none of them is an error."""
    found: dict[str, str] = {}
    missing: list[str] = []
    versions: dict[str, str] = {}
    for line in text.splitlines():
        words = line.split()
        if len(words) == 3 and words[0] == "version" and words[1] in VERSION_KEYS:
            versions.setdefault(VERSION_KEYS[words[1]], words[2])
        elif len(words) == 3 and words[0] in ("python", "tool"):
            name, value = words[1], words[2]
            (missing.append(name) if value == "missing" else found.__setitem__(name, value))
    if not found and not missing:
        return Engines(error="no engine line in the output")
    if "torch" in found:
        versions = {"torch": found["torch"], **versions}
    return Engines(found, tuple(missing), versions=versions)


def load_command(
    gpus: int,
    seconds: float,
    size: int = 8192,
    copy_mib: int = 1024,
    affinity: dict[int, str] | None = None,
) -> str:
    """Load all `gpus` GPUs of the node at once for about `seconds`, sampling nvidia-smi
    every SAMPLE_MS, each GPU's child on its `affinity` CPUs (`topo -m`'s `0-47,96-143`);
    the program's file is removed afterwards, also when it fails."""
    program = PROGRAM.read_text()
    sampler_s = int(seconds * 2 + 150)
    fields = ",".join(SAMPLE_FIELDS)
    old_fields = ",".join(OLD_NAMES.get(f, f) for f in SAMPLE_FIELDS)
    args = f"--gpus {int(gpus)} --seconds {seconds:g} --size {int(size)} --copy-mib {int(copy_mib)}"
    near = ";".join(
        f"{i}={cpus}"
        for i, cpus in sorted((affinity or {}).items())
        if re.fullmatch(r"[0-9,-]+", cpus or "")
    )
    if near:
        args += f" --affinity {shlex.quote(near)}"
    return "\n".join(
        [
            "d=$(mktemp -d /tmp/hpcnet-gpu-load.XXXXXX) || exit 1",
            "trap 'rm -rf \"$d\"' EXIT",
            "cat >\"$d/load.py\" <<'HPCNET_GPU_LOAD_EOF'",
            program.rstrip("\n"),
            "HPCNET_GPU_LOAD_EOF",
            # drivers before R535 know clocks_event_reasons only as clocks_throttle_reasons
            f"f={shlex.quote(fields)}; nvidia-smi --query-gpu=$f --format=csv,noheader "
            f"-i 0 >/dev/null 2>&1 || f={shlex.quote(old_fields)}",
            f'timeout {sampler_s} nvidia-smi --query-gpu="$f" '
            f'--format=csv,noheader,nounits -lms {SAMPLE_MS} >"$d/smi" 2>&1 &',
            "s=$!",
            f'timeout -k 10 {int(seconds * 2 + 120)} python3 "$d/load.py" {args} >"$d/out" 2>&1',
            "rc=$?",
            'kill "$s" 2>/dev/null; wait "$s" 2>/dev/null',
            *(
                f"echo '{MARK} begin {name}'; cat \"$d/{file}\"; echo; "
                f'echo "{MARK} end {name} {status}"'
                for name, file, status in (("gpu_load", "out", "$rc"), ("gpu_samples", "smi", 0))
            ),
        ]
    )


# -- the program's output --------------------------------------------------------------------

NUMBERS = ("bf16_tflops", "tf32_tflops", "hbm_gbs", "h2d_gbs", "d2h_gbs")


@dataclass(frozen=True)
class GpuLoad:
    """One GPU's figures under load, or its error."""

    index: int
    engine: str | None = None
    version: str | None = None
    cuda: str | None = None
    bf16_tflops: float | None = None
    tf32_tflops: float | None = None
    hbm_gbs: float | None = None
    h2d_gbs: float | None = None
    d2h_gbs: float | None = None
    checksum: str | None = None
    checksum_stable: bool | None = None
    cpus: str | None = None
    """The CPUs its child ran on (`any`, `not-applied`, or topo -m's list)."""
    error: str | None = None

    def figure(self, name: str) -> float | None:
        return getattr(self, name)


@dataclass(frozen=True)
class LoadRun:
    """What the load program printed on one node."""

    gpus: tuple[GpuLoad, ...] = ()
    expected: int | None = None
    seconds: float | None = None
    complete: bool = False
    """The `end` line was printed: the program ran to its end."""
    error: str | None = None

    def gpu(self, index: int) -> GpuLoad | None:
        return next((g for g in self.gpus if g.index == index), None)

    @property
    def engine(self) -> str:
        """`torch 2.5.1 (CUDA 12.4)` as the GPUs reported it, or `?`."""
        seen = sorted({(g.engine, g.version, g.cuda) for g in self.gpus if g.engine})
        return ", ".join(f"{e} {v} (CUDA {c})" for e, v, c in seen) or "?"


def _float(value: str | None) -> float | None:
    """A finite decimal in ASCII digits, else None (`nan`, `inf`, `1e300`, words and a
    full-width "７８６", which float() would read, are not figures)."""
    if value is None or not re.fullmatch(r"-?[0-9]+(?:\.[0-9]+)?", value):
        return None
    number = float(value)
    return number if math.isfinite(number) else None


def _gpu_line(line: str) -> GpuLoad | None:
    pairs = dict(w.split("=", 1) for w in line.split() if "=" in w)
    if not re.fullmatch(r"[0-9]+", pairs.get("gpu", "")):  # not a full-width "４"
        return None
    index = int(pairs["gpu"])
    if "error" in pairs:
        return GpuLoad(index, error=pairs["error"].replace("_", " "))
    numbers = {k: _float(pairs.get(k)) for k in NUMBERS}
    unread = [k for k, v in numbers.items() if v is None]
    stable = {"yes": True, "no": False}.get(pairs.get("checksum_stable", ""))
    checksum = pairs.get("checksum")
    if checksum is not None and not re.fullmatch(r"[0-9a-f]{8,64}", checksum):
        unread.append("checksum")
        checksum = None
    return GpuLoad(
        index,
        engine=pairs.get("engine"),
        version=pairs.get("version"),
        cuda=pairs.get("cuda"),
        checksum=checksum,
        checksum_stable=stable,
        cpus=pairs.get("cpus"),
        error=f"unreadable: {', '.join(unread)}" if unread else None,
        **numbers,
    )


def _blank_tail(lines: list[str]) -> int:
    """How many blank lines end `lines`."""
    count = 0
    for line in reversed(lines):
        if line.strip():
            break
        count += 1
    return count


def parse_load(text: str, status: int | None = 0) -> LoadRun:
    """Read the program's output (`status` None: the section was cut short)."""
    lines = text.splitlines()
    head = next((x for x in lines if x.startswith(PROGRAM_FORMAT)), None)
    if head is None:
        tail = next((x for x in reversed(lines) if x.strip()), "no output")
        return LoadRun(error=f"the load program did not start: {tail.strip()[:200]}")
    words = dict(w.split("=", 1) for w in head.split() if "=" in w)
    expected = int(words["gpus"]) if re.fullmatch(r"[0-9]+", words.get("gpus", "")) else None
    found = [g for g in (_gpu_line(x) for x in lines) if g is not None]
    gpus = {g.index: g for g in found}
    ends = [i for i, x in enumerate(lines) if x.startswith("end gpus=")]
    complete = len(ends) == 1 and len(lines[: ends[0]]) == len(lines) - 1 - _blank_tail(lines)
    twice = sorted({g.index for g in found if sum(1 for x in found if x.index == g.index) > 1})
    error = None
    if status is None or not ends:
        error = "the load program's output was cut short (no end line)"
    elif not complete:
        after = next((x.strip() for x in lines[ends[-1] + 1 :] if x.strip()), "a second end line")
        error = f"text after the load program's end line: {after[:160]}"
    elif sum(1 for x in lines if x.startswith(PROGRAM_FORMAT)) > 1 or twice:
        complete = False
        error = f"the load program's output holds GPU {', '.join(map(str, twice))} twice"
    elif expected is not None and words.get("gpus") != lines[ends[0]].split()[1][5:]:
        complete = False
        error = "the load program's end line names another GPU count than its start"
    elif expected is not None and len(gpus) < expected:
        error = f"the load program reported {len(gpus)} of {expected} GPUs"
    return LoadRun(
        gpus=tuple(gpus[i] for i in sorted(gpus)),
        expected=expected,
        seconds=_float(words.get("seconds")),
        complete=complete,
        error=error,
    )


# -- nvidia-smi samples ----------------------------------------------------------------------


@dataclass(frozen=True)
class GpuSamples:
    """One GPU's nvidia-smi samples during the load, summarised."""

    index: int
    bus_id: str | None
    serial: str | None
    count: int
    busy: int
    """Samples without `gpu_idle`: the figures below are theirs (all samples when none)."""
    sm_mhz_median: float | None
    sm_mhz_min: float | None
    power_w_max: float | None
    temperature_c_max: float | None
    events: int
    """All clock-event reason bits seen in any sample (OR)."""
    unreadable: dict[str, str] = field(default_factory=dict)
    """Field (`temperature.gpu`, `clocks_event_reasons.active`, ...) -> `2 of 3 samples`, those
    whose value could not be read (`[N/A]`, `[Not Supported]`, not a number): that figure of that
    GPU is not measured, never "none" or a maximum over what happened to be readable."""

    def event_names(self, bits: set[int] | None = None) -> tuple[str, ...]:
        return tuple(
            name
            for bit, name in CLOCK_EVENT_BITS.items()
            if self.events & bit and (bits is None or bit in bits)
        )


@dataclass(frozen=True)
class LoadSamples:
    """Every GPU's samples, and the lines that could not be read."""

    gpus: tuple[GpuSamples, ...] = ()
    problems: tuple[str, ...] = ()
    error: str | None = None

    def gpu(self, index: int) -> GpuSamples | None:
        return next((g for g in self.gpus if g.index == index), None)


def _number(value: str) -> float | None:
    """A positive figure in ASCII digits (a full-width "９９" is not one, though float() reads
    it; under load 0 MHz, 0 W or 0 C is a sensor that did not answer, not a reading)."""
    value = value_or_none(value) or ""
    m = re.fullmatch(r"([0-9]+(?:\.[0-9]+)?)(?:\s*[A-Za-z]+)?", value)
    number = float(m.group(1)) if m else None
    return number if number is not None and 0 < number < 1e6 else None


def _mask(value: str) -> int | None:
    value = value.strip()
    return int(value, 0) if re.fullmatch(r"0x[0-9A-Fa-f]+|[0-9]+", value) else None


def parse_samples(text: str) -> LoadSamples:
    """Read `--query-gpu=SAMPLE_FIELDS --format=csv,noheader,nounits -lms` lines."""
    rows: dict[int, list[list[str]]] = {}
    problems: list[str] = []
    order: list[int] = []
    seen = 0
    lines = [x for x in text.splitlines() if x.strip()]
    for n, line in enumerate(lines):
        cells = [c.strip() for c in line.split(",")]
        if len(cells) != len(SAMPLE_FIELDS) or not re.fullmatch(r"[0-9]+", cells[0]):
            short = len(cells) < len(SAMPLE_FIELDS) and n == len(lines) - 1 and rows
            if not short and len(problems) < 5:  # a last row cut as the sampler was stopped
                problems.append(f"unreadable sample line: {line.strip()[:120]}")
            continue
        index = int(cells[0])
        if index not in order and seen == len(order):
            order.append(index)  # the first round: every GPU once, in nvidia-smi's order
        elif order[seen % len(order)] != index and len(problems) < 5:
            problems.append(f"sample rows out of order (a row repeated or lost): {line[:80]}")
        seen += 1
        rows.setdefault(index, []).append(cells)
    if not rows:
        tail = problems[0] if problems else "no samples"
        return LoadSamples(problems=tuple(problems), error=f"nvidia-smi gave no samples ({tail})")
    gpus = []
    for index, samples in sorted(rows.items()):
        buses = {s[1] for s in samples}
        if len(buses) > 1 and len(problems) < 5:
            problems.append(f"GPU {index}'s samples name {len(buses)} bus ids")
        masks = [_mask(s[6]) for s in samples]
        events = 0
        for mask in masks:
            events |= mask or 0
        # the load's samples: those nvidia-smi does not call idle (the first come before it)
        busy = [s for s, m in zip(samples, masks, strict=True) if m is not None and not m & 0x1]
        chosen = busy or samples
        clocks = [v for v in (_number(s[3]) for s in chosen) if v is not None]
        power = [v for v in (_number(s[4]) for s in chosen) if v is not None]
        temps = [v for v in (_number(s[5]) for s in chosen) if v is not None]
        unreadable = {
            SAMPLE_FIELDS[column]: f"{len(chosen) - len(values)} of {len(chosen)} samples"
            for column, values in ((3, clocks), (4, power), (5, temps))
            if len(values) < len(chosen)
        }
        if None in masks:
            unreadable[SAMPLE_FIELDS[6]] = f"{masks.count(None)} of {len(masks)} samples"
        gpus.append(
            GpuSamples(
                index=index,
                bus_id=value_or_none(samples[-1][1]),
                serial=value_or_none(samples[-1][2]),
                count=len(samples),
                busy=len(busy),
                sm_mhz_median=statistics.median(clocks) if clocks else None,
                sm_mhz_min=min(clocks) if clocks else None,
                power_w_max=max(power) if power else None,
                temperature_c_max=max(temps) if temps else None,
                events=events,
                unreadable=unreadable,
            )
        )
    bus_ids = [g.bus_id for g in gpus if g.bus_id]
    if len(set(bus_ids)) < len(bus_ids):
        problems.append("two GPU indices name one bus id")
    return LoadSamples(tuple(gpus), tuple(problems))


GPU_ENGINES: Section[Engines] = Section("gpu_engines", parse_engines, build=on_gpu(ENGINES_COMMAND))
"""The facts section of the engines each node has (`ENGINES_COMMAND`)."""
