"""What the facts round trip gathers on each node: every facts section a registered requirement
reads (`Requirement.sections`), each as its probe declares it (`probes.sections.Section`: name,
parser and command), joined by `facts_command` into the one script a node runs, so adding a
check adds no round trip and no line here. `campaigns.facts` runs it and reads the sections
back."""

from __future__ import annotations

import functools
import pkgutil
from collections.abc import Iterable
from importlib import import_module

from pytest_hpcnet import probes
from pytest_hpcnet.inventory.expectations import Expectations
from pytest_hpcnet.inventory.models import Node
from pytest_hpcnet.probes.sections import Section, sections_script
from pytest_hpcnet.requirements.registry import REQUIREMENTS, Requirement


@functools.cache
def gathering_sections() -> dict[str, Section]:
    """Every section a probe module of `pytest_hpcnet.probes` gathers (one with a `build`), by
    name; a name gathered twice is a declaration error."""
    found: dict[str, Section] = {}
    for module in pkgutil.iter_modules(probes.__path__):
        if module.ispkg:  # probes/remote: programs sent to nodes, never imported
            continue
        for value in vars(import_module(f"{probes.__name__}.{module.name}")).values():
            if isinstance(value, Section) and value.build is not None:
                other = found.setdefault(value.name, value)
                if other is not value:
                    raise ValueError(f"facts section {value.name!r} is gathered twice")
    return found


def sections_read(
    requirements: Iterable[Requirement], sections: dict[str, Section]
) -> tuple[Section, ...]:
    """The sections `requirements` read, in their order, each once; a name no probe gathers
    is a declaration error."""
    names = dict.fromkeys(name for r in requirements for name in r.sections)
    missing = sorted(name for name in names if name not in sections)
    if missing:
        raise ValueError(f"no probe gathers the facts sections {missing}")
    return tuple(sections[name] for name in names)


SECTIONS: tuple[Section, ...] = sections_read(REQUIREMENTS, gathering_sections())
"""What every node's facts round trip gathers."""


def facts_command(node: Node, expect: Expectations) -> str:
    """The one script that gathers every section on `node`."""
    return sections_script({s.name: s.build(node, expect) for s in SECTIONS})  # type: ignore[misc]
