"""A scenario's ``systems:`` entries, and the scenarios shipped with tpusim.

An entry is a system's name or path, or a mapping that derives systems from one::

    systems:
      - tpu8i-1024                                  # as shipped
      - system: torus-8x8x16                        # name or path
        name: torus-fast                            # optional (default: the system's)
        ici: {link_bandwidth: 200 GB/s}             # overrides, as in a system file
        sweep: {link_bandwidth: [100 GB/s, 200 GB/s], hop_latency: [0.5 us, 1 us]}

A ``sweep`` maps ICI fields (``link_bandwidth``, ``hop_latency``) to lists of values:
one system per point of their cross product, named ``NAME[field=value,...]``.

Shipped scenarios (``scenarios/*.yaml`` in a checkout, ``tpusim/_scenarios`` in a
wheel) run by name: ``tpusim run demo``.
"""

from __future__ import annotations

import dataclasses
import itertools
from pathlib import Path

from pydantic import Field

from tpusim.config.loader import System, validate
from tpusim.config.system import IciOverride
from tpusim.config.types import Frozen
from tpusim.config.yamlio import PathKey, format_path, line_of, load_yaml
from tpusim.errors import ConfigError, InputError

__all__ = [
    "SystemVariants",
    "locate_scenario",
    "scenario_listing",
    "scenarios_dir",
    "shipped_scenarios",
    "variants",
]

#: The ICI fields a system entry may override or sweep.
ICI_FIELDS = ("link_bandwidth", "hop_latency")


class SystemVariants(Frozen):
    """A ``systems:`` entry that derives systems from ``system`` (see the module
    docstring): ``ici`` overrides, and a ``sweep`` of ICI fields."""

    system: str
    name: str | None = None
    ici: dict[str, object] = Field(default_factory=dict)
    sweep: dict[str, list[object]] = Field(default_factory=dict)


def variants(
    entry: SystemVariants, base: System, file: str, lines: dict[PathKey, int], path: PathKey
) -> list[System]:
    """The systems ``entry`` derives from the loaded ``base`` (one, or one per sweep
    point); raises ConfigError naming the entry's key for a bad field or value."""

    def error(problem: str, *rest: str) -> ConfigError:
        where = (*path, *rest)
        return ConfigError(problem, file=file, path=format_path(where), line=line_of(lines, where))

    if base.pod is not None:
        raise error("ICI overrides apply to a pod's own system file, not a multi-pod system")
    for where, field in [*(("ici", k) for k in entry.ici), *(("sweep", k) for k in entry.sweep)]:
        if field not in ICI_FIELDS:
            raise error(f"'{field}' is not an ICI field ({', '.join(ICI_FIELDS)})", where, field)
    for key, values in entry.sweep.items():
        if not values:
            raise error("an empty sweep runs nothing; give at least one value", "sweep", key)
    name = entry.name or base.name
    fields = list(entry.sweep)
    out = []
    for point in itertools.product(*(entry.sweep[f] for f in fields)):
        chosen = dict(zip(fields, point, strict=True))
        ici = validate(IciOverride, entry.ici | chosen, file, lines, (*path, "ici"))
        label = ",".join(f"{f}={v}" for f, v in chosen.items())
        spec = base.spec.model_copy(
            update={"name": f"{name}[{label}]" if label else name, "ici": _merged(base, ici)}
        )
        out.append(dataclasses.replace(base, spec=spec))
    return out


def _merged(base: System, ici: IciOverride) -> IciOverride:
    """``ici`` over the base system file's own overrides."""
    own = base.spec.ici
    if own is None:
        return ici
    return own.model_copy(update=ici.model_dump(exclude_none=True))


def scenarios_dir() -> Path:
    """The shipped scenarios: ``tpusim/_scenarios`` in an installed wheel, else the
    checkout's ``scenarios/``."""
    package = Path(__file__).resolve().parent.parent
    packaged = package / "_scenarios"
    if packaged.is_dir():
        return packaged
    return package.parent / "scenarios"


def shipped_scenarios() -> dict[str, Path]:
    """Shipped scenario names (file stems) mapped to their files, sorted by name."""
    return {p.stem: p for p in sorted(scenarios_dir().glob("*.yaml"))}


def locate_scenario(name_or_path: str) -> Path:
    """A scenario file: a path (anything ending in .yaml/.yml or with a slash, or an
    existing file), else a shipped scenario's name. Raises InputError for an unknown
    name, listing the shipped ones."""
    path = Path(name_or_path)
    if name_or_path.endswith((".yaml", ".yml")) or "/" in name_or_path or path.exists():
        return path
    known = shipped_scenarios()
    if name_or_path in known:
        return known[name_or_path]
    raise InputError(f"unknown scenario '{name_or_path}' (not a file; shipped: {', '.join(known)})")


def scenario_listing() -> list[dict[str, str]]:
    """Name, description and path of each shipped scenario (``tpusim scenarios``); a
    file that does not read says so in its description."""
    rows = []
    for name, path in shipped_scenarios().items():
        try:
            data, _ = load_yaml(path)
            description = str(data.get("description", "")) if isinstance(data, dict) else ""
        except ConfigError as exc:
            description = f"(unreadable: {exc.problem})"
        rows.append({"name": name, "description": description, "path": str(path)})
    return rows
