"""Where the numbers come from: source keys resolved to a title and a URL.

The chip and system files cite each number's source by a short key (``source: JAX``,
``source: SB-tpus``); ``configs/sources.yaml`` maps every such key to a title, a URL
and how directly the source states numbers (``primary``, ``secondary``, or
``internal`` for tpusim's own calibration and for "no source"). The measurement files
(``configs/measurements/*.yaml``) carry their own ``source: {key, title, url}``, and
are merged in. The ``sources`` output writer writes ``sources.csv``: every source the
run's systems cite, with the numbers citing it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tpusim.config.loader import configs_dir
from tpusim.config.yamlio import load_yaml
from tpusim.later import LaterModule
from tpusim.results.files import atomic_csv
from tpusim.results.writers import Outputs

if TYPE_CHECKING:
    import pandas as pd

    from tpusim.config.loader import System
    from tpusim.config.types import Source
else:
    pd = LaterModule("pandas")

__all__ = [
    "SOURCE_COLUMNS",
    "Reference",
    "cited_keys",
    "load_references",
    "sources_frame",
    "write_sources",
]

#: Columns of ``sources.csv``.
SOURCE_COLUMNS = ("key", "title", "url", "grade", "cited_by")


@dataclass(frozen=True)
class Reference:
    """One source: its key, title, URL ("" for an internal one) and grade."""

    key: str
    title: str
    url: str
    grade: str


def load_references(folder: str | Path | None = None) -> dict[str, Reference]:
    """Every source key of ``folder`` (default: the shipped configs) -> its Reference:
    ``sources.yaml`` and the measurement files' own sources. Raises ConfigError when a
    file cannot be read, and KeyError naming the key when an entry lacks a title."""
    base = Path(folder) if folder is not None else configs_dir()
    data, _ = load_yaml(base / "sources.yaml")
    out = {
        str(key): _reference(str(key), entry) for key, entry in (data.get("sources") or {}).items()
    }
    for path in sorted((base / "measurements").rglob("*.yaml")):  # and workloads/
        source = (load_yaml(path)[0] or {}).get("source") or {}
        if "key" in source:
            out[str(source["key"])] = _reference(str(source["key"]), source | {"grade": "primary"})
    return out


def _reference(key: str, entry: dict[str, Any]) -> Reference:
    if not entry.get("title"):
        raise KeyError(f"source '{key}' has no title")
    return Reference(key, str(entry["title"]), str(entry.get("url") or ""), str(entry["grade"]))


def cited_keys(sources: Mapping[str, Source], owner: str) -> dict[str, list[str]]:
    """A config's ``sources`` block (YAML path -> Source) as key -> ``owner:path`` of
    each number citing it."""
    out: dict[str, list[str]] = {}
    for path, source in sources.items():
        out.setdefault(source.source, []).append(f"{owner}:{path}")
    return out


def sources_frame(
    systems: list[System], references: dict[str, Reference] | None = None
) -> pd.DataFrame:
    """The ``sources`` table (DataFrame, :data:`SOURCE_COLUMNS`): one row per source key
    the systems' chip and system files cite, ``cited_by`` the numbers citing it
    (``chip:path``, ``system:path``, ``;``-separated), sorted by key. A key missing
    from the references gets an empty title and URL and grade ``unknown``."""
    refs = load_references() if references is None else references
    cited: dict[str, list[str]] = {}
    parts = [p for s in systems for p in (s, s.pod) if p is not None]  # a multi-pod's pod too
    for part in parts:
        for owner, sources in (
            (part.chip.name, part.chip.sources),
            (part.name, part.spec.sources),
        ):
            for key, users in cited_keys(sources, owner).items():
                known = cited.setdefault(key, [])
                known.extend(u for u in users if u not in known)
    rows = []
    for key in sorted(cited):
        ref = refs.get(key, Reference(key, "", "", "unknown"))
        rows.append((key, ref.title, ref.url, ref.grade, "; ".join(cited[key])))
    return pd.DataFrame(rows, columns=list(SOURCE_COLUMNS))


def write_sources(out: Path, outputs: Outputs) -> list[Path]:
    """``sources.csv``: every source the run's systems cite (see :func:`sources_frame`);
    nothing when the outputs carry no systems."""
    if not outputs.systems:
        return []
    path = out / "sources.csv"
    atomic_csv(sources_frame(list(outputs.systems)), path, index=False)
    return [path]
