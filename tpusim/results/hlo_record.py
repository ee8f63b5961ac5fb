"""The record of a replayed HLO module (``kind: hlo``)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from tpusim.results.records import ProgramRecord, Record


@dataclass(frozen=True, kw_only=True)
class HloRecord(ProgramRecord):
    """One replayed HLO module: a program's columns, then ``unknown_ops``, the
    instructions the cost model does not know (an unknown opcode, a custom call whose
    work the module does not say), costed by their bytes only."""

    unknown_ops: int = 0

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> Record:
        """The row's record (a row without the column, or an empty cell, reads back as 0)."""
        cell = row.get("unknown_ops")
        count = int(float(cell)) if cell not in (None, "") and float(cell) == float(cell) else 0
        base = ProgramRecord.from_row({k: v for k, v in row.items() if k != "unknown_ops"})
        known = {f.name: getattr(base, f.name) for f in fields(ProgramRecord)}
        return cls(**known, unknown_ops=count)
