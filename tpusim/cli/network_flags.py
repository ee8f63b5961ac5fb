"""The network flags every simulating command shares, generated from the registry.

:func:`add_network_flags` adds ``--fidelity`` (the registered fidelities, or those a
command offers), ``--network TREE`` (the scenario's ``network:`` tree written inline:
``--network '{fidelity: flow, tolerance: 0.05}'``) and one flag per option of every
registered fidelity's options model (``--flow-tolerance``, ``--packet-bytes``; a new
fidelity's options, or a new option of a shipped one, appear with it). They are read
back as one :class:`~tpusim.network.NetworkSettings` by :func:`network_of`, through
:func:`~tpusim.network.network_tree`, the reader of every ``network:`` tree: a flag
accepts what the YAML key does and fails with its message, named by the flag.

A command's default fidelity is kept beside the flags (``network_default``), so that
whether a flag was given is known (``tpusim run`` keeps the scenario's network unless one
is; ``validate --serving`` takes none).
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator, Sequence

import yaml
from pydantic import ValidationError
from pydantic.fields import FieldInfo

from tpusim.cli.model_flags import help_of
from tpusim.errors import InputError
from tpusim.network import NETWORKS, NetworkSettings, network_tree, option_keys

__all__ = [
    "add_network_flags",
    "given_network",
    "network_flags_given",
    "network_of",
    "network_options",
]

#: Where the network option flags keep their values on the namespace (dest prefix).
_NETWORK_DEST = "network_option:"


def network_options(
    fidelities: Sequence[str] | None = None,
) -> Iterator[tuple[str, str, str, FieldInfo]]:
    """(flag, fidelity, YAML key, field) of every registered fidelity's options (of
    ``fidelities``, when given): the flag is ``--FIDELITY-KEY``, or ``--KEY`` for a key
    that starts with the fidelity."""
    for fidelity, backend in NETWORKS.items():
        if fidelities is not None and fidelity not in fidelities:
            continue
        for key, name in option_keys(backend.options).items():
            flag = key if key.startswith(fidelity + "_") else f"{fidelity}_{key}"
            info = backend.options.model_fields[name]
            yield "--" + flag.replace("_", "-"), fidelity, key, info


class _Given(argparse.Action):
    """Stores the flag's value and notes that it was given (``given:DEST``), so that a
    command's default (``--fidelity``'s) is told apart from the same value given."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: object,
        option_string: str | None = None,
    ) -> None:
        setattr(namespace, self.dest, values)
        setattr(namespace, f"given:{self.dest}", True)


def _given(args: argparse.Namespace, dest: str) -> object:
    """The value of flag ``dest`` if it was given on the command line, else None."""
    if dest == "fidelity" and not getattr(args, "given:fidelity", False):
        return None
    return getattr(args, dest, None)


def add_network_flags(
    p: argparse.ArgumentParser,
    default: str | None = "flow",
    choices: Sequence[str] | None = None,
    what: str = "",
    fidelity_flag: bool = True,
    unset: str = "the scenario's network",
) -> None:
    """``--fidelity`` (among ``choices``, default all registered; the command's default
    ``default``, None: ``unset``, what the command runs on without one; without
    ``fidelity_flag`` none, the command names its fidelities with flags of its own),
    ``--network`` and one flag per option of those fidelities. ``what`` ends the help
    of ``--fidelity``."""
    offered = list(NETWORKS.names() if choices is None else choices)
    if fidelity_flag:
        models = ", ".join(f"{n} ({NETWORKS.get(n).description})" for n in offered)
        chosen = unset if default is None else default
        p.add_argument(
            "--fidelity",
            choices=offered,
            default=default,
            action=_Given,
            help=f"network model: {models} (default {chosen}){what}",
        )
    p.add_argument(
        "--network",
        metavar="TREE",
        help="the network as a scenario's network: tree, e.g. '{fidelity: flow, "
        "tolerance: 0.05}' (the option flags override its keys)",
    )
    for flag, fidelity, key, info in network_options(offered):
        p.add_argument(
            flag,
            dest=f"{_NETWORK_DEST}{flag}",
            metavar=key.upper(),
            help=f"{fidelity} fidelity: {help_of(info)}",
        )
    p.set_defaults(network_default=default, network_unset=unset)


def network_flags_given(args: argparse.Namespace) -> list[str]:
    """The network flags given (``--fidelity``, ``--network`` and the option flags)."""
    flags = [flag for flag, _, _, _ in network_options()]
    given = [flag for flag in flags if getattr(args, f"{_NETWORK_DEST}{flag}", None) is not None]
    named = [f"--{name}" for name in ("fidelity", "network") if _given(args, name)]
    return named + given


def _inline_tree(args: argparse.Namespace) -> dict[str, object]:
    """``--network``'s tree (a YAML mapping or a fidelity's name), {} when not given."""
    text = getattr(args, "network", None)
    if text is None:
        return {}
    try:
        tree = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        problem = str(exc).splitlines()[0]
        raise InputError(f"--network {text}: not a YAML mapping ({problem})") from None
    if isinstance(tree, str):
        tree = {"fidelity": tree}
    if not isinstance(tree, dict):
        raise InputError(
            f"--network {text}: expected a fidelity name or a mapping such as "
            "'{fidelity: flow, tolerance: 0.05}'"
        )
    return {str(key): value for key, value in tree.items()}


def _chosen(
    args: argparse.Namespace, tree: dict[str, object], fidelity: str | None, also: Sequence[str]
) -> tuple[str, dict[str, object]]:
    """The fidelity the flags choose, and ``--network``'s tree when it is that one's."""
    flag = _given(args, "fidelity")
    default = str(getattr(args, "network_default", None) or "flow")
    named = str(tree.get("fidelity") or flag or default)
    if flag and named != flag:
        raise InputError(f"--fidelity {flag}: --network names fidelity {named}")
    chosen = fidelity or named
    if named == chosen or not (tree or flag):  # nothing named but the command's default
        return chosen, tree
    if named not in also:
        raise InputError(f"--network names fidelity {named}; {chosen} is the one that runs")
    return chosen, {}


def network_of(
    args: argparse.Namespace, fidelity: str | None = None, also: Sequence[str] = ()
) -> NetworkSettings:
    """The network the flags give: ``fidelity`` (else ``--fidelity``, ``--network``'s,
    the command's default) with ``--network``'s options and the option flags of that
    fidelity on top. An option flag (or a ``--network`` tree) of another fidelity is an
    error naming the fidelities that own it, unless one of them is in ``also`` (another
    network the command runs, ``plan``'s ranking one)."""
    chosen, tree = _chosen(args, _inline_tree(args), fidelity, also)
    tree["fidelity"] = chosen
    flags = {key: "--network" for key in tree}
    for flag, owner, key, _ in network_options():
        value = getattr(args, f"{_NETWORK_DEST}{flag}", None)
        if value is None or (owner in also and owner != chosen):
            continue
        if owner != chosen:
            owners = [o for f, o, _, _ in network_options() if f == flag]
            raise InputError(f"{flag} only applies to --fidelity {' or '.join(owners)}")
        tree[key], flags[key] = value, f"{flag} {value}"
    try:
        return network_tree(tree)
    except ValidationError as exc:
        error = exc.errors()[0]
        where = flags.get(str(error["loc"][0]), "--fidelity") if error["loc"] else "--fidelity"
        raise InputError(f"{where}: {error['msg'].removeprefix('Value error, ')}") from None
    except ValueError as exc:
        raise InputError(f"--network: {exc}") from None


def given_network(args: argparse.Namespace) -> NetworkSettings | None:
    """The network the flags give, or None when none was given (the command keeps its
    own, e.g. a scenario's); an option flag alone needs ``--fidelity`` or ``--network``."""
    given = network_flags_given(args)
    if not given:
        return None
    if not {"--fidelity", "--network"} & set(given):
        unset = getattr(args, "network_unset", "the scenario's network")
        raise InputError(f"{given[0]} needs --fidelity (it replaces {unset})")
    return network_of(args)
