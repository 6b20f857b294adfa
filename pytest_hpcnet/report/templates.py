"""The Jinja2 environment every report page renders with: the package's templates,
autoescaped (node output is hostile), strict about undefined names."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from jinja2 import Environment, PackageLoader, StrictUndefined


def page_environment(
    filters: dict[str, Callable[..., Any]], globals_: dict[str, Any] | None = None
) -> Environment:
    """An environment over `pytest_hpcnet/templates` with these filters and globals."""
    env = Environment(
        loader=PackageLoader("pytest_hpcnet", "templates"),
        autoescape=True,
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.filters.update(filters)
    env.globals.update(globals_ or {})
    return env
