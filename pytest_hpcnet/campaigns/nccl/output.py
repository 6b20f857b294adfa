"""Where an all_reduce_perf result is read from: nccl-tests' JSON file when the installed
binary writes one, else its printed table.

nccl-tests 2.17.3 added `-J,--output_file <file>` (src/common.cu; the type is inferred from a
`.json` suffix). Support is read from the binary's own usage text (`<binary> -h` lists
`-J,--output_file`), once per launch node, never guessed from a version. With it, the run
gets `-J /tmp/hpcnet-nccl-<random>.json`; rank 0 writes the file on its own node (nccl-tests
prints `# Writing JSON output to <path>`, adding `.0`, `.1`... when the path exists), which
is read back (and removed) there and parsed by `parse_nccl_json`. The table stays the
fallback when the binary has no `-J`. Both fail closed alike: a missing, unreadable or
cut-short file is an `error`, as a cut-short table is.
"""

from __future__ import annotations

import dataclasses
import json
import re
import secrets
import shlex
from collections.abc import Callable, Sequence

from pytest_hpcnet.probes.nccl import NcclExpected, NcclResult, separate_tables
from pytest_hpcnet.probes.nccl_json import parse_nccl_json
from pytest_hpcnet.transport.fanout import CommandResult

HELP_TIMEOUT_S = 30
READ_TIMEOUT_S = 60
_FLAG_RE = re.compile(r"-J,\s*--output_file\b")
_WROTE_RE = re.compile(r"^(?:\S*:\s*)?# Writing JSON output to (\S+)\s*$", re.M)
_SKIPPED_RE = re.compile(r"^(?:\S*:\s*)?# skipping json output; (.*?)\s*$", re.M)
_KEPT_ENV = ("NCCL_", "CUDA", "NVIDIA_", "UCX_", "OMPI_MCA_btl", "OMPI_MCA_pml")
"""The rank's `env` entries kept in the evidence (the rest may hold credentials)."""


def help_command(binary: str) -> str:
    """The usage text of `binary` (stdin closed; `-h` exits before MPI starts)."""
    return f"{shlex.join([binary, '-h'])} </dev/null 2>&1"


def offers_json(help_text: str) -> bool:
    """The usage text lists `-J,--output_file` (nccl-tests 2.17.3 and later)."""
    return bool(_FLAG_RE.search(help_text))


def new_path() -> str:
    """A fresh `.json` path for one run's `-J` (nccl-tests writes JSON only for that suffix)."""
    return f"/tmp/hpcnet-nccl-{secrets.token_hex(6)}.json"


def read_command(path: str) -> str:
    """Print the file, then remove it (the exit status is `cat`'s)."""
    q = shlex.quote(path)
    return f"cat -- {q}; status=$?; rm -f -- {q}; exit $status"


def written_path(table_text: str, asked: str) -> tuple[str | None, str | None]:
    """(the path nccl-tests says it wrote, why none was written)."""
    wrote = _WROTE_RE.findall(table_text)
    if wrote:
        return wrote[-1], None
    skipped = _SKIPPED_RE.findall(table_text)
    if skipped:
        return None, f"nccl-tests skipped its JSON output ({skipped[-1]})"
    return None, f"no '# Writing JSON output to {asked}' line (-J not taken?)"


def rank0_node(table: NcclResult, names: Sequence[str], hostname: Callable[[str], str]) -> str:
    """The node rank 0 ran on (the table's `# Rank 0 ... on <host>`), else the first."""
    host = next((r.host for r in table.ranks if r.rank == 0), None)
    for name in names:
        known = hostname(name)
        if host is not None and host in (name, known, known.split(".")[0]):
            return name
    return names[0]


def kept_text(text: str) -> str:
    """The JSON file as kept in the evidence: its `env` list cut to NCCL/CUDA entries."""
    try:
        data = json.loads(text)
    except ValueError:
        cut = r'"env":\s*\[.*?(?=\]\s*,\s*"nccl_version"|\Z)'
        return re.sub(cut, '"env": ["(removed)"', text, count=1, flags=re.S)
    if isinstance(data, dict) and isinstance(data.get("env"), list):
        data["env"] = [e for e in data["env"] if str(e).startswith(_KEPT_ENV)]
    return json.dumps(data)


def from_json(
    read: CommandResult | None,
    path: str,
    why_not: str | None,
    expected: NcclExpected,
    table: NcclResult,
) -> NcclResult:
    """The run's result from its JSON file; every way of not having the file is an error
    (with the table's own reason when the run failed before writing it)."""
    if read is None:
        failed = f"; the table: {table.reason}" if table.error is not None else ""
        return NcclResult(
            error=f"no JSON result (-J {path}): {why_not}{failed}", failures=table.failures
        )
    if not read.ok:
        return NcclResult(error=f"JSON result {path} not read: {read.failure}")
    if read.truncated:
        return NcclResult(error=f"JSON result {path} cut short by the output limit")
    result = parse_nccl_json(read.stdout, expected)
    # what the printed output says is the run's too: a failure line after the file was
    # written (a segfault at exit), or more than one table (nccl-tests built without MPI)
    failures = tuple(dict.fromkeys(result.failures + table.failures))
    result = dataclasses.replace(result, failures=failures)
    if (apart := separate_tables(table.tables)) is not None:
        error = "; ".join(e for e in (result.error, apart) if e)
        result = dataclasses.replace(result, tables=table.tables, error=error)
    if result.error is not None:
        return dataclasses.replace(result, error=f"JSON result {path}: {result.error}")
    return result


def evidence(read: CommandResult) -> CommandResult:
    """The read-back command as evidence: the JSON file with its `env` list trimmed."""
    return dataclasses.replace(
        read,
        command=f"{read.command}  # JSON result; env trimmed to {', '.join(_KEPT_ENV)}",
        stdout=kept_text(read.stdout),
    )


# -- NCCL's INFO lines in files of their own, and the nodes that stopped answering ---------

DEBUG_READ_TIMEOUT_S = 30


def new_debug_file() -> str:
    """`NCCL_DEBUG_FILE` for one run: each process writes its INFO lines to its own file on
    its own node (`%h` host, `%p` pid), never into the stream that carries rank 0's table
    (mpirun forwards each rank's output in chunks, so other ranks' lines would land inside a
    block-buffered table row)."""
    return f"/tmp/hpcnet-nccl-{secrets.token_hex(6)}.debug.%h.%p"


def debug_read_command(pattern: str) -> str:
    """Print, then remove, the node's files of `pattern` (`%h`/`%p` as a glob); exit 0."""
    glob = shlex.quote(pattern.split("%", 1)[0]) + "*"
    return f'for f in {glob}; do [ -f "$f" ] && cat -- "$f" && rm -f -- "$f"; done; true'


_GONE_RES = (
    re.compile(r"\bon node\s+([A-Za-z0-9_.:\-]+)"),  # Open MPI: "Remote daemon: ... on node X"
    re.compile(r"ssh: connect to host\s+([A-Za-z0-9_.:\-]+)"),
    re.compile(r"ssh: Could not resolve hostname\s+([A-Za-z0-9_.:\-]+)"),
    re.compile(r"srun: error: ([A-Za-z0-9_.\-]+): task"),
)
_LOST_RE = re.compile(
    r"lost communication|daemon|connect to host|resolve hostname|srun: error", re.I
)


def _which(said: str, nodes: Sequence[Sequence[str]]) -> int | None:
    short = said.strip().rstrip(":,.").lower().split(".")[0]
    for i, names in enumerate(nodes):
        if short in {n.strip().lower().split(".")[0] for n in names if n}:
            return i
    return None


def silent_nodes(
    nodes: Sequence[Sequence[str]],
    launch: CommandResult,
    reads: dict[str, CommandResult],
    table: NcclResult,
) -> tuple[str, ...]:
    """The launched nodes (first name of each of `nodes`) that stopped answering during a run
    that did not finish: the launch node when its own command was lost, a node whose read-back
    after the run got no answer, a node the launcher's messages name (Open MPI's lost daemon,
    ssh), a node with no rank in a printed rank table."""
    gone: dict[int, None] = {}
    names = [n[0] for n in nodes]
    if launch.unreachable and launch.node in names:
        gone[names.index(launch.node)] = None
    for node, read in reads.items():
        if (read.unreachable or read.timed_out) and node in names:
            gone[names.index(node)] = None
    for line in (launch.stdout + "\n" + launch.stderr).splitlines():
        if not _LOST_RE.search(line) or "HNP daemon" in line:  # the HNP is the launch node
            continue
        for pattern in _GONE_RES:
            for said in pattern.findall(line):
                if (i := _which(said, nodes)) is not None:
                    gone[i] = None
    if table.ranks and not gone:
        seen = {_which(r.host, nodes) for r in table.ranks}
        gone |= dict.fromkeys(i for i in range(len(nodes)) if i not in seen)
    return tuple(names[i] for i in sorted(gone))
