"""The published-output corpus (`../shared/samples`), located through `HPCNET_SAMPLES`.

Conformance tests parametrize over `corpus_files(area)`; where the corpus is absent
the list is empty and pytest reports the test as skipped.
"""

from __future__ import annotations

import os
from pathlib import Path


def corpus_dir(area: str) -> Path | None:
    """The folder of one area of the corpus, or None where it is not available."""
    root = os.environ.get("HPCNET_SAMPLES")
    if not root:
        return None
    path = Path(root) / area
    return path if path.is_dir() else None


def corpus_files(area: str, suffix: str = "") -> list[Path]:
    """Every file of one area (optionally only names ending in `suffix`), sorted."""
    folder = corpus_dir(area)
    if folder is None:
        return []
    return sorted(p for p in folder.iterdir() if p.is_file() and p.name.endswith(suffix))
