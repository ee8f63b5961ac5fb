"""tpusim: a discrete-event simulator of Google TPU pods and their interconnect.

Layers, each importing only those before it: :mod:`tpusim.units`,
:mod:`tpusim.config`, :mod:`tpusim.topology`; the command line is :mod:`tpusim.cli`.
"""

__version__ = "0.1.0"
