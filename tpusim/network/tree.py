"""The network options tree: how YAML (and pydantic schemas) name a run's network.

A scenario, a serving workload's environment or any schema that holds a
:data:`NetworkTree` field reads it as a mapping keyed by ``fidelity``, the rest being
that fidelity's own options (its backend's options model, :data:`NETWORKS`)::

    network: {fidelity: flow, tolerance: 0.05}
    network: {fidelity: packet, packet_bytes: 64KiB}
    network: analytic            # a fidelity at its defaults

The schema is the registry: a fidelity registered later (a test, a plug-in) is read
the same way, and an option the fidelity does not own is one error at its key
(``network.tolerance: the packet fidelity has no option 'tolerance' ...``).
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from typing import Annotated

import yaml
from pydantic import BeforeValidator, InstanceOf, PlainSerializer, ValidationError
from pydantic_core import InitErrorDetails, PydanticCustomError

from tpusim.errors import ConfigError
from tpusim.network.backends import NETWORKS, BackendOptions, NetworkSettings, option_keys

__all__ = [
    "FLAT_NETWORK_KEYS",
    "DeprecatedKeyWarning",
    "NetworkTree",
    "network_tree",
    "owners_of",
    "read_flat",
    "tree_of",
]


#: The old flat network keys of scenarios and serve's options (still read, deprecated)
#: and the key of the ``network:`` tree each became.
FLAT_NETWORK_KEYS = {"fidelity": "fidelity", "flow_tolerance": "tolerance"}


class DeprecatedKeyWarning(FutureWarning):
    """A key still read but replaced (shown to users, one line each)."""


def _tree_from_flat(data: dict[str, object]) -> dict[str, object]:
    """``data`` with the old flat keys moved into its tree; both forms at once is an
    error (ValueError)."""
    if "network" in data:
        raise ValueError(
            "give network: {fidelity: ..., ...} alone, without the old "
            f"{' or '.join(k for k in FLAT_NETWORK_KEYS if k in data)}"
        )
    tree = {new: data[old] for old, new in FLAT_NETWORK_KEYS.items() if data.get(old) is not None}
    kept = {key: value for key, value in data.items() if key not in FLAT_NETWORK_KEYS}
    return kept | {"network": tree}


def _replacement(tree: object, keys: int) -> str | None:
    """What to write instead of ``keys`` old keys whose values make ``tree``: that tree
    as valid YAML, or dropping them when every value was null; None when the tree does
    not validate (the error that follows says why: no advice to write something invalid)."""
    if not tree:
        return f"drop {'it' if keys == 1 else 'them'} (null is the default)"
    try:
        network_tree(tree)
    except (ValueError, TypeError):
        return None
    return "write network: " + yaml.safe_dump(tree, default_flow_style=True, width=200).strip()


def read_flat(
    data: object,
    where: str,
    lines: dict[tuple[str | int, ...], int] | None = None,
    warn: bool = True,
) -> object:
    """The one reader of the deprecated flat network keys (``fidelity``,
    ``flow_tolerance``): ``data`` (a mapping read by a schema holding a ``network``
    tree: a scenario file, serve's options) with them moved into its tree, and one
    :class:`DeprecatedKeyWarning` naming ``where`` (a file, with the line of the first
    old key when ``lines`` has it) and the keys, with what to write instead (unless
    ``warn`` is false: a worker's reload). ``lines`` (a file's YAML line of each path)
    gains the tree's paths at the old keys' lines, so a later error names them. Both
    forms at once is a ConfigError naming ``where``, the old key and its line."""
    old = [key for key in FLAT_NETWORK_KEYS if isinstance(data, dict) and key in data]
    if not old:
        return data
    assert isinstance(data, dict)  # it has the keys
    found = {key: lines.get((key,)) for key in old} if lines is not None else {}
    for key, line in found.items():
        if line is not None and lines is not None:
            lines.setdefault(("network", FLAT_NETWORK_KEYS[key]), line)
            lines.setdefault(("network",), line)
    first = found.get(old[0])
    try:
        converted = _tree_from_flat(data)
    except ValueError as exc:
        if lines is None:
            raise
        raise ConfigError(str(exc), file=where, path=old[0], line=first) from None
    advice = _replacement(converted["network"], len(old))
    if advice is None and lines is None:  # no file error follows to say what to write
        advice = "give network: {fidelity, ...}"
    if warn and advice is not None:
        at = f"{where}:{first}" if first is not None else where
        message = f"{at} {' and '.join(old)}: deprecated; {advice}"
        warnings.warn(message, DeprecatedKeyWarning, stacklevel=4)
    return converted


def owners_of(key: str) -> list[str]:
    """The registered fidelities that own an option written ``key`` (alias or name)."""
    found = []
    for name, backend in NETWORKS.items():
        keys = option_keys(backend.options)
        if key in keys or key in keys.values():
            found.append(name)
    return found


def _error(key: str, message: str, value: object) -> ValidationError:
    """A validation error at ``key`` of the tree (so a file names that key's line)."""
    detail = InitErrorDetails(
        type=PydanticCustomError("value_error", message), loc=(key,), input=value
    )
    return ValidationError.from_exception_data("network", [detail])


def _ownership(fidelity: str, key: str, options: type[BackendOptions]) -> str:
    known = ", ".join(option_keys(options)) or "none"
    owners = [o for o in owners_of(key) if o != fidelity]
    belongs = f"; {key} belongs to {' and '.join(owners)}" if owners else ""
    return f"the {fidelity} fidelity has no option '{key}' (its options: {known}){belongs}"


def network_tree(value: object) -> NetworkSettings:
    """A run's network from its tree: settings as they are, a fidelity's name (its
    defaults) or a mapping ``{fidelity: NAME, OPTION: value, ...}`` (fidelity left out:
    ``flow``). Raises ValidationError located at the key to blame."""
    if isinstance(value, NetworkSettings):
        return value
    if isinstance(value, str):
        value = {"fidelity": value}
    if not isinstance(value, Mapping):
        raise ValueError("expected a fidelity name or a mapping {fidelity: NAME, option: value}")
    given = dict(value)
    fidelity = given.pop("fidelity", "flow")
    try:
        backend = NETWORKS.get(str(fidelity))
    except ValueError as exc:
        raise _error("fidelity", str(exc), fidelity) from None
    keys = option_keys(backend.options)
    for key in given:
        if key not in keys and key not in keys.values():
            raise _error(str(key), _ownership(str(fidelity), str(key), backend.options), given[key])
    options = backend.options.model_validate(given)
    return NetworkSettings(str(fidelity), options)


def tree_of(settings: NetworkSettings) -> dict[str, object]:
    """``settings`` as the tree reads them (YAML keys, JSON values): what a resolved
    scenario file shows."""
    assert settings.options is not None  # set by NetworkSettings.__post_init__
    options = settings.options.model_dump(mode="json", by_alias=True)
    return {"fidelity": settings.fidelity, **options}


#: A pydantic field holding a run's network, read as a tree (see the module docstring)
#: and written back as one.
NetworkTree = Annotated[
    InstanceOf[NetworkSettings],
    BeforeValidator(network_tree),
    PlainSerializer(tree_of, return_type=dict),
]
