"""The corpus of published tool outputs that the conformance tests parse.

The corpus travels with the repository in `tests/fixtures/samples/` (copied from the
project's shared sample folder with its PROVENANCE.md), so a fresh clone runs every
conformance test. `HPCNET_SAMPLES` may name an extra corpus of the same layout (the shared
folder, which grows): its files join the list; a name present in both is read from the
repository's copy.
"""

from __future__ import annotations

import os
from pathlib import Path

SAMPLES = Path(__file__).parent / "fixtures" / "samples"


def corpus_roots() -> list[Path]:
    """The repository's copy first, then the extra corpus named by `HPCNET_SAMPLES`."""
    roots = [SAMPLES]
    extra = os.environ.get("HPCNET_SAMPLES")
    if extra and Path(extra).resolve() != SAMPLES.resolve():
        roots.append(Path(extra))
    return roots


def sample(area: str, name: str) -> Path:
    """One file of the repository's copy of the corpus."""
    return SAMPLES / area / name


def corpus_files(area: str, suffix: str = "") -> list[Path]:
    """Every file of one area (optionally only names ending in `suffix`), sorted by name."""
    found: dict[str, Path] = {}
    for root in corpus_roots():
        folder = root / area
        if not folder.is_dir():
            continue
        for path in folder.iterdir():
            if path.is_file() and path.name.endswith(suffix):
                found.setdefault(path.name, path)
    return [found[name] for name in sorted(found)]
