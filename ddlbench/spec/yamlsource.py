"""Load YAML while remembering where every value came from.

Validation errors must point at ``file:line:col``. PyYAML's composer keeps node positions,
so we compose the node tree and build plain Python objects next to a map from each value's
path (a tuple of keys and indices) to its 1-based line and column.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, Tuple

import yaml

from ddlbench.errors import InputError, Problem

Loc = Tuple[Any, ...]


@dataclass
class YamlSource:
    """Parsed YAML data plus the position of every mapping key and value."""

    data: Any
    file: str
    positions: Dict[Loc, Tuple[int, int]] = field(default_factory=dict)
    text: str = ""

    def position(self, loc: Loc) -> Tuple[int | None, int | None]:
        """Line and column of ``loc``, falling back to the closest enclosing value."""
        loc = tuple(loc)
        while True:
            if loc in self.positions:
                return self.positions[loc]
            if not loc:
                return None, None
            loc = loc[:-1]

    def problem(self, loc: Loc, message: str) -> Problem:
        line, col = self.position(loc)
        return Problem(message, file=self.file, line=line, col=col, where=format_loc(loc))


def format_loc(loc: Loc) -> str | None:
    """``('frameworks', 1, 'backend')`` -> ``frameworks[1].backend``."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out or None


class _Loader(yaml.SafeLoader):
    pass


MERGE_TAG = "tag:yaml.org,2002:merge"


def _plain_key(key_node: yaml.Node, loader: _Loader) -> Any:
    key = loader.construct_object(key_node, deep=True)
    if not isinstance(key, (str, int, float, bool)) or key is None:
        raise InputError(
            Problem(
                "mapping keys must be plain scalars",
                file=None,
                line=key_node.start_mark.line + 1,
                col=key_node.start_mark.column + 1,
            )
        )
    return key


def _check_duplicates(node: yaml.MappingNode, loader: _Loader) -> None:
    """A key written twice in one mapping is an error (YAML says keys are unique).

    Checked before merge keys (``<<: *base``) are flattened: a key written here legitimately
    overrides the same key merged in from an anchor.
    """
    first: Dict[Any, yaml.Node] = {}
    for key_node, _ in node.value:
        if key_node.tag == MERGE_TAG:
            continue
        key = _plain_key(key_node, loader)
        if key in first:
            raise _DuplicateKey(key, key_node, first[key])
        first[key] = key_node


def _build(node: yaml.Node, loc: Loc, positions: Dict[Loc, Tuple[int, int]], loader) -> Any:
    positions[loc] = (node.start_mark.line + 1, node.start_mark.column + 1)
    if isinstance(node, yaml.MappingNode):
        _check_duplicates(node, loader)
        loader.flatten_mapping(node)
        out: Dict[Any, Any] = {}
        # merged pairs come first, explicit ones last: the last one of a key wins
        for key_node, value_node in node.value:
            key = _plain_key(key_node, loader)
            out[key] = _build(value_node, loc + (key,), positions, loader)
            # point a key's errors at the key itself, which is where readers look
            positions[loc + (key,)] = (key_node.start_mark.line + 1, key_node.start_mark.column + 1)
        return out
    if isinstance(node, yaml.SequenceNode):
        return [_build(item, loc + (i,), positions, loader) for i, item in enumerate(node.value)]
    return loader.construct_object(node, deep=True)


class _DuplicateKey(Exception):
    def __init__(self, key: Any, node: yaml.Node, first: yaml.Node):
        self.key, self.node, self.first = key, node, first


def _not_text(file: str, what: str) -> InputError:
    return InputError(Problem(f"not a YAML text file ({what})", file))


def parse_yaml(text: str, file: str) -> YamlSource:
    """Parse YAML text; syntax errors become an :class:`InputError` with a position."""
    try:
        loader = _Loader(text)
    except yaml.reader.ReaderError as exc:  # a control character (str input is checked here)
        line = text.count("\n", 0, exc.position) + 1
        raise _not_text(file, f"character #x{exc.character:04x} on line {line}") from None
    try:
        node = loader.get_single_node()
        positions: Dict[Loc, Tuple[int, int]] = {}
        data = _build(node, (), positions, loader) if node is not None else None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark else None
        col = mark.column + 1 if mark else None
        what = exc.problem or exc.context or "invalid YAML"
        raise InputError(Problem(f"YAML syntax error: {what}", file, line, col)) from None
    except yaml.YAMLError as exc:
        raise InputError(Problem(f"YAML error: {exc}", file)) from None
    except _DuplicateKey as dup:
        mark, first = dup.node.start_mark, dup.first.start_mark.line + 1
        message = f"duplicate key '{dup.key}' (first at line {first})"
        raise InputError(Problem(message, file, mark.line + 1, mark.column + 1)) from None
    except InputError as err:
        raise InputError([Problem(p.message, file, p.line, p.col) for p in err.problems]) from None
    finally:
        loader.dispose()
    return YamlSource(data=data, file=file, positions=positions, text=text)


def load_yaml(path: str | Path) -> YamlSource:
    """Read and parse a YAML file; a missing or unreadable file is an :class:`InputError`."""
    p = Path(path)
    try:
        raw = p.read_bytes()
    except FileNotFoundError:
        raise InputError(Problem(f"no such file: {p}")) from None
    except IsADirectoryError:
        raise InputError(Problem(f"{p} is a folder, not a YAML file")) from None
    except OSError as exc:
        raise InputError(Problem(f"cannot read {p}: {exc.strerror or exc}")) from None
    return parse_yaml(decode_text(raw, str(path)), str(path))


def decode_text(raw: bytes, file: str) -> str:
    """UTF-8 text (a leading byte-order mark allowed), or ``file: not a YAML text file``."""
    nul = raw.find(b"\0")
    if nul >= 0:
        line = raw.count(b"\n", 0, nul) + 1
        raise _not_text(file, f"a NUL byte on line {line}: binary data")
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        byte = raw[exc.start]
        raise _not_text(file, f"byte 0x{byte:02x} on line {line} is not UTF-8") from None


def problem_at(source: YamlSource | None, loc: Loc, message: str) -> Problem:
    """A problem at ``loc``: with the spec's ``file:line`` when its source is known, else the
    key path alone (a spec built in code)."""
    if source is not None:
        return source.problem(loc, message)
    return Problem(message, where=format_loc(loc))
