"""Reading a scenario file, the first of its three steps (read, check, expand: the
others are :mod:`tpusim.study.checking` and :mod:`tpusim.study.expanding`).

Reading parses the YAML once, keeps each key's line, moves the deprecated flat network
keys into the ``network:`` tree (the one place they are migrated for a scenario) and
takes the workloads' file paths relative to the scenario's folder. Nothing is validated
here beyond the YAML itself: :class:`ScenarioFile` is the file as written.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from tpusim.config.yamlio import PathKey, format_path, line_of, load_yaml
from tpusim.errors import ConfigError
from tpusim.network.tree import read_flat
from tpusim.study.schema import models_beside

__all__ = ["ScenarioFile", "read_scenario"]


@dataclass(frozen=True)
class ScenarioFile:
    """A scenario file as read: ``file`` (as given: errors name it so), ``raw`` (the
    parsed YAML, flat network keys migrated and workload paths made relative to the
    file's folder; not yet validated) and ``lines`` (the line of each YAML path)."""

    file: str
    raw: object
    lines: dict[PathKey, int]

    @property
    def data(self) -> dict[str, object]:
        """The top-level mapping (empty when the file is not one: validation says so)."""
        return self.raw if isinstance(self.raw, dict) else {}

    @property
    def folder(self) -> Path:
        """The folder the file's relative paths (calibration, systems, HLO) start from."""
        return Path(self.file).parent

    def error(self, problem: str, path: PathKey) -> ConfigError:
        """A ConfigError naming this file, ``path`` and its line."""
        line = line_of(self.lines, path)
        return ConfigError(problem, file=self.file, path=format_path(path), line=line)


def read_scenario(file: str | Path, warn_deprecated: bool = True) -> ScenarioFile:
    """Scenario ``file`` read and parsed (once per run: workers receive the typed point
    set, :mod:`tpusim.study.pointset`); a deprecated flat network key warns unless
    ``warn_deprecated`` is false. Raises ConfigError for a file that does not read or
    parse, or that gives a network option in both forms."""
    name = str(file)
    data, lines = load_yaml(file)
    data = read_flat(data, name, lines, warn_deprecated)
    return ScenarioFile(name, models_beside(data, Path(name).parent), lines)
