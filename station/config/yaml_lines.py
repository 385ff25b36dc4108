"""YAML for campaign files: loading bounded before any Python object is built
(size, nesting, alias uses, recursive aliases, expanded size: no billion
laughs), and the line of every key and item, so errors can name them."""

from __future__ import annotations

import re
from typing import Any

import yaml
from yaml.composer import Composer
from yaml.constructor import ConstructorError, SafeConstructor
from yaml.events import AliasEvent
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode
from yaml.parser import Parser
from yaml.reader import Reader
from yaml.resolver import Resolver
from yaml.scanner import Scanner

from station.common.units import shorten

MAX_FILE_BYTES = 1 << 20  # a campaign is a few kB; 1 MiB leaves room for long load commands
MAX_DEPTH = 32  # nesting levels in the YAML document (a campaign needs 7)
MAX_ALIASES = 100  # alias uses (*name, also in merge keys <<: *name)
MAX_NODES = 100_000  # values in the document once aliases are expanded


class ConfigError(Exception):
    """A campaign file that cannot be used; the message names file, line and field."""


def clip(message: str, limit: int = 300) -> str:
    """One line of at most `limit` characters."""
    message = " ".join(message.split())
    return message if len(message) <= limit else message[: limit - 3] + "..."


class _Refused(yaml.YAMLError):
    """A document over one of the loader's limits."""

    def __init__(self, mark: Any, message: str) -> None:
        super().__init__(message)
        self.mark = mark
        self.message = message


class _BoundedComposer(Composer):
    """Composes nodes while counting nesting depth and alias uses, and refuses an alias
    to a node that is still being composed (a recursive structure)."""

    def __init__(self) -> None:
        super().__init__()
        self._depth = 0
        self._aliases = 0
        self._open: set[str] = set()

    def compose_node(self, parent: Node | None, index: Any) -> Node:
        event = self.peek_event()
        if isinstance(event, AliasEvent):
            if event.anchor in self._open:
                raise _Refused(event.start_mark,
                               f"alias *{event.anchor} is inside its own anchor (recursive alias)")
            self._aliases += 1
            if self._aliases > MAX_ALIASES:
                raise _Refused(event.start_mark, f"more than {MAX_ALIASES} alias uses")
            return super().compose_node(parent, index)
        self._depth += 1
        if self._depth > MAX_DEPTH:
            raise _Refused(event.start_mark, f"nested deeper than {MAX_DEPTH} levels")
        anchor = getattr(event, "anchor", None)
        if anchor is not None:
            self._open.add(anchor)
        try:
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1
            if anchor is not None:
                self._open.discard(anchor)


class _Constructor(SafeConstructor):
    """SafeConstructor whose scalar failures (a date like 2001-13-45, an int of 5000 digits)
    are YAML errors with the scalar's line, not bare ValueErrors."""

    def construct_object(self, node: Node, deep: bool = False) -> Any:
        try:
            return super().construct_object(node, deep)
        except yaml.YAMLError:
            raise
        # PyYAML's own bugs too (!!timestamp x: AttributeError)
        except Exception as exc:  # noqa: BLE001
            what = shorten(node.value) if isinstance(node, ScalarNode) else node.tag
            message = f"cannot read {what}: {clip(str(exc), 80)}"
            raise ConstructorError(None, None, message, node.start_mark) from None


class PyLoader(Reader, Scanner, Parser, _BoundedComposer, _Constructor, Resolver):
    def __init__(self, stream: str) -> None:
        Reader.__init__(self, stream)
        Scanner.__init__(self)
        Parser.__init__(self)
        _BoundedComposer.__init__(self)
        _Constructor.__init__(self)
        Resolver.__init__(self)


try:  # libyaml's parser when present (about 4x faster); composing stays in Python, bounded
    from yaml._yaml import CParser

    class _CLoader(_BoundedComposer, CParser, _Constructor, Resolver):  # type: ignore[misc]
        def __init__(self, stream: str) -> None:
            CParser.__init__(self, stream)
            _BoundedComposer.__init__(self)
            _Constructor.__init__(self)
            Resolver.__init__(self)

    Loader: type = _CLoader
except ImportError:  # pragma: no cover - PyYAML without libyaml
    Loader = PyLoader


_NON_PRINTABLE = re.compile(
    "[^\x09\x0a\x0d\x20-\x7e\x85\xa0-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]"
)


def _children(node: Node) -> list[Node]:
    if isinstance(node, MappingNode):
        return [n for pair in node.value for n in pair]
    if isinstance(node, SequenceNode):
        return list(node.value)
    return []


def _check_expansion(root: Node) -> None:
    """Refuse a document whose alias-expanded tree is deeper than MAX_DEPTH or larger than
    MAX_NODES (billion laughs), measured on the node graph without expanding it."""
    memo: dict[int, tuple[int, int]] = {}  # id(node) -> (expanded size, height)

    def visit(node: Node, depth: int, parent: Node | None) -> tuple[int, int]:
        known = memo.get(id(node))
        if known is not None:  # an alias (or a node met before): report where it is used
            if depth + known[1] - 1 > MAX_DEPTH:
                where = (parent or node).start_mark
                raise _Refused(where,
                               f"nested deeper than {MAX_DEPTH} levels once aliases are expanded")
            return known
        if depth > MAX_DEPTH:
            raise _Refused(node.start_mark,
                           f"nested deeper than {MAX_DEPTH} levels once aliases are expanded")
        size, height = 1, 1
        for child in _children(node):
            seen = id(child) in memo
            child_size, child_height = visit(child, depth + 1, node)
            size += child_size
            height = max(height, child_height + 1)
            if size > MAX_NODES:  # reported at the value that tipped the count over
                where = node.start_mark if seen else child.start_mark
                raise _Refused(where,
                               f"expands to more than {MAX_NODES} values (aliases repeat what they "
                               "name)")
        memo[id(node)] = (size, height)
        return size, height

    visit(root, 1, None)


def _check_duplicate_keys(root: Node) -> None:
    """Refuse a mapping that names a key twice: YAML loaders keep the last value without a word
    (samples: 100 … samples: 5000000 would run 5 000 000). Keys merged in with << are not
    duplicates: the mapping's own keys override them, as YAML defines."""
    seen_nodes: set[int] = set()
    stack = [root]
    while stack:
        node = stack.pop()
        if id(node) in seen_nodes:  # an alias: checked where it was defined
            continue
        seen_nodes.add(id(node))
        if isinstance(node, MappingNode):
            first: dict[tuple[str, str], int] = {}
            for key_node, _ in node.value:
                if not isinstance(key_node,
                                  ScalarNode) or key_node.tag == "tag:yaml.org,2002:merge":
                    continue
                key = (key_node.tag, key_node.value)
                line = key_node.start_mark.line + 1
                if key in first:
                    raise _Refused(key_node.start_mark,
                                   f"key {shorten(key_node.value)} given twice (lines {first[key]} "
                                   f"and {line}): say it once")
                first[key] = line
        stack.extend(_children(node))


def _compose_lines(node: Node, path: tuple, lines: dict[tuple, int]) -> None:
    lines.setdefault(path, node.start_mark.line + 1)
    if isinstance(node, MappingNode):
        for key_node, value_node in node.value:
            if not isinstance(key_node, ScalarNode):
                continue
            key = key_node.value
            _compose_lines(value_node, (*path, key), lines)
            lines[(*path, key)] = key_node.start_mark.line + 1
    elif isinstance(node, SequenceNode):
        for i, item in enumerate(node.value):
            _compose_lines(item, (*path, i), lines)


_LINE_BREAK = re.compile("\r\n|[\r\n\x85\u2028\u2029]")


def line_at(text: str, index: int) -> int:
    """The line of character `index`, counting line breaks as YAML does: \n, \r\n, \r,
    NEL, U+2028, U+2029 (editors differ on the last three; they are rare in a campaign)."""
    return len(_LINE_BREAK.findall(text, 0, index)) + 1


def _line_of(exc: yaml.YAMLError, text: str) -> int | None:
    mark = (
        getattr(exc, "mark", None)
        or getattr(exc, "problem_mark", None)
        or getattr(exc, "context_mark", None)
    )
    if mark is not None:  # an error at the end of the text is reported on its last line
        return min(mark.line + 1, max(line_at(text, len(text.rstrip("\r\n\x85\u2028\u2029"))), 1))
    position = getattr(exc, "position", None)  # ReaderError
    if isinstance(position, int):
        return line_at(text, position)
    return None


def load_yaml(text: str, source: str) -> tuple[Any, dict[tuple, int]]:
    """The document as Python data and the line of every key and item; ConfigError otherwise."""
    if len(text) > MAX_FILE_BYTES:
        raise ConfigError(f"{source}:?: too large ({len(text)} characters; a campaign file is at "
                          "most 1 MiB)")
    bad = _NON_PRINTABLE.search(text)
    if bad:
        line = line_at(text, bad.start())
        raise ConfigError(
            f"{source}:{line}: not a text file (character {bad.start()} is "
            f"U+{ord(bad.group()):04X}, which YAML does not allow)"
        )
    loader = Loader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            data = None
        else:
            _check_expansion(node)
            _check_duplicate_keys(node)
            data = loader.construct_document(node)
    except _Refused as exc:
        raise ConfigError(
            f"{source}:{_line_of(exc, text) or '?'}: refused: {exc.message}"
        ) from None
    except yaml.YAMLError as exc:
        line = _line_of(exc, text)
        problem = getattr(exc, "problem", None) or str(exc)
        # PyYAML ≥ 6.0.4 stops far deeper nesting itself, above our limit
        if "nesting depth" in problem:
            raise ConfigError(f"{source}:{line or '?'}: refused: nested deeper than {MAX_DEPTH} "
                              "levels") from None
        raise ConfigError(f"{source}:{line or '?'}: not valid YAML: {clip(problem, 200)}") from None
    except Exception as exc:  # noqa: BLE001 - whatever PyYAML raises, the user gets one line
        raise ConfigError(
            f"{source}:?: not valid YAML: {type(exc).__name__}: {clip(str(exc), 80)}"
        ) from None
    finally:
        loader.dispose()
    lines: dict[tuple, int] = {}
    if node is not None:
        _compose_lines(node, (), lines)
    return data, lines
