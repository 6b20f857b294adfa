"""The memory each GPU model is published with, by the name `nvidia-smi` prints, so that an
`expect.gpu.model` that cannot be the instance type's GPU is refused when the inventory loads.

A name that carries its size (`NVIDIA A100-SXM4-80GB`, `NVIDIA H100 80GB HBM3`) gives it;
other names are looked up in `PUBLISHED`, each with the source key (`profiles/sources.yaml`)
its figure comes from. A model in neither is not checked: nothing is known to contradict.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

SIZE_IN_NAME = re.compile(r"(?<![\d.])(\d+)\s?GB\b", re.IGNORECASE)


@dataclass(frozen=True)
class PublishedMemory:
    """The memory sizes (GB, as datasheets print them) one model name is sold with."""

    sizes_gb: tuple[int, ...]
    source: str


PUBLISHED: dict[str, PublishedMemory] = {
    "nvidia h200": PublishedMemory((141,), "NV-HGPU: 141 GB HBM3e"),
    "nvidia h20": PublishedMemory((96,), "TP-H20: 96 GB HBM3"),
    "nvidia l20": PublishedMemory((48,), "NV-LGPU: 48 GB GDDR6"),
    "nvidia rtx pro 5000 blackwell": PublishedMemory(
        (48, 72), "TP-RTXPRO: 72 GB GDDR7; a 48 GB model is also sold"
    ),
}
"""By the name as `nvidia-smi --query-gpu=name` prints it, lower case, spacing collapsed (the
way the GPU judge compares it). GPU-FIGURES section 1 and the cited sources; a name sold with
several sizes (H100 PCIe and NVL, A100 40 and 80 GB) prints its size or is left out."""


def _key(model: str) -> str:
    return " ".join(model.lower().split())


def published_memory(model: str) -> PublishedMemory | None:
    """What `model` is published with: the size its name carries, else `PUBLISHED`'s."""
    sized = SIZE_IN_NAME.search(model)
    if sized is not None:
        return PublishedMemory((int(sized.group(1)),), "the size in its name")
    return PUBLISHED.get(_key(model))


def model_memory_problem(
    model: str | None, memory_gb: float | None, origins: dict[str, str]
) -> str | None:
    """One line when `expect.gpu.model` is published with another memory than
    `expect.gpu.memory_gb`, else None. `origins` says where each came from (`inventory`,
    `profile <name>`); the line names the key the inventory set (the model if both)."""
    if model is None or memory_gb is None:
        return None
    found = published_memory(model)
    if found is None or any(abs(size - memory_gb) < 0.5 for size in found.sizes_gb):
        return None
    sizes = " or ".join(f"{size} GB" for size in found.sizes_gb)
    model_from, memory_from = origins.get("model", ""), origins.get("memory_gb", "")
    key = "memory_gb" if memory_from == "inventory" and model_from != "inventory" else "model"
    return (
        f"expect.gpu.{key}: model {model!r} ({model_from}) has {sizes} per GPU "
        f"({found.source}), but expect.gpu.memory_gb is {memory_gb:g} ({memory_from}): set the "
        "model `nvidia-smi -L` prints on these nodes, or both keys if the profile is not your "
        "instance type"
    )
