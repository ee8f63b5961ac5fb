"""A compiled-module artifact (what ``tpusim compile`` writes): one gzip JSON file.

Fields: ``format`` (:data:`FORMAT`), ``request`` (what was compiled), ``topology``
(libtpu's name, ``v5e:4x4``), ``mesh`` (``axes``, ``shape`` and ``devices``: ``[id,
x, y, z, core]`` of each device in the module's device-id order), ``hlo`` (XLA's
optimized per-device module, ``compiled.as_text()``), ``cost_analysis`` and
``memory_analysis`` (XLA's, bytes), ``versions`` (tpusim, jax, jaxlib, libtpu) and
``compile_time_s``. Reading needs no JAX.
"""

from __future__ import annotations

import gzip
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tpusim.program.hlo.lower import hlo_to_program
from tpusim.program.hlo.module import HloModule, parse_hlo
from tpusim.program.ir import Program, ProgramError

FORMAT = "tpusim-compiled-module/1"
SUFFIX = ".json.gz"
#: Largest artifact read, bytes of JSON once unzipped (as the largest HLO file read).
MAX_ARTIFACT_BYTES = 256 * 2**20


@dataclass(frozen=True)
class CompiledArtifact:
    """A read artifact; ``devices``: (x, y, z, core) of each device id in order."""

    file: str
    hlo: str
    topology: str
    devices: tuple[tuple[int, int, int, int], ...]
    cost_analysis: dict[str, float]
    memory_analysis: dict[str, float]
    fields: dict[str, Any]

    @property
    def devices_per_chip(self) -> int:
        """Devices on one chip (2 for Ironwood's TensorCores, else 1)."""
        return 1 + max((d[3] for d in self.devices), default=0)

    def device_chips(self, dims: tuple[int, ...] | None) -> list[int]:
        """The chip of each device on a torus of ``dims`` (x fastest, as tpusim numbers
        chips); ``None``: chips numbered in the order their coordinates first appear.
        Raises ProgramError when a device lies outside ``dims``."""
        order: dict[tuple[int, ...], int] = {}
        chips = []
        for x, y, z, _ in self.devices:
            coords = (x, y, z)
            if dims is None:
                chips.append(order.setdefault(coords, len(order)))
                continue
            full = (*dims, 1, 1)[:3]
            if any(c >= n for c, n in zip(coords, full, strict=True)):
                raise ProgramError(
                    f"{self.file}: device at {list(coords)} lies outside the system's "
                    f"torus {list(dims)}"
                )
            chips.append(x + full[0] * (y + full[1] * z))
        return chips


def load_compiled(path: str | Path) -> tuple[HloModule, Program, CompiledArtifact]:
    """An artifact's module, its program (:func:`~tpusim.program.hlo.lower.hlo_to_program`)
    and the artifact; ProgramError naming the file on bad input."""
    artifact = read_artifact(path)
    module = parse_hlo(artifact.hlo, str(path))
    return module, hlo_to_program(module, Path(path).name.split(".")[0]), artifact


def is_artifact(path: str | Path) -> bool:
    """Whether ``path`` names an artifact (by its suffix)."""
    return str(path).endswith(SUFFIX)


def write_artifact(fields: dict[str, Any], path: str | Path) -> Path:
    """Write ``fields`` (plus ``format``) as gzip JSON, byte-identical for equal input
    (no timestamp in the gzip header)."""
    path = Path(path)
    data = json.dumps({"format": FORMAT, **fields}, sort_keys=True, indent=0).encode()
    with path.open("wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as f:
        f.write(data)
    return path


def read_artifact(path: str | Path) -> CompiledArtifact:
    """Read an artifact; ProgramError naming the file and the problem."""
    path = Path(path)
    try:
        with gzip.open(path, "rb") as f:
            data = f.read(MAX_ARTIFACT_BYTES + 1)
        fields = json.loads(data)
    except (OSError, EOFError, ValueError) as exc:
        raise ProgramError(f"{path}: cannot read the compiled artifact: {exc}") from None
    if len(data) > MAX_ARTIFACT_BYTES:
        raise ProgramError(f"{path}: artifact over {MAX_ARTIFACT_BYTES // 2**20} MiB, the limit")
    if not isinstance(fields, dict) or fields.get("format") != FORMAT:
        raise ProgramError(f"{path}: not a tpusim compiled artifact (format {FORMAT})")
    try:
        devices = tuple(
            (int(d[1]), int(d[2]), int(d[3]), int(d[4])) for d in fields["mesh"]["devices"]
        )
        return CompiledArtifact(
            str(path),
            str(fields["hlo"]),
            str(fields["topology"]),
            devices,
            {k: float(v) for k, v in fields["cost_analysis"].items()},
            {k: float(v) for k, v in fields["memory_analysis"].items()},
            fields,
        )
    except (KeyError, TypeError, ValueError, IndexError) as exc:
        raise ProgramError(
            f"{path}: compiled artifact lacks a field or has a bad one: {exc}"
        ) from None
