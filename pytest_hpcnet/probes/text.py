"""Text clean-up shared by every parser: terminal escape sequences removed before parsing.

Tools print ANSI escapes when they think they talk to a terminal (`nvidia-smi topo -m`
underlines its header with `ESC[4m` ... `ESC[0m`); a parser reading the raw bytes would
miss a header or a row that starts with one.
"""

from __future__ import annotations

import re

_ANSI_RE = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]"  # CSI: colours, underline, cursor moves (ESC [ ... m)
    r"|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)"  # OSC: window titles, hyperlinks
    r"|\x1b[ -/]+[0-~]"  # nF: character sets (ESC ( B)
    r"|\x1b[@-Z\\-_]"  # other two-byte escapes
    r"|\x9b[0-?]*[ -/]*[@-~]"  # 8-bit CSI
)


def strip_ansi(text: str | None) -> str:
    """`text` without terminal escape sequences ("" for None)."""
    return _ANSI_RE.sub("", text or "")


PARSE_CACHE = 4096
"""Parsed outputs a cached parser keeps (every check of a node reads the same facts text)."""
