"""YAML loading that remembers where every value came from.

``load_yaml`` returns the plain data (as ``yaml.safe_load`` would) together
with a map from each YAML path (a tuple of keys and list indices) to its
1-based line, so a validation error can name ``file:line path``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from tpusim.errors import ConfigError

PathKey = tuple[str | int, ...]


def format_path(path: PathKey) -> str:
    """``("topology", "dims", 2)`` -> ``"topology.dims[2]"``."""
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _line_map(node: yaml.Node, path: PathKey, lines: dict[PathKey, int]) -> None:
    lines[path] = node.start_mark.line + 1
    if isinstance(node, yaml.MappingNode):
        for key_node, value_node in node.value:
            key = str(key_node.value)
            lines[(*path, key)] = key_node.start_mark.line + 1
            _line_map(value_node, (*path, key), lines)
            lines[(*path, key)] = key_node.start_mark.line + 1
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            _line_map(item, (*path, index), lines)


def load_yaml(file: str | Path) -> tuple[Any, dict[PathKey, int]]:
    """Read a YAML file; return ``(data, lines)``.

    Raises ConfigError naming the file when it does not exist, is not
    readable or is not valid YAML (with the line of the syntax error).
    """
    path = Path(file)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError("file does not exist", file=str(file)) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read file ({exc.__class__.__name__})", file=str(file)) from None
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        problem = getattr(exc, "problem", None) or "invalid YAML"
        line = mark.line + 1 if mark is not None else None
        raise ConfigError(f"not valid YAML: {problem}", file=str(file), line=line) from None
    lines: dict[PathKey, int] = {}
    if node is not None:
        _line_map(node, (), lines)
    return data, lines


def line_of(lines: dict[PathKey, int], path: PathKey) -> int | None:
    """The line of ``path``, or of its nearest ancestor that has one."""
    for end in range(len(path), -1, -1):
        if path[:end] in lines:
            return lines[path[:end]]
    return None
