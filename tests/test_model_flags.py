"""Flags generated from a pydantic model (tpusim.cli.model_flags): one flag per field,
named after it (its alias, or a ``flag`` kept in ``json_schema_extra``), help from
its description and default, choices from a Literal, ``--no-NAME`` for a switch on by
default; values validated by the model and its errors named by flag."""

from __future__ import annotations

import argparse
from typing import Literal

import pytest
from pydantic import BaseModel, Field, PositiveInt, ValidationError

from tpusim.cli.model_flags import add_model_flags, flag_of, flag_problem, model_values
from tpusim.config.types import Time


class Toy(BaseModel):
    name: str = Field(description="what to call it")
    count: PositiveInt = Field(3, description="how many")
    mode: Literal["fast", "exact"] = Field("fast", description="how to run")
    wait_s: Time = Field(0.0, alias="wait", description="time to wait first")
    checks: bool = Field(True, description="off: skip the checks")
    verbose: bool = Field(False, description="say more")
    limit_count: int | None = Field(None, description="at most", json_schema_extra={"flag": "cap"})


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="toy")
    add_model_flags(p, Toy)
    return p


def test_each_field_is_one_flag_named_after_it():
    names = {name: flag_of(name, info) for name, info in Toy.model_fields.items()}
    assert names == {
        "name": "--name",
        "count": "--count",
        "mode": "--mode",
        "wait_s": "--wait",
        "checks": "--no-checks",
        "verbose": "--verbose",
        "limit_count": "--cap",
    }


def test_help_comes_from_the_descriptions_and_defaults():
    actions = {a.dest: a for a in parser()._actions if a.option_strings}
    assert actions["count"].help == "how many (default 3)"
    assert actions["mode"].help == "how to run (default fast)"
    assert actions["mode"].choices == ("fast", "exact")
    assert actions["checks"].help == "off: skip the checks"
    assert actions["name"].required and not actions["count"].required
    assert actions["limit_count"].help == "at most"


def test_values_given_are_validated_by_the_model():
    args = parser().parse_args(["--name", "a", "--wait", "2 ms", "--no-checks", "--cap", "4"])
    values = model_values(args, Toy)
    assert values == {"name": "a", "wait": "2 ms", "checks": False, "limit_count": "4"}
    toy = Toy.model_validate(values)
    assert (toy.wait_s, toy.checks, toy.limit_count, toy.count) == (2e-3, False, 4, 3)


def test_a_bad_value_is_named_by_its_flag():
    args = parser().parse_args(["--name", "a", "--count", "0"])
    with pytest.raises(ValidationError) as info:
        Toy.model_validate(model_values(args, Toy))
    error = info.value.errors()[0]
    assert flag_problem(error, Toy, "toy") == "--count: Input should be greater than 0"
    args = parser().parse_args(["--name", "a", "--wait", "2 parsec"])
    with pytest.raises(ValidationError) as info:
        Toy.model_validate(model_values(args, Toy))
    assert flag_problem(info.value.errors()[0], Toy, "toy").startswith("--wait: ")
