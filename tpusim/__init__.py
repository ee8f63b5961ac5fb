"""tpusim: a discrete-event simulator of Google TPU pods and their interconnect.

Layers, lowest first; a unit imports only units of lower layers (``LAYERS`` in
``tests/test_code_shape.py``, drawn in ``docs/layers.png``):

0. this module, :mod:`.errors`, :mod:`.units`, :mod:`.vocabulary`;
1. :mod:`.registry`;
2. :mod:`.config`;
3. :mod:`.hardware`, :mod:`.topology`;
4. :mod:`.network`;
5. :mod:`.collectives`;
6. :mod:`.program`;
7. :mod:`.compile` (XLA's TPU compiler on the CPU; imports JAX only when asked);
8. :mod:`.results`;
9. :mod:`.engine`;
10. :mod:`.session` (a system kept loaded between calls);
11. :mod:`.serving`;
12. :mod:`.workloads`;
13. :mod:`.planner`, :mod:`.validation`;
14. :mod:`.report` (what a run shows, from every kind's records);
15. :mod:`.study`;
16. :mod:`.cli` (a thin parser over the layers below);
17. ``__main__`` (``python -m tpusim``).

``tpusim.Session`` is :class:`tpusim.session.Session`, imported when first used (PEP
562): importing ``tpusim`` alone loads no layer, so ``tpusim --version`` starts at once.
"""

import os as _os
import sys as _sys

#: The version of the source tree (pyproject.toml's); :func:`package_version` prefers
#: the installed package's metadata.
__version__ = "0.1.0"


def __getattr__(name: str):  # PEP 562: the notebook API, loaded on first use
    if name == "Session":
        from importlib import import_module

        # the one import of the root upwards (tests/test_code_shape.py names it): lazy,
        # so that importing tpusim alone never loads the layers
        return import_module("tpusim.session").Session
    raise AttributeError(f"module 'tpusim' has no attribute {name!r}")


def package_version() -> str:
    """The installed distribution's version (package metadata), else ``__version__``
    (a checkout on the path, not installed)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("tpusim")
    except PackageNotFoundError:
        return __version__


def _interrupted_while_starting(_signum, _frame):  # pragma: no cover - timing dependent
    # Exit at once rather than raise: an exception raised here while a compiled
    # extension (pydantic_core) runs Python code during its import surfaces as that
    # extension's panic, several lines long. Nothing is written yet, so nothing is lost.
    print("tpusim: interrupted", file=_sys.stderr, flush=True)
    _os._exit(130)  # 128 + SIGINT, as tpusim.cli.console.INTERRUPTED_EXIT_CODE


# Started as the command (``python -m tpusim``: argv[0] is still "-m" while the package
# imports; the ``tpusim`` script): a Ctrl-C before the command line installs its own
# handler is one line too. Imported as a library (notebooks, tests), nothing changes.
if _sys.argv[:1] == ["-m"] or _os.path.basename(_sys.argv[0] if _sys.argv else "") == "tpusim":
    import signal as _signal

    _signal.signal(_signal.SIGINT, _interrupted_while_starting)
