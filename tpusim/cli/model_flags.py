"""Command-line flags generated from pydantic models, so that a field is declared once.

Each field of a model becomes one flag: ``--`` and the field's alias (else its name)
with dashes, or the ``flag`` its ``json_schema_extra`` names (a flag kept for the CLI
contract, ``--max-seqs``); the help is the field's ``description`` and its default; a
``Literal`` field offers its values as choices; a boolean field defaulting to True
becomes ``--no-NAME``. Every value is passed as given (text) and validated by the
model, so a flag accepts what the YAML key does (units, ``inf``) and fails with the
model's message, named by its flag (:func:`flag_problem`).

:func:`add_network_flags` does the same for the network: ``--fidelity`` (the
registered fidelities) and one flag per option of every registered fidelity's options
model (``--flow-tolerance``, ``--packet-bytes``; a new fidelity's options appear with
it), read back as one :class:`~tpusim.network.NetworkSettings` by :func:`network_of`.
"""

from __future__ import annotations

import argparse
import types
import typing
from collections.abc import Collection, Iterator, Mapping

from pydantic import BaseModel, ValidationError
from pydantic.fields import FieldInfo
from pydantic_core import ErrorDetails

from tpusim.errors import InputError
from tpusim.network import NETWORKS, NetworkSettings, network_tree, option_keys

__all__ = [
    "add_model_flags",
    "add_network_flags",
    "flag_of",
    "flag_problem",
    "model_values",
    "network_flags_given",
    "network_of",
]

#: Where the network flags keep their values on the namespace (dest prefix).
_NETWORK_DEST = "network_option:"


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


def _help(info: FieldInfo) -> str:
    text = info.description or ""
    if info.is_required():  # no default to show (pydantic's marker is not one)
        return text
    default = info.get_default(call_default_factory=True)
    if default is None or isinstance(default, bool) or "default" in text:
        return text
    return f"{text} (default {default})" if text else f"default {default}"


def _add_field_flag(p: argparse.ArgumentParser, name: str, info: FieldInfo) -> None:
    flag = flag_of(name, info)
    if _is_bool(info):
        action = "store_false" if flag.startswith("--no-") else "store_true"
        p.add_argument(flag, dest=name, action=action, default=None, help=_help(info))
        return
    p.add_argument(
        flag,
        dest=name,
        default=None,
        choices=_choices(info),
        metavar=None if _choices(info) else flag.removeprefix("--").replace("-", "_").upper(),
        required=info.is_required(),
        help=_help(info),
    )


def add_model_flags(
    p: argparse.ArgumentParser, model: type[BaseModel], skip: Collection[str] = ()
) -> None:
    """One flag per field of ``model`` (but those in ``skip``) on ``p``; each flag's
    ``dest`` is its field's name and its value None when not given."""
    for name, info in model.model_fields.items():
        if name not in skip:
            _add_field_flag(p, name, info)


def model_values(
    args: argparse.Namespace, model: type[BaseModel], skip: Collection[str] = ()
) -> dict[str, object]:
    """The fields of ``model`` whose flags were given, keyed as the model reads them
    (a field's alias, else its name)."""
    fields = [(name, info) for name, info in model.model_fields.items() if name not in skip]
    given = {info.alias or name: getattr(args, name, None) for name, info in fields}
    return {key: value for key, value in given.items() if value is not None}


def flag_problem(error: ErrorDetails, model: type[BaseModel], command: str) -> str:
    """One validation error of ``model`` as ``--flag: problem`` (``command: problem``
    when no field is to blame)."""
    message = error["msg"].removeprefix("Value error, ")
    key = str(error["loc"][0]) if error["loc"] else None
    for name, info in model.model_fields.items():
        if key in (name, info.alias):
            return f"{flag_of(name, info)}: {message}"
    return f"{command}: {message}"


def _network_options() -> Iterator[tuple[str, str, str, FieldInfo]]:
    """(flag, fidelity, YAML key, field) of every registered fidelity's options: the
    flag is ``--FIDELITY-KEY``, or ``--KEY`` for a key that starts with the fidelity."""
    for fidelity, backend in NETWORKS.items():
        for key, name in option_keys(backend.options).items():
            flag = key if key.startswith(fidelity + "_") else f"{fidelity}_{key}"
            info = backend.options.model_fields[name]
            yield "--" + flag.replace("_", "-"), fidelity, key, info


def add_network_flags(p: argparse.ArgumentParser, default: str | None = "flow") -> None:
    """``--fidelity`` (default ``default``; None: the scenario's network) and one flag per
    registered network option."""
    models = ", ".join(f"{name} ({backend.description})" for name, backend in NETWORKS.items())
    chosen = "the scenario's network" if default is None else default
    p.add_argument(
        "--fidelity",
        choices=NETWORKS.names(),
        default=default,
        help=f"network model: {models} (default {chosen})",
    )
    for flag, fidelity, key, info in _network_options():
        p.add_argument(
            flag,
            dest=f"{_NETWORK_DEST}{flag}",
            metavar=key.upper(),
            help=f"{fidelity} fidelity: {_help(info)}",
        )


def network_flags_given(args: argparse.Namespace) -> list[str]:
    """The network option flags given (not ``--fidelity``)."""
    flags = [flag for flag, _, _, _ in _network_options()]
    return [flag for flag in flags if getattr(args, f"{_NETWORK_DEST}{flag}", None) is not None]


def network_of(args: argparse.Namespace) -> NetworkSettings:
    """The network the flags give: ``--fidelity`` and its options; an option flag of
    another fidelity is an error naming the fidelities that own it."""
    fidelity = str(args.fidelity)
    tree: dict[str, object] = {"fidelity": fidelity}
    flags: dict[str, str] = {}
    for flag, owner, key, _ in _network_options():
        value = getattr(args, f"{_NETWORK_DEST}{flag}", None)
        if value is None:
            continue
        if owner != fidelity:
            owners = [o for f, o, _, _ in _network_options() if f == flag]
            raise InputError(f"{flag} only applies to --fidelity {' or '.join(owners)}")
        tree[key], flags[key] = value, f"{flag} {value}"
    try:
        return network_tree(tree)
    except ValidationError as exc:
        error = exc.errors()[0]
        where = flags.get(str(error["loc"][0]), "--fidelity") if error["loc"] else "--fidelity"
        raise InputError(f"{where}: {error['msg'].removeprefix('Value error, ')}") from None
