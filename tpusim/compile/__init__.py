"""``tpusim compile``: XLA's own TPU compilation of a model step, made on the CPU.

The only layer that imports JAX and libtpu (the ``xla`` extra), and only when a compile
is asked for: :func:`compile_to` loads :mod:`.driver` (which imports them) on its first
call; :mod:`.request` (what to compile) needs neither. A compile builds the compact JAX
transformer of :mod:`.model` from a shipped model preset, shards it over a mesh with
``training_step``'s roles (:mod:`.sharding`), asks libtpu to compile it for a TPU
topology and writes one artifact (:mod:`tpusim.program.hlo.artifact`) that
``tpusim hlo`` replays without JAX.
"""

from __future__ import annotations

import importlib
import importlib.util
from pathlib import Path
from typing import Any

from tpusim.compile.request import CompileRequest, make_request, resolve_topology
from tpusim.errors import InputError
from tpusim.program.hlo.artifact import write_artifact

#: What ``tpusim compile`` says when JAX or libtpu is missing.
NEEDS_EXTRA = "tpusim compile needs the xla extra: pip install 'tpusim[xla]'"

__all__ = [
    "NEEDS_EXTRA",
    "CompileRequest",
    "compile_maxtext_to",
    "compile_to",
    "has_xla",
    "make_request",
]


def has_xla() -> bool:
    """Whether JAX and libtpu are installed (nothing is imported to find out)."""
    return all(importlib.util.find_spec(name) is not None for name in ("jax", "libtpu"))


def compile_maxtext_to(
    overrides: str, topology: str, python: str, out: str | Path, flags: tuple[str, ...] = ()
) -> dict[str, Any]:
    """MaxText's own step (its ``key=value`` flags verbatim) compiled by its
    ``train_compile`` in ``python`` for ``topology`` (a name :func:`resolve_topology`
    reads), written to ``out``; see :mod:`.maxtext`."""
    from tpusim.compile.maxtext import compile_maxtext

    return compile_maxtext(overrides, resolve_topology(topology), python, Path(out), flags)


def compile_to(request: CompileRequest, out: str | Path) -> dict[str, Any]:
    """Compile ``request`` and write its artifact to ``out``; the artifact's fields.

    Raises InputError (:data:`NEEDS_EXTRA`) when JAX or libtpu is not installed.
    """
    if not has_xla():
        raise InputError(NEEDS_EXTRA)
    driver = importlib.import_module("tpusim.compile.driver")
    fields: dict[str, Any] = driver.compile_artifact(request)
    write_artifact(fields, out)
    return fields
