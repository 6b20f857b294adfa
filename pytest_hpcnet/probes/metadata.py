"""The ECS instance metadata service (IMDS): VPC, vSwitch, zone, instance type per node.

`metadata_command` reads a few keys in one POSIX sh snippet (hardened mode with a
token, plain GET when no token is available) and prints `key=value` or
`key!reason` lines; the token itself is never printed. Comparing a key across nodes is
`requirements/network.judge_placement`'s.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import urlsplit

from pytest_hpcnet.probes.sections import Section
from pytest_hpcnet.probes.text import strip_ansi

DEFAULT_BASE = "http://100.100.100.200/latest/meta-data/"
DEFAULT_KEYS = (
    "vswitch-id",
    "vpc-id",
    "zone-id",
    "region-id",
    "instance/instance-type",
    "instance-id",
    "private-ipv4",
)
TOKEN_TTL_HEADER = "X-aliyun-ecs-metadata-token-ttl-seconds"
TOKEN_HEADER = "X-aliyun-ecs-metadata-token"
TOKEN_TTL_S = 21600

_FIELDS = {
    "vswitch-id": "vswitch_id",
    "vpc-id": "vpc_id",
    "zone-id": "zone_id",
    "region-id": "region_id",
    "instance/instance-type": "instance_type",
    "instance-type": "instance_type",
    "instance-id": "instance_id",
    "private-ipv4": "private_ipv4",
}


@dataclass(frozen=True)
class MetadataFacts:
    """Metadata values of one node; None where the key was not read."""

    vswitch_id: str | None = None
    vpc_id: str | None = None
    zone_id: str | None = None
    region_id: str | None = None
    instance_type: str | None = None
    instance_id: str | None = None
    private_ipv4: str | None = None
    values: tuple[tuple[str, str], ...] = ()
    """Every `key=value` read, metadata key names, in output order."""
    missing: tuple[tuple[str, str], ...] = ()
    """(key, why) for every key not read: `http 404`, `curl exit 28`, ..."""
    token_used: bool | None = None
    """True: hardened mode (token); False: plain GET fallback; None: not said."""
    tool_missing: bool = False
    problems: tuple[str, ...] = ()

    def value(self, key: str) -> str | None:
        """The value of a metadata key (`vswitch-id`, `instance/instance-type`), or None."""
        return dict(self.values).get(key)

    def why_missing(self, key: str) -> str | None:
        """Why `key` was not read, or None when it was (or was not asked for)."""
        return dict(self.missing).get(key)


# ---------------------------------------------------------------------------
# command builders


def metadata_command(
    keys: Iterable[str] = DEFAULT_KEYS,
    base: str = DEFAULT_BASE,
    timeout_s: float = 2,
) -> str:
    """POSIX sh: get a token (PUT /latest/api/token), then print `key=value` / `key!why`.

    Two curl processes in all: one for the token, one for every key (curl fetches its URLs
    in order on one connection; `-w` marks where each body ends, `--fail-early` stops at
    the first request that fails). Without a token (old IMDS, request refused) the keys
    are read with plain GET. The key whose request failed is named with curl's exit code;
    the keys after it are reported as skipped, so an unreachable service costs about two
    timeouts, not one per key.
    The token stays in a shell variable and is only passed as a request header.
    """
    keys = tuple(keys)
    for key in keys:
        if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._/-]*", key):
            raise ValueError(f"not a metadata key: {key!r}")
    if not base.endswith("/"):
        base += "/"
    parts = urlsplit(base)
    token_url = f"{parts.scheme}://{parts.netloc}/latest/api/token"
    t = str(int(timeout_s)) if float(timeout_s).is_integer() else str(float(timeout_s))
    curl = f"curl -s -m {t} --connect-timeout {t}"
    q = shlex.quote
    urls = " ".join(q(base + k) for k in keys)
    return (
        "if ! command -v curl >/dev/null 2>&1; then echo 'hpcnet: curl not found'; else "
        f"out=$({curl} -X PUT -H {q(f'{TOKEN_TTL_HEADER}: {TOKEN_TTL_S}')} "
        f"-w '\\n%{{http_code}}' {q(token_url)} 2>/dev/null); "
        "code=$(printf '%s\\n' \"$out\" | tail -n 1); "
        "tok=$(printf '%s\\n' \"$out\" | sed '$d'); "
        'if [ "$code" = 200 ] && [ -n "$tok" ]; then echo \'@token ok\'; '
        "else tok=''; echo \"@token!http $code\"; fi; "
        'if [ -n "$tok" ]; then '
        f'out=$({curl} --fail-early -H "{TOKEN_HEADER}: $tok" -w {q(_END_OF_KEY)} {urls} 2>&1); '
        f"else out=$({curl} --fail-early -w {q(_END_OF_KEY)} {urls} 2>&1); fi; "
        "rc=$?; "
        f'printf \'%s\\n\' "$out" | awk -v rc="$rc" -v keys={q(" ".join(keys))} {q(_SPLIT_AWK)}; '
        "fi"
    )


_END_OF_KEY = r"\n@@hpcnet-imds %{http_code}\n"
"""curl's `-w` after each key's body: the body ends at this line, which carries its status."""
_SPLIT_AWK = " ".join(
    line.strip()
    for line in r"""
BEGIN { n = split(keys, key, " "); i = 0; val = "" }
/^@@hpcnet-imds [0-9]+$/ { i++; code[i] = $2; sub(/ +$/, "", val); value[i] = val; val = ""; next }
{ gsub(/\r/, " "); val = (val == "" ? $0 : val " " $0) }
END {
  failed = 0; if (rc != 0) failed = (i > 0 && code[i] == "000") ? i : i + 1;
  for (j = 1; j <= n; j++) {
    if (failed && j == failed) print key[j] "!curl exit " rc " (http 000)";
    else if (failed && j > failed && (rc == 6 || rc == 7 || rc == 28))
      print key[j] "!skipped: metadata service unreachable";
    else if (failed && j > failed) print key[j] "!skipped: an earlier request failed";
    else if (j > i) print key[j] "!no reply from curl";
    else if (code[j] == "200") print key[j] "=" value[j];
    else print key[j] "!http " code[j]
  }
}
""".strip().splitlines()
)
"""Split curl's output at the markers into `key=value` / `key!why` lines, in key order."""


# ---------------------------------------------------------------------------
# parsers

_LINE_RE = re.compile(r"^(?P<key>[A-Za-z0-9][A-Za-z0-9._/-]*)(?P<op>[=!])(?P<rest>.*)$")


def parse_metadata(text: str) -> MetadataFacts:
    """Parse `metadata_command` output into `MetadataFacts`."""
    text = strip_ansi(text)
    if re.search(r"hpcnet: curl not found|\bcurl: (?:command )?not found", text or ""):
        return MetadataFacts(tool_missing=True, problems=("curl not installed",))
    values: dict[str, str] = {}
    missing: dict[str, str] = {}
    token_used: bool | None = None
    problems: list[str] = []
    for raw in (text or "").splitlines():
        line = raw.strip()
        if not line:
            continue
        if line == "@token ok":
            token_used = True
            continue
        if line.startswith("@token!"):
            token_used = False
            continue
        m = _LINE_RE.match(line)
        if not m:
            problems.append(f"unreadable line: {line[:120]!r}")
            continue
        key, rest = m.group("key"), m.group("rest").strip()
        if m.group("op") == "!":
            missing[key] = _explain(rest)
            values.pop(key, None)
        elif not rest:
            missing[key] = "empty value"
        else:
            values[key] = rest
            missing.pop(key, None)
    if not values and not missing:
        problems.append("no metadata lines in output")
    fields = {_FIELDS[k]: v for k, v in values.items() if k in _FIELDS}
    return MetadataFacts(
        **fields,
        values=tuple(values.items()),
        missing=tuple(missing.items()),
        token_used=token_used,
        problems=tuple(problems),
    )


def _explain(reason: str) -> str:
    if re.fullmatch(r"http 404", reason):
        return "http 404 (key unknown to this metadata version)"
    if re.match(r"curl exit 28\b", reason):
        return f"{reason}: timed out"
    if reason.startswith("skipped"):
        return reason
    if re.match(r"curl exit [67]\b", reason):
        return f"{reason}: could not connect to the metadata service"
    return reason or "unknown"


_ENTRY_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*/?$")


def parse_listing(text: str) -> tuple[str, ...]:
    """Entries of a metadata directory listing (`instance/` keeps its slash), in order."""
    entries: list[str] = []
    for raw in strip_ansi(text).splitlines():
        line = raw.strip()
        if _ENTRY_RE.match(line) and line not in entries:
            entries.append(line)
    return tuple(entries)


METADATA: Section[MetadataFacts] = Section(
    "metadata",
    parse_metadata,
    build=lambda node, expect: metadata_command(base=expect.placement.metadata_url),
)
