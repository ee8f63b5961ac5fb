"""Accumulating a builder's ops: unique names and de-duplicated dependencies."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from tpusim.program.ir import Op
from tpusim.vocabulary import OpKind


class OpList:
    """Accumulates ops, checking name uniqueness early (with a clear message)."""

    def __init__(self) -> None:
        self.ops: list[Op] = []
        self._names: set[str] = set()

    def add(self, name: str, kind: OpKind, after: Iterable[str | None], **fields: Any) -> str:
        """Append op ``name`` that waits for the non-empty names in ``after``; return
        its name. Raises ``AssertionError`` on a duplicate name (a builder bug)."""
        if name in self._names:
            raise AssertionError(f"duplicate op name {name}")
        self._names.add(name)
        deps = tuple(dict.fromkeys(a for a in after if a))
        self.ops.append(Op(name=name, kind=kind, after=deps, **fields))
        return name


class Chain:
    """Ops that each wait for the previous one (a strictly sequential program)."""

    def __init__(self, out: OpList) -> None:
        self.out = out
        self.last: str | None = None

    def add(self, name: str, kind: OpKind, **fields: Any) -> None:
        """Append op ``name`` after the last one added."""
        self.last = self.out.add(name, kind, [self.last], **fields)
