"""The inventory's `scheduler:` and `actions:` sections (see docs/gate.md)."""

from __future__ import annotations

import re
import shlex
from typing import Annotated, Literal

from pydantic import Field, ValidationInfo, field_validator, model_validator

from pytest_hpcnet.inventory.expectations import Strict

SLURM_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$")
PLACEHOLDERS = ("{node}", "{slurm_node}", "{checks}", "{reasons}", "{run_id}", "{cluster}")


class NodeNames(Strict):
    """Inventory name -> scheduler name: `map` first, else `pattern` (`{name}` inside), else
    the same name."""

    pattern: str | None = None
    map: dict[str, str] = Field(default_factory=dict)

    @field_validator("pattern")
    @classmethod
    def _pattern_has_name(cls, value: str | None) -> str | None:
        if value is not None:
            if "{name}" not in value:
                raise ValueError(f"pattern {value!r} must contain {{name}}")
            _check_name(value.replace("{name}", "x"))
        return value

    @field_validator("map")
    @classmethod
    def _map_names(cls, value: dict[str, str]) -> dict[str, str]:
        for name in value.values():
            _check_name(name)
        return value

    def slurm_name(self, node: str) -> str:
        """The scheduler's name of inventory node `node`."""
        if node in self.map:
            return self.map[node]
        return self.pattern.replace("{name}", node) if self.pattern else node


def _check_name(name: str) -> None:
    if not SLURM_NAME.match(name):
        raise ValueError(
            f"{name!r} is not a valid scheduler node name (letters, digits, '.', '_', '-')"
        )


class SchedulerSettings(Strict):
    """`scheduler:` which scheduler runs the cluster and whether the gate may change it."""

    kind: Literal["none", "slurm"] = "none"
    node_names: NodeNames = Field(default_factory=NodeNames)
    act: bool = False
    """The inventory's consent: drains and resumes need `act: true` and `--act`."""
    scontrol: str = "scontrol"
    """The scontrol program (a path or a name on PATH)."""
    timeout_s: Annotated[float, Field(gt=0, le=600)] = 30.0
    """Per scontrol call; a controller slower than this counts as not answering."""
    confirm_runs: Annotated[int, Field(ge=0, le=5)] = 1
    """Re-runs of a node's failed checks before the gate acts on it (drain, hook): it acts
    only when every re-run fails again; 0 acts on the run alone."""

    @field_validator("scontrol")
    @classmethod
    def _one_word(cls, value: str) -> str:
        if not value or value.startswith("-") or any(c.isspace() for c in value):
            raise ValueError(f"scontrol {value!r} must be one program path or name")
        return value


class ActionSettings(Strict):
    """`actions:` a command run once per failed node (see `pytest_hpcnet.gate.hook`)."""

    command: str | None = None
    timeout_s: Annotated[float, Field(gt=0, le=3600)] = 60.0

    @model_validator(mode="after")
    def _parses(self) -> ActionSettings:
        if self.command is not None:
            try:
                words = shlex.split(self.command)
            except ValueError as exc:
                raise ValueError(f"command {self.command!r} cannot be split: {exc}") from None
            if not words:
                raise ValueError("command is empty")
        return self


RepairClass = Literal["config", "reset", "reboot", "replace"]
REPAIRABLE = ("reset", "reboot")
"""The repair classes the gate may act on itself; `config` and `replace` go to a person."""
FAULT_CODE = re.compile(r"^HPCNET-[A-Z0-9][A-Z0-9_-]*$")


class RepairSettings(Strict):
    """`gate.repair:` which confirmed faults the gate resets or reboots, and how many nodes
    at once (see docs/gate.md, "Reboot and re-accept")."""

    reset: list[str] = Field(default_factory=lambda: ["reset"])
    """Fault codes (`HPCNET-GPU-HEALTH`) or the class `reset`: repaired by `nvidia-smi -r`."""
    reboot: list[str] = Field(default_factory=lambda: ["reset", "reboot"])
    """Fault codes or the classes `reset`/`reboot`: repaired by an ECS `RebootInstance` (a
    node whose faults the `reset` list does not all cover; a reboot resets the GPUs too)."""
    max_nodes_per_night: Annotated[int, Field(ge=0, le=1000)] = 2
    max_share: Annotated[float, Field(gt=0, le=1)] = 0.10
    """The largest fraction of the cluster's nodes in repair at once (rounded down)."""
    max_attempts: Annotated[int, Field(ge=1, le=10)] = 2
    """Repairs of one node that did not hold (failed re-acceptance, or the fault came back
    while suspect) before it is left for `replace`."""
    suspect_nights: Annotated[int, Field(ge=0, le=90)] = 7
    """Nights a repaired node stays suspect: the same code again goes straight to `replace`."""
    reboot_timeout_s: Annotated[float, Field(gt=0, le=3600)] = 900.0
    """RebootInstance to the instance `Running` again (NVIDIA's cloud validation: under 600 s
    for a reboot, 900 s for a power cycle)."""
    ssh_timeout_s: Annotated[float, Field(gt=0, le=3600)] = 600.0
    """`Running` to SSH answering."""
    reaccept_timeout_s: Annotated[float, Field(gt=0, le=14400)] = 1800.0
    """Each re-acceptance pytest run (the failed checks, then `-m gpu_load`)."""
    ticket_sign_key: str | None = None
    """Ed25519 private key (`hpcnet keygen`) that signs the ticket bundle the gate writes for
    a node it leaves for `replace`; without it the bundle is written unsigned."""

    @field_validator("reset", "reboot")
    @classmethod
    def _codes_or_classes(cls, value: list[str], info: ValidationInfo) -> list[str]:
        allowed = ("reset",) if info.field_name == "reset" else REPAIRABLE
        for item in value:
            if item in ("config", "replace"):
                raise ValueError(f"{item!r} faults are never reset or rebooted")
            if item in ("reset", "reboot"):
                if item not in allowed:
                    raise ValueError(f"the class {item!r} cannot be repaired by a GPU reset")
            elif not FAULT_CODE.match(item):
                raise ValueError(
                    f"{item!r} is neither a repair class ({', '.join(allowed)}) nor a fault "
                    "code (HPCNET-...)"
                )
        return value

    def limit(self, cluster_nodes: int) -> int:
        """How many nodes may be in repair at once in a cluster of `cluster_nodes`."""
        return min(self.max_nodes_per_night, int(self.max_share * cluster_nodes + 1e-9))


class GateSettings(Strict):
    """`gate:` what the nightly gate may do beyond drain and resume."""

    repair: RepairSettings | None = None
    """Absent: no reset or reboot; a drained node waits for a person."""
