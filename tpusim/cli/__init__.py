"""The ``tpusim`` command line: one module per command, each a thin parser over the
layers below. :mod:`tpusim.cli.app` registers the commands (``REGISTERED``: each one's
module and help line), builds the parser of the one asked for and runs ``main``;
:mod:`.flags` parses flag values (sizes, sweeps, axes) with their limits;
:mod:`.console` turns Ctrl-C and a stdout that cannot be written into one line.

Its names are imported when first used (PEP 562), so that ``import tpusim.cli.app``
(``tpusim --version``) loads no simulation layer."""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["build_parser", "hlo_summary", "main"]

_HOMES = {
    "build_parser": "tpusim.cli.app",
    "main": "tpusim.cli.app",
    "hlo_summary": "tpusim.workloads.hlo",
}


def __getattr__(name: str) -> Any:
    if name not in _HOMES:
        raise AttributeError(f"module 'tpusim.cli' has no attribute {name!r}")
    return getattr(importlib.import_module(_HOMES[name]), name)
