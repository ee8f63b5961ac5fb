"""Find and load chip and system YAML files, shipped (by name) or the user's (by path).

Shipped configs live in ``configs/`` at the repository root; a wheel carries
them as ``tpusim/_configs`` (hatchling ``force-include``). Every failure is a
:class:`~tpusim.errors.ConfigError` naming the file, the YAML path and the line.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

from tpusim.config.chip import ChipSpec
from tpusim.config.hf_config import model_data, read_config
from tpusim.config.limits import MAX_SYSTEM_CHIPS
from tpusim.config.system import (
    FabricSpec,
    SystemSpec,
    TorusTopologySpec,
    chip_count,
    twisted_torus_problem,
    wraparound_for,
)
from tpusim.config.types import Source
from tpusim.config.yamlio import PathKey, format_path, line_of, load_yaml
from tpusim.errors import ConfigError
from tpusim.later import LaterModule

if TYPE_CHECKING:
    from tpusim.config import model as presets
    from tpusim.config.model import ModelSpec
else:  # model presets: not read by a command that loads only chips and systems
    presets = LaterModule("tpusim.config.model")

Model = TypeVar("Model", bound=BaseModel)
Loaded = TypeVar("Loaded")
ConfigKind = Literal["chips", "systems", "models"]


def configs_dir() -> Path:
    """The folder holding ``chips/``, ``systems/`` and ``models/``: inside the wheel,
    else the repository's."""
    packaged = Path(__file__).resolve().parent.parent / "_configs"
    if packaged.is_dir():
        return packaged
    return Path(__file__).resolve().parent.parent.parent / "configs"


def shipped(kind: ConfigKind) -> dict[str, Path]:
    """Shipped config names of ``kind`` mapped to their files, sorted by name."""
    folder = configs_dir() / kind
    return {p.stem: p for p in sorted(folder.glob("*.yaml"))}


def _locate(name_or_path: str, kind: ConfigKind, base: Path | None) -> Path:
    looks_like_path = name_or_path.endswith((".yaml", ".yml")) or "/" in name_or_path
    if looks_like_path:
        path = Path(name_or_path)
        return base / path if base is not None and not path.is_absolute() else path
    known = shipped(kind)
    if name_or_path in known:
        return known[name_or_path]
    raise ConfigError(f"unknown {kind[:-1]} '{name_or_path}' (shipped: {', '.join(known)})")


def _loc_to_path(data: Any, loc: tuple[Any, ...], names_key: bool) -> PathKey:
    """Pydantic's error location minus union tags, so it names a real YAML path.

    A part that is not in the data is a union tag (``torus``, ``program``,
    ``function-after``...), except the last part of a missing or unknown key error
    (``names_key``), which is that key.
    """
    path: list[str | int] = []
    node = data
    for i, part in enumerate(loc):
        if (isinstance(node, dict) and part in node) or (
            isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node)
        ):
            node = node[part]
            path.append(part)
        elif names_key and i == len(loc) - 1 and isinstance(part, str):
            path.append(part)
    return tuple(path)


def _message(error: ErrorDetails) -> str:
    kind, msg = error["type"], error["msg"]
    if kind == "extra_forbidden":
        return msg if msg.startswith("unknown key") else "unknown key"
    if kind == "missing":
        return "required key is missing"
    for prefix in ("Value error, ", "Assertion failed, "):
        msg = msg.removeprefix(prefix)
    return msg


def _first_error(errors: list[Any]) -> Any:
    """The error to report: the first, except that a missing key beside an unknown one
    in the same mapping is reported as the unknown key (most likely its misspelling)."""
    first = errors[0]
    if first["type"] != "missing":
        return first
    where = tuple(first["loc"][:-1])
    for error in errors:
        if error["type"] == "extra_forbidden" and tuple(error["loc"][:-1]) == where:
            missing = first["loc"][-1]
            return {**error, "msg": f"unknown key (is it the missing '{missing}'?)"}
    return first


def validate(
    model: type[Model], data: object, file: str, lines: dict[PathKey, int], prefix: PathKey = ()
) -> Model:
    """Validate ``data`` as ``model``; the first problem becomes a one-line ConfigError."""
    if not isinstance(data, dict):
        raise ConfigError(
            "expected a mapping of keys to values", file=file, line=line_of(lines, prefix)
        )
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        error = _first_error(exc.errors())
        names_key = error["type"] in ("missing", "extra_forbidden")
        path = (*prefix, *_loc_to_path(data, tuple(error["loc"]), names_key))
        raise ConfigError(
            _message(error), file=file, path=format_path(path), line=line_of(lines, path)
        ) from None


@cache
def _load_chip_file(path: Path) -> ChipSpec:
    data, lines = load_yaml(path)
    chip = validate(ChipSpec, data, str(path), lines)
    _check_sources(chip.sources, data, str(path), lines)
    return chip


def _check_sources(
    sources: Mapping[str, Source], data: dict[str, Any], file: str, lines: dict[PathKey, int]
) -> None:
    """Every key under ``sources:`` must name a value that exists in the file."""
    for key in sources:
        node: object = data
        for part in key.split("."):
            if not isinstance(node, dict) or part not in node:
                raise ConfigError(
                    f"names '{key}', which is not a value in this file",
                    file=file,
                    path=f"sources.{key}",
                    line=line_of(lines, ("sources", key)),
                )
            node = node[part]


def load_chip(name_or_path: str, base: Path | None = None) -> ChipSpec:
    """A chip by shipped name (``ironwood``) or YAML path (relative to ``base`` if given)."""
    return _load_chip_file(_resolve(_locate(name_or_path, "chips", base)))


@cache
def _load_model_file(path: Path) -> ModelSpec:
    data, lines = load_yaml(path)
    spec = validate(presets.ModelSpec, data, str(path), lines)
    _check_sources(spec.sources, data, str(path), lines)
    return spec


@cache
def _load_hf_config(path: Path) -> ModelSpec:
    data = model_data(read_config(path), str(path), path.parent.name or path.stem)
    return validate(presets.ModelSpec, data, str(path), {})


def load_model(name_or_path: str, base: Path | None = None) -> ModelSpec:
    """A model preset by shipped name (``llama-3.1-70b``), YAML path, or a Hugging Face
    ``config.json`` (a path ending in ``.json``: :mod:`tpusim.config.hf_config`)."""
    if name_or_path.endswith(".json"):
        path = Path(name_or_path)
        path = base / path if base is not None and not path.is_absolute() else path
        return _load_hf_config(_resolve(path))
    return _load_model_file(_resolve(_locate(name_or_path, "models", base)))


@dataclass(frozen=True)
class System:
    """A loaded, validated system: its spec, its chip and (multi-pod) its pod system.

    Resolved values carry their unit: ``link_bandwidth_Bps`` is one direction of one
    ICI link, ``hop_latency_s`` the latency of one ICI hop.
    """

    spec: SystemSpec
    chip: ChipSpec
    file: str
    pod: System | None = None

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def num_chips(self) -> int:
        if self.pod is not None:
            assert self.spec.pods is not None
            return self.pod.num_chips * self.spec.pods
        return chip_count(self.spec)

    @property
    def link_bandwidth_Bps(self) -> float:
        if self.pod is not None:
            return self.pod.link_bandwidth_Bps
        override = self.spec.ici.link_bandwidth_Bps if self.spec.ici else None
        return override or self.chip.ici.link_bandwidth_Bps

    @property
    def hop_latency_s(self) -> float:
        if self.pod is not None:
            return self.pod.hop_latency_s
        override = self.spec.ici.hop_latency_s if self.spec.ici else None
        return self.chip.ici.hop_latency_s if override is None else override

    @property
    def wraparound(self) -> tuple[bool, ...]:
        """Wraparound per torus axis: as written, else the chip's TPU rule."""
        topo = self.spec.topology
        if not isinstance(topo, TorusTopologySpec):
            return ()
        if topo.wraparound is None:
            return wraparound_for(topo.dims, self.chip.ici.wraparound_rule)
        if isinstance(topo.wraparound, bool):
            return tuple(topo.wraparound for _ in topo.dims)
        return tuple(topo.wraparound)

    @property
    def fabric(self) -> FabricSpec | None:
        return self.spec.fabric

    @property
    def fabric_bandwidth_per_chip_Bps(self) -> float:
        assert self.spec.fabric is not None
        return self.spec.fabric.bandwidth_per_chip_Bps or self.chip.dcn.bandwidth_Bps

    @property
    def topology_kind(self) -> str:
        if self.pod is not None:
            return f"{self.spec.pods} x {self.pod.topology_kind} + {self.spec.fabric.kind}"  # type: ignore[union-attr]
        assert self.spec.topology is not None
        return self.spec.topology.kind


def _reference(
    data: dict[str, Any],
    key: str,
    file: str,
    lines: dict[PathKey, int],
    kind: ConfigKind,
    loader: Callable[[str], Loaded],
    base: Path,
) -> Loaded:
    """Load the chip or pod a system names. A name or file that cannot be found is
    reported against this file and key; a found file that is broken reports itself."""
    line = line_of(lines, (key,))
    try:
        located = _locate(str(data[key]), kind, base)
    except ConfigError as exc:
        raise ConfigError(exc.problem, file=file, path=key, line=line) from None
    if not located.is_file():
        raise ConfigError(
            f"{kind[:-1]} file '{located}' does not exist", file=file, path=key, line=line
        )
    target = _resolve(located, file, key, line)
    if target in _LOADING:
        chain = " -> ".join(p.name for p in (*_LOADING[_LOADING.index(target) :], target))
        raise ConfigError(f"systems name each other in a cycle ({chain})", file, key, line)
    return loader(str(target))


def _resolve(path: Path, file: str | None = None, key: str = "", line: int | None = None) -> Path:
    """``path`` made absolute with symlinks followed; a symlink loop is a ConfigError."""
    try:
        return path.resolve(strict=False)
    except (OSError, RuntimeError) as exc:
        problem = f"cannot resolve '{path}' ({exc.__class__.__name__}: a symlink loop?)"
        raise ConfigError(problem, file=file or str(path), path=key, line=line) from None


#: System files being loaded, outermost first: a pod naming one of them is a cycle.
_LOADING: list[Path] = []


def _load_system_file(path: Path) -> System:
    _LOADING.append(path)
    try:
        return _load_system_cached(path)
    finally:
        _LOADING.pop()


@cache
def _load_system_cached(path: Path) -> System:
    data, lines = load_yaml(path)
    spec = validate(SystemSpec, data, str(path), lines)
    _check_sources(spec.sources, data, str(path), lines)
    file, base = str(path), path.parent
    if spec.pod is not None:
        pod = _reference(data, "pod", file, lines, "systems", load_system, base)
        _check_pods(spec, pod, file, lines)
        if pod.pod is not None:
            raise ConfigError(
                "a pod cannot itself be multi-pod",
                file=file,
                path="pod",
                line=line_of(lines, ("pod",)),
            )
        system = System(spec=spec, chip=pod.chip, file=file, pod=pod)
    else:
        chip = _reference(data, "chip", file, lines, "chips", load_chip, base)
        system = System(spec=spec, chip=chip, file=file)
    if spec.chips is not None and spec.chips != system.num_chips:
        raise ConfigError(
            f"chips is {spec.chips} but the topology has {system.num_chips}",
            file=file,
            path="chips",
            line=line_of(lines, ("chips",)),
        )
    _check_twist(system, lines)
    return system


def _check_pods(spec: SystemSpec, pod: System, file: str, lines: dict[PathKey, int]) -> None:
    """A multi-pod system has at most MAX_SYSTEM_CHIPS chips (checked before building)."""
    assert spec.pods is not None
    chips = pod.num_chips * spec.pods
    if chips > MAX_SYSTEM_CHIPS:
        problem = f"{chips:,} chips is over the limit of {MAX_SYSTEM_CHIPS:,} chips per system"
        raise ConfigError(problem, file=file, path="pods", line=line_of(lines, ("pods",)))


def _check_twist(system: System, lines: dict[PathKey, int]) -> None:
    """A twisted torus whose wraparound comes from the chip's rule must wrap every axis
    (the spec's validator has checked the shape and any wraparound written out)."""
    topo = system.spec.topology
    if isinstance(topo, TorusTopologySpec) and topo.twisted:
        problem = twisted_torus_problem(topo.dims, system.wraparound)
        if problem is not None:
            line = line_of(lines, ("topology",))
            raise ConfigError(problem, file=system.file, path="topology", line=line)


def load_system(name_or_path: str, base: Path | None = None) -> System:
    """A system by shipped name (``ironwood-pod``) or YAML path; validated and resolved."""
    return _load_system_file(_resolve(_locate(name_or_path, "systems", base)))
