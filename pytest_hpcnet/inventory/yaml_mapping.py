"""Reading a YAML mapping from text with one-line errors and no silently repeated keys."""

from __future__ import annotations

from typing import Any

import yaml


class YamlMappingError(ValueError):
    """The text is not a YAML mapping; the message is one line (with the line number)."""


class UniqueKeyLoader(yaml.SafeLoader):
    """SafeLoader that refuses duplicate mapping keys instead of keeping the last one."""


def _mapping_no_duplicates(loader: UniqueKeyLoader, node: yaml.MappingNode) -> dict:
    keys: set[Any] = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node)
        if not isinstance(key, (str, int, float, bool)) and key is not None:
            raise YamlMappingError(f"line {key_node.start_mark.line + 1}: key is not a scalar")
        if key in keys:
            raise YamlMappingError(f"line {key_node.start_mark.line + 1}: duplicate key {key!r}")
        keys.add(key)
    return loader.construct_mapping(node)


TIMESTAMP_TAG = "tag:yaml.org,2002:timestamp"
UniqueKeyLoader.yaml_implicit_resolvers = {
    first: [(tag, pattern) for tag, pattern in resolvers if tag != TIMESTAMP_TAG]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
"""A date stays the text it was written as: pydantic reads it and names the key when it is
no date (`2026-13-01`), where YAML's own timestamp parsing would raise past the loader."""

UniqueKeyLoader.add_constructor(
    yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _mapping_no_duplicates
)


def load_mapping(text: str, expected: str) -> dict[str, Any]:
    """The mapping in `text`; `expected` says what it should hold, for the error message."""
    try:
        data = yaml.load(text, Loader=UniqueKeyLoader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        raise YamlMappingError(f"{where}YAML syntax error: {problem}") from None
    except RecursionError:
        raise YamlMappingError("YAML nesting too deep") from None
    if not isinstance(data, dict):
        kind = "empty" if data is None else type(data).__name__
        raise YamlMappingError(f"expected {expected}; got {kind}")
    return data
