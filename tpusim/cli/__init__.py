"""The ``tpusim`` command line: one module per command, each a thin parser over the
layers below. :mod:`tpusim.cli.app` builds the parser from its ``COMMANDS`` and runs
``main``; :mod:`.flags` parses flag values (sizes, sweeps, axes) with their limits;
:mod:`.console` turns Ctrl-C and a stdout that cannot be written into one line."""

from tpusim.cli.app import build_parser, main
from tpusim.workloads.hlo import hlo_summary

__all__ = ["build_parser", "hlo_summary", "main"]
