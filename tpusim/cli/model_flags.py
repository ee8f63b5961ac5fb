"""Command-line flags generated from pydantic models, so that a field is declared once.

Each field of a model becomes one flag: ``--`` and the field's alias (else its name)
with dashes, or the ``flag`` its ``json_schema_extra`` names (a flag kept for the CLI
contract, ``--max-seqs``); the help is the field's ``description`` and its default; a
``Literal`` field offers its values as choices; a boolean field defaulting to True
becomes ``--no-NAME``; a list takes one or more values. More keys of
``json_schema_extra`` shape the flag: ``positional`` (an argument, not a flag),
``flag_type`` (an argparse type of :data:`FLAG_TYPES`), ``nargs``, ``const``,
``metavar`` and ``action`` (``append``: a repeatable flag), as argparse reads them.
Every value is passed as given (text) and validated by the model, so a flag accepts
what the YAML key does (units, ``inf``) and fails with the model's message, named by
its flag (:func:`flag_problem`); :func:`fill` does both and sets the options' values,
defaults included, back on the namespace.

:mod:`tpusim.cli.network_flags` does the same for the network's options models.
"""

from __future__ import annotations

import argparse
import types
import typing
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any, TypeVar

from pydantic import BaseModel, Field, ValidationError
from pydantic.fields import FieldInfo
from pydantic_core import ErrorDetails

from tpusim.cli.flags import path_flag, plot_flag, positive_flag, whole_flag
from tpusim.errors import InputError

ModelT = TypeVar("ModelT", bound=BaseModel)

__all__ = [
    "JsonOutput",
    "add_model_flags",
    "fill",
    "flag_of",
    "flag_problem",
    "help_of",
    "model_values",
]


#: The argparse types a field's ``flag_type`` (in its ``json_schema_extra``) names: the
#: flag's text is checked (and turned into a number) by argparse, with its own message
#: (``argument --top: must be 1 or more, got 0``), before the model sees it.
FLAG_TYPES: dict[str, Callable[[str], object]] = {
    "positive": positive_flag,
    "whole": whole_flag,
    "int": int,
    "path": path_flag,
    "plot": plot_flag,
}


def flag_of(name: str, info: FieldInfo) -> str:
    """The flag of field ``name`` (see the module docstring)."""
    extra = info.json_schema_extra
    if isinstance(extra, Mapping) and "flag" in extra:
        return "--" + str(extra["flag"])
    if _is_bool(info) and info.default is True:
        return "--no-" + (info.alias or name).replace("_", "-")
    return "--" + (info.alias or name).replace("_", "-")


def _is_bool(info: FieldInfo) -> bool:
    return info.annotation is bool or info.annotation == bool | None


def _choices(info: FieldInfo) -> tuple[object, ...] | None:
    """The values of a ``Literal`` field (also ``Literal[...] | None``), else None."""
    annotation = info.annotation
    if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union:
        literal = [a for a in typing.get_args(annotation) if typing.get_origin(a) is typing.Literal]
        annotation = literal[0] if len(literal) == 1 else annotation
    if typing.get_origin(annotation) is typing.Literal:
        return typing.get_args(annotation)
    return None


def help_of(info: FieldInfo) -> str:
    text = info.description or ""
    if info.is_required():  # no default to show (pydantic's marker is not one)
        return text
    default = info.get_default(call_default_factory=True)
    if default is None or isinstance(default, bool) or "default" in text:
        return text
    return f"{text} (default {default})" if text else f"default {default}"


def _extra(info: FieldInfo) -> Mapping[str, object]:
    extra = info.json_schema_extra
    return extra if isinstance(extra, Mapping) else {}


def _is_list(info: FieldInfo) -> bool:
    annotation = info.annotation
    args = typing.get_args(annotation) if isinstance(annotation, types.UnionType) else ()
    return any(typing.get_origin(a) is list for a in (annotation, *args))


def _argparse_options(
    info: FieldInfo, extra: Mapping[str, object], choices: Sequence[object] | None
) -> dict[str, Any]:
    """What argparse takes for a field that is not a switch (module docstring)."""
    kind, action = extra.get("flag_type"), extra.get("action")
    options: dict[str, Any] = {
        "choices": choices,
        "help": help_of(info),
        "type": FLAG_TYPES[str(kind)] if kind is not None else None,
        "nargs": extra.get("nargs", "+" if _is_list(info) and action is None else None),
    }
    if action is not None:
        options["action"] = action
    if "const" in extra:
        options["const"] = extra["const"]
    return options


def _add_field_flag(
    p: argparse.ArgumentParser,
    name: str,
    info: FieldInfo,
    choices: Sequence[object] | None = None,
) -> None:
    extra = _extra(info)
    if _is_bool(info) and not extra.get("positional"):
        flag = flag_of(name, info)
        negated = info.default is True or str(extra.get("flag", "")).startswith("no-")
        switch = "store_false" if negated else "store_true"
        p.add_argument(flag, dest=name, action=switch, default=None, help=help_of(info))
        return
    choices = choices if choices is not None else _choices(info)
    options = _argparse_options(info, extra, choices)
    if extra.get("positional"):
        metavar = extra.get("metavar")
        p.add_argument(name, metavar=None if metavar is None else str(metavar), **options)
        return
    flag = flag_of(name, info)
    shown = str(extra.get("metavar") or flag.removeprefix("--").replace("-", "_").upper())
    p.add_argument(
        flag,
        dest=name,
        default=None,
        metavar=None if choices else shown,
        required=info.is_required(),
        **options,
    )


def add_model_flags(
    p: argparse.ArgumentParser,
    model: type[BaseModel],
    skip: Collection[str] = (),
    choices: Mapping[str, Sequence[object]] | None = None,
) -> None:
    """One flag per field of ``model`` (but those in ``skip``) on ``p``; each flag's
    ``dest`` is its field's name and its value None when not given. ``choices`` gives
    the values of fields whose choices are a registry's (known when the parser is built)."""
    for name, info in model.model_fields.items():
        if name not in skip:
            _add_field_flag(p, name, info, (choices or {}).get(name))


def model_values(
    args: argparse.Namespace, model: type[BaseModel], skip: Collection[str] = ()
) -> dict[str, object]:
    """The fields of ``model`` whose flags were given, keyed as the model reads them
    (a field's alias, else its name)."""
    fields = [(name, info) for name, info in model.model_fields.items() if name not in skip]
    given = {info.alias or name: getattr(args, name, None) for name, info in fields}
    return {key: value for key, value in given.items() if value is not None}


def fill(
    args: argparse.Namespace,
    model: type[ModelT],
    skip: Collection[str] = (),
    command: str = "tpusim",
) -> ModelT:
    """The options of ``model`` the flags give (flags not given take the model's
    defaults), also set on ``args`` by field name; raises InputError naming the flag of
    the first bad value (``command: problem`` when no field is to blame)."""
    try:
        options = model.model_validate(model_values(args, model, skip))
    except ValidationError as exc:
        raise InputError(flag_problem(exc.errors()[0], model, command)) from None
    fields = [name for name in type(options).model_fields if name not in skip]
    vars(args).update({name: getattr(options, name) for name in fields})
    return options


def flag_problem(error: ErrorDetails, model: type[BaseModel], command: str) -> str:
    """One validation error of ``model`` as ``--flag: problem`` (``command: problem``
    when no field is to blame)."""
    message = error["msg"].removeprefix("Value error, ")
    key = str(error["loc"][0]) if error["loc"] else None
    for name, info in model.model_fields.items():
        if key in (name, info.alias):
            return f"{flag_of(name, info)}: {message}"
    return f"{command}: {message}"


class JsonOutput(BaseModel):
    """``--json``, which every command has."""

    as_json: bool = Field(False, alias="json", description="print one JSON object")
