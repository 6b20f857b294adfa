"""Text clean-up shared by every parser: terminal escape sequences removed before parsing.

Tools print ANSI escapes when they think they talk to a terminal (`nvidia-smi topo -m`
underlines its header with `ESC[4m` ... `ESC[0m`); a parser reading the raw bytes would
miss a header or a row that starts with one.
"""

from __future__ import annotations

import math
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


_ASCII_NUMBER_RE = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?", re.ASCII)


def ascii_number(token: object) -> float | None:
    """`token` as a finite number written in ASCII digits, else None.

    Python's `float()` also reads `nan`, `inf`, `1_000` and digits of other scripts
    (full-width `１２３`, Arabic-Indic `١٢٣`): none of them is a measurement here.
    """
    if not isinstance(token, str) or not _ASCII_NUMBER_RE.fullmatch(token.strip()):
        return None
    try:
        value = float(token)
    except (ValueError, OverflowError):
        return None
    return value if math.isfinite(value) else None


def ends_mid_line(text: str | None) -> str | None:
    """The last line of `text` when it has no line terminator (output cut mid-line), else
    None. A number on such a line may be a longer number's first digits (`2.3` of `2.345`)."""
    if not text or text.endswith(("\n", "\r")):
        return None
    last = text.splitlines()[-1] if text.splitlines() else text
    return last if last.strip() else None


def foreign_digits(text: str | None) -> str | None:
    """`figure with non-ASCII digits: <line>` for the first line holding a digit other than
    0-9 (full-width `１`, Arabic-Indic, ...: Python's int() and float() read them, no tool
    prints them), else None."""
    for line in (text or "").splitlines():
        if any(c.isdigit() and not ("0" <= c <= "9") for c in line):
            return f"figure with non-ASCII digits: {line.strip()[:80]}"
    return None
