"""The public sources the profiles cite, by a stable key (`S15`, `NF-BUSBW`).

`profiles/sources.yaml` (shipped with the package, listed in docs/sources.md) gives each key
a title, a kind (Alibaba documentation, Alibaba code, third party, not found) and an address
where one is known. `with_sources(note)` appends what a profile note cites, so the
certificate shows the title and address beside the number.
"""

from __future__ import annotations

import re
from functools import lru_cache
from importlib import resources

import yaml
from pydantic import BaseModel

KEY = re.compile(r"\b(S\d{1,2}|[A-Z]{2,5}-[A-Z]+)\b")


class Source(BaseModel):
    """One cited source."""

    title: str
    kind: str
    url: str | None = None
    note: str | None = None

    def line(self, key: str) -> str:
        where = f", {self.url}" if self.url else ""
        return f"{key}: {self.title} ({self.kind}{where})"


@lru_cache(maxsize=1)
def load_sources() -> dict[str, Source]:
    """Every source key the package ships, in the file's order."""
    text = (resources.files("pytest_hpcnet") / "profiles" / "sources.yaml").read_text("utf-8")
    return {str(k): Source.model_validate(v) for k, v in (yaml.safe_load(text) or {}).items()}


def cited_keys(note: str) -> list[str]:
    """The known source keys a note names, first mention first."""
    known = load_sources()
    return list(dict.fromkeys(k for k in KEY.findall(note) if k in known))


def with_sources(note: str) -> str:
    """`note` followed by the title and address of each source it cites."""
    keys = cited_keys(note)
    if not keys:
        return note
    sources = load_sources()
    return f"{note} Sources: " + "; ".join(sources[k].line(k) for k in keys) + "."
