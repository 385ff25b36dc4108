"""A campaign file with one block replaced and everything else — comments, order, spelling —
kept as written (`station bench check --apply`: the proposed bench.scope in a copy)."""

from __future__ import annotations

from typing import Any

import yaml

from station.config.yaml_lines import ConfigError, load_yaml


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def _blank(line: str) -> bool:
    return not line.strip() or line.lstrip().startswith("#")


def replace_block(text: str, path: tuple[str, ...], value: dict[str, Any], comment: str = "",
                  source: str = "campaign") -> str:
    """`text` with the mapping at `path` (e.g. ("bench", "scope")) replaced by `value`, in block
    style under the same key; added under its parent when the file leaves it out. The parent
    must be there (a campaign always has its `bench`)."""
    data, lines = load_yaml(text, source)
    rows = text.splitlines(keepends=True)
    *parents, key = path
    parent = tuple(parents)
    if parent and parent not in lines:
        raise ConfigError(f"{source}: has no {'.'.join(parent)} to put {key} under")
    if path in lines:
        start = lines[path] - 1
        indent = _indent(rows[start])
        end = start + 1
        while end < len(rows) and (_blank(rows[end]) or _indent(rows[end]) > indent):
            end += 1
        while end > start + 1 and _blank(rows[end - 1]):  # the blank lines after it stay
            end -= 1
    else:
        at = lines[parent] - 1 if parent else -1
        indent = _indent(rows[at]) + 2 if parent else 0
        start = end = at + 1
    body = yaml.safe_dump(value, sort_keys=False, default_flow_style=False, allow_unicode=True)
    pad = " " * indent
    block = [f"{pad}{key}:{'  # ' + comment if comment else ''}\n"]
    block += [f"{pad}  {line}\n" for line in body.splitlines()]
    out = "".join(rows[:start] + block + rows[end:])
    load_yaml(out, source)  # what is written must read back
    return out
