"""A campaign file with one block replaced and everything else — comments, order, spelling,
line endings — kept as written (`station bench check --apply`: the proposed bench.scope in a
copy)."""

from __future__ import annotations

import copy
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
    must be a block mapping in the file (a campaign always has its `bench`); ConfigError
    otherwise, and whenever the result would read back as anything but the old document with
    that one key changed."""
    data, lines = load_yaml(text, source)
    newline = "\r\n" if "\r\n" in text else "\n"
    rows = text.splitlines(keepends=True)
    *parents, key = path
    parent = tuple(parents)
    if parent and parent not in lines:
        raise ConfigError(f"{source}: has no {'.'.join(parent)} to put {key} under")
    if parent:
        parent_row = rows[lines[parent] - 1]
        if parent_row.rstrip().endswith(("{", "}", "]")) or "{" in parent_row.split("#")[0]:
            raise ConfigError(f"{source}:{lines[parent]}: {'.'.join(parent)} is written in flow "
                              "style ({…}): write it as a block to have a key replaced in it")
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
        # a new key goes in at the indentation of its parent's first child
        children = [r for r in rows[at + 1:] if not _blank(r)]
        indent = _indent(children[0]) if parent and children else 0
        if parent and indent <= _indent(rows[at]):
            indent = _indent(rows[at]) + 2
        start = end = at + 1
    body = yaml.safe_dump(value, sort_keys=False, default_flow_style=False, allow_unicode=True)
    pad = " " * indent
    block = [f"{pad}{key}:{'  # ' + comment if comment else ''}{newline}"]
    block += [f"{pad}  {line}{newline}" for line in body.splitlines()]
    if start > 0 and not rows[start - 1].endswith(("\n", "\r")):
        rows[start - 1] += newline
    out = "".join(rows[:start] + block + rows[end:])
    expected = copy.deepcopy(data)
    node = expected
    for name in parent:
        node = node[name]
    node[key] = value
    try:
        back = load_yaml(out, source)[0]
    except ConfigError:
        back = None
    if back != expected:
        raise ConfigError(f"{source}: replacing {'.'.join(path)} would change more than that "
                          "block (an anchor or alias across it?): edit the file by hand")
    return out
