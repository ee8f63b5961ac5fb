"""Lexical helpers for HLO text: top-level splitting, bracket matching, names, integers."""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator

_CLOSING = {"(": ")", "[": "]", "{": "}"}


def strip_name(name: str) -> str:
    """``%fused.1`` -> ``fused.1``."""
    return name.strip().lstrip("%")


def int_list(text: str) -> list[int]:
    """Every integer in ``text``, in order (``{1,0}`` -> ``[1, 0]``)."""
    return [int(x) for x in re.findall(r"-?\d+", text)]


def split_top(text: str, sep: str = ",") -> list[str]:
    """Split ``text`` at ``sep`` outside brackets, braces, parentheses and quotes.

    Only the characters that matter are visited (a regex finds them), so a long
    attribute list costs a scan, not a Python step per character.
    """
    parts: list[str] = []
    depth, start = 0, 0
    for i, ch in _unquoted(text, sep):
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif ch == sep and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return parts


def _unquoted(text: str, sep: str) -> Iterator[tuple[int, str]]:
    """(index, character) of each bracket and ``sep`` of ``text`` outside quoted
    strings (a backslash escapes the next character inside them)."""
    quote, escaped = False, -1
    for m in _special_re(sep).finditer(text):
        i, ch = m.start(), m.group()
        if i == escaped:
            continue
        if quote:
            if ch == "\\":
                escaped = i + 1
            elif ch == '"':
                quote = False
        elif ch == '"':
            quote = True
        elif ch != "\\":
            yield i, ch


@functools.cache
def _special_re(sep: str) -> re.Pattern[str]:
    """Brackets, quotes, backslashes and ``sep``: what :func:`split_top` looks at."""
    return re.compile(r'[()\[\]{}"\\]|' + re.escape(sep))


def open_brackets(text: str) -> int:
    """Brackets opened and not closed in ``text``, quoted strings skipped (0 when
    balanced; negative when more close than open)."""
    depth = 0
    for _, ch in _unquoted(text, ","):
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
    return depth


def match_close(text: str, start: int) -> int:
    """Index of the bracket closing the one at ``start`` (-1 when unbalanced)."""
    stack: list[str] = []
    quote = False
    for i in range(start, len(text)):
        ch = text[i]
        if quote:
            if ch == '"' and text[i - 1] != "\\":
                quote = False
        elif ch == '"':
            quote = True
        elif ch in _CLOSING:
            stack.append(_CLOSING[ch])
        elif ch in ")]}":
            if not stack or stack.pop() != ch:
                return -1
            if not stack:
                return i
    return -1


def nesting_depth(text: str, open_ch: str, close_ch: str) -> int:
    """Deepest nesting of ``open_ch``/``close_ch`` pairs in ``text`` (quotes not skipped)."""
    depth = deepest = 0
    for ch in text:
        if ch == open_ch:
            depth += 1
            deepest = max(deepest, depth)
        elif ch == close_ch:
            depth -= 1
    return deepest
