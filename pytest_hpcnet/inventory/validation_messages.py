"""One-line messages for pydantic validation errors, one per problem: the key path, the
problem, and the nearest valid key when a key is unknown (a typo)."""

from __future__ import annotations

import difflib
from typing import Any

from pydantic import BaseModel, ValidationError


def _loc_text(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out


def _model_at(model: type[BaseModel] | None, loc: tuple[Any, ...]) -> type[BaseModel] | None:
    """The pydantic model class found by walking `loc` from `model` (None if not a model)."""
    for part in loc:
        if model is None or isinstance(part, int):
            continue
        field = model.model_fields.get(str(part))
        if field is None:
            return None
        model = _inner_model(field.annotation)
    return model


def _inner_model(annotation: Any) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in getattr(annotation, "__args__", ()) or ():
        found = _inner_model(arg)
        if found is not None:
            return found
    return None


def _describe(error: dict[str, Any], root: type[BaseModel], prefix: str = "") -> str:
    loc = tuple(error["loc"])
    where = prefix + _loc_text(loc) if loc else prefix.rstrip(".") or "(top level)"
    if error["type"] == "extra_forbidden":
        key = str(loc[-1])
        parent = _model_at(root, loc[:-1])
        choices = list(parent.model_fields) if parent else []
        near = difflib.get_close_matches(key, choices, n=1, cutoff=0.6)
        hint = f" (did you mean {near[0]!r}?)" if near else f" (valid keys: {', '.join(choices)})"
        return f"{where}: unknown key{hint}"
    if error["type"] == "missing":
        return f"{where}: required key is missing"
    msg = str(error["msg"]).removeprefix("Value error, ")
    got = error.get("input")
    if error["type"] not in ("value_error",) and not isinstance(got, (dict, list)):
        msg = f"{msg} (got {got!r})"
    if error["type"] == "string_type" and isinstance(got, (int, float)):
        msg += "; YAML read it as a number: write it in quotes, as you mean it"
    return f"{where}: {msg}"


def every_error(exc: ValidationError, root: type[BaseModel], prefix: str = "") -> list[str]:
    """One line per problem, a typo (an unknown key, which also shows up as a missing
    one) first."""
    errors = sorted(exc.errors(), key=lambda e: e["type"] != "extra_forbidden")
    return list(dict.fromkeys(_describe(error, root, prefix) for error in errors))
