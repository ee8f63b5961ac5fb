"""The one registry class (issue 25): same entry twice is a no-op, another entry under
a taken name and an unknown name raise the same errors in every family."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from tpusim.errors import InputError
from tpusim.registry import DuplicateEntryError, Registry, UnknownEntryError


@dataclass(frozen=True)
class Entry:
    cost: str


def test_register_get_names_in_order_and_where():
    reg: Registry[Entry] = Registry("toy thing")
    a, b = reg.register("a", Entry("cheap")), reg.register("b", Entry("dear"))
    assert reg.get("a") is a and reg.get("b") is b
    assert reg.names() == ("a", "b") and len(reg) == 2 and "a" in reg
    assert reg.names(where=lambda e: e.cost == "dear") == ("b",)


def test_same_entry_again_is_a_no_op_and_another_raises():
    reg: Registry[object] = Registry("toy thing")
    entry = object()
    reg.register("x", entry)
    reg.register("x", entry)
    with pytest.raises(DuplicateEntryError, match="toy thing 'x' is already registered"):
        reg.register("x", object())
    reg.unregister("x")
    reg.unregister("x")
    reg.register("x", object())


def test_unknown_name_is_an_input_error_naming_the_known_ones():
    reg: Registry[int] = Registry("toy thing")
    reg.register("one", 1)
    with pytest.raises(
        UnknownEntryError, match=r"unknown toy thing 'two' \(choose from one\)"
    ) as e:
        reg.get("two")
    assert isinstance(e.value, InputError) and isinstance(e.value, ValueError)
    assert e.value.exit_code == 2


def test_on_register_sees_new_entries_only_and_a_refusal_keeps_nothing():
    seen: list[tuple[str, int]] = []

    def hook(name: str, entry: int) -> None:
        if entry < 0:
            raise ValueError("negative")
        seen.append((name, entry))

    reg: Registry[int] = Registry("toy thing", hook)
    reg.register_all((("a", 1), ("b", 2)))
    reg.register("a", 1)  # the same entry again: no second call
    assert seen == [("a", 1), ("b", 2)]
    with pytest.raises(ValueError, match="negative"):
        reg.register("c", -1)
    assert "c" not in reg and reg.names() == ("a", "b")
