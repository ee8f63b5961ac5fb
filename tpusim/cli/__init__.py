"""The ``tpusim`` command line: one module per command, each a thin parser over the
layers below (:mod:`tpusim.cli.app` builds the parser and runs ``main``)."""

from tpusim.cli.app import build_parser, main
from tpusim.workloads.hlo import hlo_summary

__all__ = ["build_parser", "hlo_summary", "main"]
