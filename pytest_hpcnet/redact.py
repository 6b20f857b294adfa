"""Secrets known to the session, and their removal from any text that leaves it.

Every value read from `${VAR}` in an inventory, every passphrase and token is
registered here; `redact()` is applied to every command, output, log line and
evidence file before it is written or shown.
"""

from __future__ import annotations

import json
import threading

MASK = "***"
_MIN_SECRET_LEN = 3

_lock = threading.Lock()
_secrets: set[str] = set()
_ordered: tuple[str, ...] = ()  # longest first, remade when a secret is added
_forms: tuple[str, ...] = ()  # each secret as it is and as JSON writes it inside a string


def register_secret(value: str | None) -> None:
    """Remember `value` so that `redact()` masks it from now on."""
    global _ordered, _forms
    if value and len(value) >= _MIN_SECRET_LEN:
        with _lock:
            _secrets.add(value)
            _ordered = tuple(sorted(_secrets, key=len, reverse=True))
            escaped = (json.dumps(s, ensure_ascii=False)[1:-1] for s in _ordered)
            _forms = tuple(dict.fromkeys((*_ordered, *escaped)))


def redact(text: str) -> str:
    """`text` with every registered secret replaced by `***` (longest first)."""
    if not _secrets or not text:
        return text
    for secret in _ordered:
        if secret in text:
            text = text.replace(secret, MASK)
    return text


def mentions_secret(json_text: str) -> bool:
    """Whether JSON text (`ensure_ascii=False`) may hold a registered secret in any of its
    strings: the secret as it is or as JSON escapes it. False means no string in it does."""
    return any(form in json_text for form in _forms)


def has_secrets() -> bool:
    """True once any secret is registered (until then `redact()` changes nothing)."""
    return bool(_secrets)


def clear_secrets() -> None:
    """Forget all secrets (tests only)."""
    global _ordered, _forms
    with _lock:
        _secrets.clear()
        _ordered, _forms = (), ()
