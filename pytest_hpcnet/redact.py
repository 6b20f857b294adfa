"""Secrets known to the session, and their removal from any text that leaves it.

Every value read from `${VAR}` in an inventory, every passphrase and token is
registered here; `redact()` is applied to every command, output, log line and
evidence file before it is written or shown.
"""

from __future__ import annotations

import threading

MASK = "***"
_MIN_SECRET_LEN = 3

_lock = threading.Lock()
_secrets: set[str] = set()


def register_secret(value: str | None) -> None:
    """Remember `value` so that `redact()` masks it from now on."""
    if value and len(value) >= _MIN_SECRET_LEN:
        with _lock:
            _secrets.add(value)


def redact(text: str) -> str:
    """`text` with every registered secret replaced by `***` (longest first)."""
    if not _secrets or not text:
        return text
    for secret in sorted(_secrets, key=len, reverse=True):
        if secret in text:
            text = text.replace(secret, MASK)
    return text


def has_secrets() -> bool:
    """True once any secret is registered (until then `redact()` changes nothing)."""
    return bool(_secrets)


def clear_secrets() -> None:
    """Forget all secrets (tests only)."""
    with _lock:
        _secrets.clear()
