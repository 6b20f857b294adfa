"""The error every node source raises: one line naming the source file, the line or key."""

from __future__ import annotations


def one_line(text: str) -> str:
    """`text` with newlines and other unprintable characters escaped (keys may hold them)."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


class InventorySourceError(ValueError):
    """A bad node source: one line naming the source file, the line or key, and the problem."""

    def __init__(self, message: str) -> None:
        super().__init__(one_line(message))
