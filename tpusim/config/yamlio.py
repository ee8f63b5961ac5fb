"""YAML loading that remembers where every value came from, and refuses hostile files.

``load_yaml`` returns the plain data (as ``yaml.safe_load`` would) together
with a map from each YAML path (a tuple of keys and list indices) to its
1-based line, so a validation error can name ``file:line path``. It refuses, as a
one-line :class:`~tpusim.errors.ConfigError`: a file that is not a regular file
(a directory, ``/dev/zero``), over :data:`~tpusim.config.limits.MAX_YAML_BYTES`,
not UTF-8, a mapping key given twice (YAML would keep the last silently), nesting
deeper than :data:`~tpusim.config.limits.MAX_YAML_DEPTH` and aliases expanding to
more than :data:`~tpusim.config.limits.MAX_YAML_NODES` nodes (an alias bomb).
"""

from __future__ import annotations

import stat
from pathlib import Path
from typing import Any

import yaml

from tpusim.config.limits import MAX_YAML_BYTES, MAX_YAML_DEPTH, MAX_YAML_NODES
from tpusim.errors import ConfigError

PathKey = tuple[str | int, ...]

_Loader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

__all__ = ["PathKey", "format_path", "line_of", "load_yaml"]


def format_path(path: PathKey) -> str:
    """``("topology", "dims", 2)`` -> ``"topology.dims[2]"``; a key that is empty or
    holds whitespace other than a space is quoted (``topology.' \\n'``), so the
    path stays on the one error line."""
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
            continue
        text = str(part)
        if not text.strip() or any(c.isspace() and c != " " for c in text):
            text = repr(text)
        out += f".{text}" if out else text
    return out


def _children(node: yaml.Node) -> list[tuple[str | int, yaml.Node, int]]:
    """(key or index, child node, line of the key) of a mapping or sequence node."""
    if isinstance(node, yaml.MappingNode):
        return [(str(k.value), v, k.start_mark.line + 1) for k, v in node.value]
    if isinstance(node, yaml.SequenceNode):
        return [(i, item, item.start_mark.line + 1) for i, item in enumerate(node.value)]
    return []


def _check_keys(node: yaml.MappingNode, path: PathKey, file: str) -> None:
    """A mapping key given twice is an error at its second line."""
    first: dict[tuple[str, str], int] = {}
    for key_node, _ in node.value:
        if not isinstance(key_node, yaml.ScalarNode) or key_node.value == "<<":
            continue
        line, key = key_node.start_mark.line + 1, (key_node.tag, key_node.value)
        if key in first:
            where = format_path((*path, str(key_node.value)))
            raise ConfigError(f"duplicate key (first on line {first[key]})", file, where, line)
        first[key] = line


def _walk(root: yaml.Node, file: str) -> dict[PathKey, int]:
    """Lines of every path, checking keys and depth; a node reached again through an
    alias is not walked again (its paths fall back to the alias's line)."""
    lines: dict[PathKey, int] = {(): root.start_mark.line + 1}
    seen: set[int] = set()
    stack: list[tuple[yaml.Node, PathKey]] = [(root, ())]
    while stack:
        node, path = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if len(path) > MAX_YAML_DEPTH:
            problem = f"nested more than {MAX_YAML_DEPTH} levels deep"
            raise ConfigError(problem, file, format_path(path), node.start_mark.line + 1)
        if isinstance(node, yaml.MappingNode):
            _check_keys(node, path, file)
        children = _children(node)
        for key, _, line in children:
            lines.setdefault((*path, key), line)
        # reversed, so nodes are walked in document order: an anchor before its aliases
        stack.extend(((child, (*path, key)) for key, child, _ in reversed(children)))
    return lines


def _expanded_sizes(root: yaml.Node) -> dict[int, int]:
    """Nodes each node stands for with every alias expanded, by ``id`` (memoised, so
    a bomb is counted without being expanded; counts stop growing past the limit)."""
    size: dict[int, int] = {}
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, done = stack.pop()
        if id(node) in size:
            continue
        kids = [child for _, child, _ in _children(node)]
        if done:
            total = 1 + sum(size.get(id(k), 0) for k in kids)
            size[id(node)] = min(total, MAX_YAML_NODES + 1)
            continue
        stack.append((node, True))
        stack.extend((k, False) for k in kids if id(k) not in size)
    return size


def _check_expansion(root: yaml.Node, file: str) -> None:
    """Refuse a file whose aliases expand past MAX_YAML_NODES, naming the first
    top-level entry that goes over."""
    size = _expanded_sizes(root)
    if size[id(root)] <= MAX_YAML_NODES:
        return
    total, where, line = 1, "", root.start_mark.line + 1
    for key, child, key_line in _children(root):
        total += size[id(child)]
        if total > MAX_YAML_NODES:
            where, line = format_path((key,)), key_line
            break
    problem = f"expands to more than {MAX_YAML_NODES:,} nodes (YAML aliases or too many keys)"
    raise ConfigError(problem, file, where, line)


def _read(path: Path, file: str) -> str:
    """The file's text; refuses non-regular files, oversize files and non-UTF-8."""
    try:
        info = path.stat()
    except FileNotFoundError:
        raise ConfigError("file does not exist", file=file) from None
    except (OSError, RuntimeError) as exc:  # a symlink loop, a path too long...
        raise ConfigError(f"cannot read file ({exc.__class__.__name__})", file=file) from None
    if not stat.S_ISREG(info.st_mode):
        what = "a directory" if stat.S_ISDIR(info.st_mode) else "not a regular file"
        raise ConfigError(f"cannot read file ({what})", file=file)
    if info.st_size > MAX_YAML_BYTES:
        raise ConfigError(
            f"file is {info.st_size:,} bytes, over the limit of {MAX_YAML_BYTES:,}", file=file
        )
    try:
        with path.open("rb") as handle:
            raw = handle.read(MAX_YAML_BYTES + 1)
    except OSError as exc:
        raise ConfigError(f"cannot read file ({exc.__class__.__name__})", file=file) from None
    if len(raw) > MAX_YAML_BYTES:
        raise ConfigError(f"file is over the limit of {MAX_YAML_BYTES:,} bytes", file=file)
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise ConfigError(
            f"not UTF-8 text (byte 0x{raw[exc.start]:02x})", file=file, line=line
        ) from None


_NODE_EVENTS = (yaml.ScalarEvent, yaml.SequenceStartEvent, yaml.MappingStartEvent, yaml.AliasEvent)


def _count_nodes(loader: Any, file: str) -> None:
    """Stop parsing at the node past MAX_YAML_NODES (before building any node: a
    10 MB file of a million values is refused in a fraction of the time to load it)."""
    count = 0
    while loader.check_event():
        event = loader.get_event()
        count += isinstance(event, _NODE_EVENTS)
        if count > MAX_YAML_NODES:
            problem = f"more than {MAX_YAML_NODES:,} YAML nodes"
            raise ConfigError(problem, file=file, line=event.start_mark.line + 1)


def _compose(text: str, file: str) -> tuple[Any, dict[PathKey, int]]:
    """(data, lines) of ``text``, checked before it is constructed into data. A text
    shorter than MAX_YAML_NODES characters is composed without counting its nodes first
    (composing it is quick, and :func:`_check_expansion` holds it to the limit)."""
    if len(text) >= MAX_YAML_NODES:
        counter = _Loader(text)
        try:
            _count_nodes(counter, file)
        except yaml.YAMLError:
            pass  # reported with its line by the parse below
        finally:
            counter.dispose()
    loader = _Loader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None, {}
        _check_expansion(node, file)
        lines = _walk(node, file)
        return loader.construct_document(node), lines
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        problem = getattr(exc, "problem", None) or "invalid YAML"
        line = mark.line + 1 if mark is not None else None
        raise ConfigError(f"not valid YAML: {problem}", file=file, line=line) from None
    except RecursionError:
        problem = f"not valid YAML: nested more than {MAX_YAML_DEPTH} levels deep"
        raise ConfigError(problem, file=file) from None
    finally:
        loader.dispose()


def load_yaml(file: str | Path) -> tuple[Any, dict[PathKey, int]]:
    """Read a YAML file; return ``(data, lines)``.

    Raises ConfigError naming the file (and the line where there is one) when it
    does not exist, is not a readable regular file of at most MAX_YAML_BYTES of
    UTF-8, is not valid YAML, repeats a key in a mapping, nests deeper than
    MAX_YAML_DEPTH or expands (through aliases) to more than MAX_YAML_NODES nodes.
    """
    return _compose(_read(Path(file), str(file)), str(file))


def line_of(lines: dict[PathKey, int], path: PathKey) -> int | None:
    """The line of ``path``, or of its nearest ancestor that has one."""
    for end in range(len(path), -1, -1):
        if path[:end] in lines:
            return lines[path[:end]]
    return None
