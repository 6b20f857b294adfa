"""Loading an inventory file: read, substitute, validate, expand and merge into an `Inventory`.

`load_inventory(path)` returns an `Inventory` or raises `InventoryError` whose one-line
message names the file, the key path and the problem (with the nearest valid key for
a typo). `${VAR}` values come from the environment and are registered as secrets.
Nodes may come from an Ansible inventory or `terraform output -json` instead
(`nodes_from:`, or the path given directly; see `inventory_sources`). Node ranges
(`gpu-[001-128]`) are expanded here and the expectations merged over the profile.
"""

from __future__ import annotations

import difflib
import hashlib
import os
import re
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from pytest_hpcnet.inventory.expectations import (
    DEFAULT_SYSCTL,
    Expectations,
    load_profile,
    merge,
    profile_names,
)
from pytest_hpcnet.inventory.gpu_models import model_memory_problem
from pytest_hpcnet.inventory.models import (
    RANGE,
    WAIVER_HORIZON_DAYS,
    ClusterInfo,
    Inventory,
    InventoryFile,
    Node,
    NodeSpec,
    SshSettings,
    Waiver,
    check_node_specs,
    duplicate_nodes,
    waiver_problem,
)
from pytest_hpcnet.inventory.sources import (
    InventorySourceError,
    NodesFrom,
    SourceNodes,
    detect_kind,
    one_line,
    read_nodes_from,
)
from pytest_hpcnet.inventory.ssh_files import ssh_file_problems
from pytest_hpcnet.inventory.validation_messages import every_error
from pytest_hpcnet.inventory.yaml_mapping import YamlMappingError, load_mapping
from pytest_hpcnet.redact import register_secret

ENV_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
MAX_RANGE = 10000


class InventoryError(Exception):
    """A bad inventory: one line per problem, each naming file, key path and problem."""

    def __init__(self, *problems: str) -> None:
        self.problems = [one_line(p) for p in problems] or ["not a valid inventory"]
        super().__init__("\n".join(self.problems))


def expand_range(name: str) -> list[str]:
    """`gpu-[001-003]` -> gpu-001, gpu-002, gpu-003, zero padding kept.

    A bracket holds a Slurm hostlist (`[001-004,010]`) or an Ansible range (`[01:16]`,
    `[1:16:2]`); several brackets multiply (`r[1-2]-g[1,3]`: r1-g1, r1-g3, r2-g1, r2-g3)."""
    names = [""]
    end = 0
    for m in RANGE.finditer(name):
        items = _range_items(name, m.group(1))
        if len(names) * len(items) > MAX_RANGE:
            raise ValueError(f"{name!r}: more than {MAX_RANGE} nodes")
        names = [f"{done}{name[end : m.start()]}{item}" for done in names for item in items]
        end = m.end()
    return [done + name[end:] for done in names]


SLURM_ITEM = re.compile(r"^(\d+)(?:-(\d+))?$")
ANSIBLE_ITEM = re.compile(r"^(\d+):(\d+)(?::(\d+))?$")


def _range_items(name: str, body: str) -> list[str]:
    """The values one bracket stands for, in order."""
    if not body.strip():
        raise ValueError(f"{name!r}: empty range []")
    out: list[str] = []
    for part in body.split(","):
        part = part.strip()
        slurm, ansible = SLURM_ITEM.match(part), ANSIBLE_ITEM.match(part)
        if slurm is None and ansible is None:
            raise ValueError(
                f"{name!r}: {part!r} is not a number or a range (a-b, a:b or a:b:step)"
            )
        m = slurm or ansible
        assert m is not None
        beg, stop = m.group(1), m.group(2) or m.group(1)
        step = int(ansible.group(3) or 1) if ansible else 1
        lo, hi = int(beg), int(stop)
        if hi < lo:
            raise ValueError(f"{name!r}: range end {hi} is below its start {lo}")
        if step < 1:
            raise ValueError(f"{name!r}: range step must be at least 1")
        if (hi - lo) // step + 1 + len(out) > MAX_RANGE:
            raise ValueError(f"{name!r}: more than {MAX_RANGE} nodes")
        width = len(beg) if beg.startswith("0") else 0
        out += [f"{i:0{width}d}" for i in range(lo, hi + 1, step)]
    return out


def _expand_every_node(
    specs: list[NodeSpec], indexes: list[int] | None = None
) -> tuple[list[Node], list[str]]:
    """The nodes of every spec that expands, and one problem per spec that does not
    (`indexes`: each spec's place in the file's `nodes:` list)."""
    nodes: list[Node] = []
    problems: list[str] = []
    for i, spec in zip(indexes or range(len(specs)), specs, strict=True):
        try:
            nodes += _expand_spec(i, spec)
        except InventoryError as exc:
            problems += exc.problems
    return nodes, problems


def _expand_spec(i: int, spec: NodeSpec) -> list[Node]:
    try:
        names = expand_range(spec.name)
    except ValueError as exc:
        raise InventoryError(f"nodes[{i}].name: {exc}") from None
    hosts: list[str]
    if spec.host is None:
        hosts = names
    elif RANGE.search(spec.host):
        try:
            hosts = expand_range(spec.host)
        except ValueError as exc:
            raise InventoryError(f"nodes[{i}].host: {exc}") from None
        if len(hosts) != len(names):
            raise InventoryError(
                f"nodes[{i}].host: range gives {len(hosts)} hosts for {len(names)} names"
            )
    else:
        hosts = [spec.host.replace("{name}", n) for n in names]
        if len(names) > 1 and "{name}" not in spec.host:
            raise InventoryError(
                f"nodes[{i}].host: {len(names)} nodes share one host {spec.host!r}; "
                "use a range ([11-138]) or {name}"
            )
    for host in hosts:
        if "[" in host or "]" in host:
            raise InventoryError(
                f"nodes[{i}].host: {host!r} is not a host name or address "
                "(a range is written [11-26], [11-14,20] or [11:26])"
            )
    fields = spec.model_dump(exclude={"name", "host"})
    return [Node(name=n, host=h, **fields) for n, h in zip(names, hosts, strict=False)]


def _substitute_env(value: Any, where: str) -> Any:
    """Replace `${VAR}` in every string; each value read is registered as a secret."""
    if isinstance(value, dict):
        return {
            k: _substitute_env(v, f"{where}.{k}" if where else str(k)) for k, v in value.items()
        }
    if isinstance(value, list):
        return [_substitute_env(v, f"{where}[{i}]") for i, v in enumerate(value)]
    if not isinstance(value, str) or "${" not in value:
        return value

    def lookup(m: re.Match[str]) -> str:
        var = m.group(1)
        if var not in os.environ:
            raise InventoryError(f"{where}: environment variable ${{{var}}} is not set")
        secret = os.environ[var]
        register_secret(secret)
        return secret

    return ENV_REF.sub(lookup, value)


def merged_expectations(raw: dict[str, Any]) -> tuple[Expectations, str]:
    """The `expect:` block merged over its profile and the defaults, validated, and its digest;
    `InventoryError` names every problem."""
    data: dict[str, Any] = {"sysctl": dict(DEFAULT_SYSCTL)}
    profile = raw.get("profile")
    if profile is not None:
        names = profile_names()
        if profile not in names:
            near = difflib.get_close_matches(str(profile), names, n=1)
            hint = f"did you mean {near[0]!r}? " if near else ""
            raise InventoryError(
                f"expect.profile: unknown profile {profile!r} ({hint}shipped: {', '.join(names)})"
            )
        data = merge(data, load_profile(profile))
    if "ib_write_bw" in raw:  # a bound of the inventory replaces the profile's reference
        data.pop("ib_write_bw", None)
    data = merge(data, raw)
    try:
        expect = Expectations.model_validate(data)
    except ValidationError as exc:
        raise InventoryError(*every_error(exc, Expectations, "expect.")) from None
    problem = model_memory_problem(expect.gpu.model, expect.gpu.memory_gb, _gpu_origins(raw))
    if problem is not None:
        raise InventoryError(problem)
    digest = hashlib.sha256(expect.model_dump_json().encode()).hexdigest()
    return expect, digest


def _gpu_origins(raw: dict[str, Any]) -> dict[str, str]:
    """Where `expect.gpu.model` and `memory_gb` came from: the inventory or its profile."""
    gpu = raw.get("gpu")
    mine = gpu if isinstance(gpu, dict) else {}
    profile = f"profile {raw.get('profile')}" if raw.get("profile") else "default"
    return {key: "inventory" if key in mine else profile for key in ("model", "memory_gb")}


def _expect_problems(raw: Any) -> list[str]:
    """The `expect:` problems too, when the rest of the file already has some: every
    problem is shown at once."""
    if not isinstance(raw, dict):
        return []
    try:
        merged_expectations(raw)
    except InventoryError as exc:
        return exc.problems
    return []


def load_inventory(path: str | os.PathLike[str]) -> Inventory:
    """Read, validate and expand an inventory file; `InventoryError` names what is wrong."""
    path = Path(path)
    try:
        raw_bytes = path.read_bytes()
    except OSError as exc:
        raise InventoryError(f"{path}: cannot read inventory: {exc.strerror or exc}") from None
    try:
        return _load(path, raw_bytes)
    except InventoryError as exc:
        named = [p if p.startswith(str(path)) else f"{path}: {p}" for p in exc.problems]
        raise InventoryError(*named) from None


def _nodes_from(path: Path, parsed: InventoryFile, direct: bool) -> SourceNodes:
    """Read `parsed.nodes_from` into `parsed.nodes`; the source's SSH defaults (Ansible `all`
    vars) fill the `ssh:` keys the inventory leaves unset."""
    assert parsed.nodes_from is not None
    prefix = "" if direct else "nodes_from: "
    try:
        source = read_nodes_from(parsed.nodes_from, path.parent)
    except InventorySourceError as exc:
        raise InventoryError(f"{prefix}{exc}") from None
    where = "" if direct else f"{source.path}: "
    try:
        specs = [NodeSpec.model_validate(node) for node in source.nodes]
        check_node_specs(specs)
        ssh = {**parsed.ssh.model_dump(), **source.ssh, **parsed.ssh.model_dump(exclude_unset=True)}
        parsed.ssh = SshSettings.model_validate(ssh)
    except ValidationError as exc:
        lines = every_error(exc, NodeSpec)
        raise InventoryError(*(f"{prefix}{where}{line}" for line in lines)) from None
    except ValueError as exc:
        raise InventoryError(f"{prefix}{where}nodes{exc}") from None
    parsed.nodes = specs
    return source


def _load(path: Path, raw_bytes: bytes) -> Inventory:
    try:
        text = raw_bytes.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InventoryError(f"not UTF-8 text (byte {exc.start})") from None
    kind = detect_kind(path, text)
    if kind != "native":  # an Ansible inventory or Terraform output given directly
        parsed = InventoryFile(
            cluster=ClusterInfo(name=path.stem, region="unknown"),
            nodes_from=NodesFrom(**{kind: path.name}),
        )
        _nodes_from(path, parsed, direct=True)
        return _build(path, hashlib.sha256(raw_bytes).hexdigest(), parsed)
    try:
        data = load_mapping(text, "a mapping with cluster, ssh, nodes, expect")
    except YamlMappingError as exc:
        raise InventoryError(str(exc)) from None
    data = _substitute_env(data, "")
    try:
        parsed = InventoryFile.model_validate(data)
    except ValidationError as exc:
        problems = every_error(exc, InventoryFile) + _expect_problems(data.get("expect"))
        problems += _later_problems(data)
        raise InventoryError(*dict.fromkeys(problems)) from None
    digest = hashlib.sha256(raw_bytes)
    known_hosts_named = "known_hosts" in parsed.ssh.model_fields_set
    if parsed.nodes_from is not None:  # the digest covers the node source too
        digest.update(_nodes_from(path, parsed, direct=False).raw)
    return _build(path, digest.hexdigest(), parsed, known_hosts_named)


def _waiver_problems(waivers: list[tuple[int, Waiver]], horizon_days: int) -> list[str]:
    """Each waiver's own problem (reason, grantor, expiry), judged on the controller's UTC
    date, as a run's."""
    today = datetime.now(timezone.utc).date()
    found = ((i, w, waiver_problem(w, today, horizon_days)) for i, w in waivers)
    return [f"waivers[{i}] ({w.check}): {problem}" for i, w, problem in found if problem]


def _valid_part(model: type[BaseModel], raw: Any) -> tuple[Any, bool]:
    """`raw` validated as `model` with its invalid keys left out (their errors are already
    shown), and whether it was valid whole; None where nothing of it validates."""
    if not isinstance(raw, dict):
        return None, False
    try:
        return model.model_validate(raw), True
    except ValidationError as exc:
        bad = {e["loc"][0] for e in exc.errors() if e["loc"]}
    try:
        return model.model_validate({k: v for k, v in raw.items() if k not in bad}), False
    except ValidationError:
        return None, False


def _later_problems(data: dict[str, Any]) -> list[str]:
    """The problems of the later stages (node ranges, key files, duplicate hosts, waivers)
    in a file whose shape has errors: each part valid on its own is taken through them, so
    one schema error hides nothing else."""
    ssh, _ = _valid_part(SshSettings, data.get("ssh", {}))
    raw_nodes = data.get("nodes")
    specs: list[tuple[int, NodeSpec]] = []
    for i, raw in enumerate(raw_nodes if isinstance(raw_nodes, list) else []):
        spec, whole = _valid_part(NodeSpec, raw)
        if whole:
            specs.append((i, spec))
    nodes, problems = _expand_every_node([s for _, s in specs], [i for i, _ in specs])
    if ssh is not None:
        named = isinstance(data.get("ssh"), dict) and "known_hosts" in data["ssh"]
        problems += ssh_file_problems(ssh, nodes, named)
        problems += [f"nodes: {p}" for p in duplicate_nodes(nodes, ssh)]
    raw_waivers = data.get("waivers")
    waivers: list[tuple[int, Waiver]] = []
    for i, raw in enumerate(raw_waivers if isinstance(raw_waivers, list) else []):
        waiver, whole = _valid_part(Waiver, raw)
        if whole:
            waivers.append((i, waiver))
    horizon = data.get("waiver_horizon_days", WAIVER_HORIZON_DAYS)
    if isinstance(horizon, int) and not isinstance(horizon, bool) and horizon >= 1:
        problems += _waiver_problems(waivers, horizon)
    return problems


def _build(
    path: Path, sha256: str, parsed: InventoryFile, known_hosts_named: bool = False
) -> Inventory:
    assert parsed.nodes is not None
    register_secret(parsed.ssh.passphrase)
    problems = _waiver_problems(list(enumerate(parsed.waivers)), parsed.waiver_horizon_days)
    try:
        expect, expect_digest = merged_expectations(parsed.expect)
    except InventoryError as exc:
        problems += exc.problems
    nodes, found = _expand_every_node(parsed.nodes)
    problems += found
    problems += ssh_file_problems(parsed.ssh, nodes, known_hosts_named)
    problems += [f"nodes: {p}" for p in duplicate_nodes(nodes, parsed.ssh)]
    if problems:
        raise InventoryError(*problems)
    try:
        return Inventory(
            path=path,
            sha256=sha256,
            cluster=parsed.cluster,
            ssh=parsed.ssh,
            nodes=nodes,
            expect=expect,
            expect_sha256=expect_digest,
            benchmarks=parsed.benchmarks,
            cloud=parsed.cloud,
            waivers=parsed.waivers,
            waiver_horizon_days=parsed.waiver_horizon_days,
            scheduler=parsed.scheduler,
            actions=parsed.actions,
            gate=parsed.gate,
            scope=parsed.scope,
            burnin=parsed.burnin,
        )
    except ValidationError as exc:
        raise InventoryError(
            *(f"nodes: {e['msg'].removeprefix('Value error, ')}" for e in exc.errors())
        ) from None
