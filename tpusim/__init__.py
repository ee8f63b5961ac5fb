"""tpusim: a discrete-event simulator of Google TPU pods and their interconnect.

Layers, lowest first; a unit imports only units of lower layers (``LAYERS`` in
``tests/test_code_shape.py``, drawn in ``docs/layers.png``):

0. this module, :mod:`.errors`, :mod:`.later`, :mod:`.units`, :mod:`.vocabulary`;
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
16. :mod:`.api` (the front door below);
17. :mod:`.cli` (a thin parser over the layers below);
18. ``__main__`` (``python -m tpusim``).

The front door is ``__all__``: :func:`run` a scenario, one :func:`collective`,
:func:`training_step` or :func:`serve` on a system, :func:`plan` a training layout
(:mod:`tpusim.api`), :func:`load_system`, :class:`Session` (a system kept loaded) and the
errors a caller catches. Each name is imported on its first use (PEP 562: the one lazy
place, :data:`LAZY`), so importing ``tpusim`` alone loads no layer and ``tpusim
--version`` starts at once::

    import tpusim
    run = tpusim.run("scenarios/demo.yaml")        # a ScenarioRun: records, failures
    tpusim.collective("ironwood-256", "all-reduce", "64 MiB").result.busbw_Bps
"""

import os as _os
import sys as _sys
from typing import TYPE_CHECKING

#: The version of the source tree (pyproject.toml's); :func:`package_version` prefers
#: the installed package's metadata.
__version__ = "0.1.0"

#: The package's names imported on first use (PEP 562), each with its module: the one
#: place tpusim defers an import for start-up.
LAZY = {
    "run": "tpusim.api",
    "collective": "tpusim.api",
    "training_step": "tpusim.api",
    "serve": "tpusim.api",
    "plan": "tpusim.api",
    "load_system": "tpusim.config",
    "Session": "tpusim.session",
    "TpusimError": "tpusim.errors",
    "InputError": "tpusim.errors",
    "ConfigError": "tpusim.errors",
    "SimulationError": "tpusim.errors",
}

__all__ = [
    "ConfigError",
    "InputError",
    "Session",
    "SimulationError",
    "TpusimError",
    "__version__",
    "collective",
    "load_system",
    "package_version",
    "plan",
    "run",
    "serve",
    "training_step",
]

if TYPE_CHECKING:  # what the lazy names are, for type checkers and editors
    from tpusim.api import collective, plan, run, serve, training_step
    from tpusim.config import load_system
    from tpusim.errors import ConfigError, InputError, SimulationError, TpusimError
    from tpusim.session import Session


def __getattr__(name: str) -> object:  # PEP 562: the front door, loaded on first use
    module = LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'tpusim' has no attribute {name!r}")
    from importlib import import_module

    value = getattr(import_module(module), name)
    globals()[name] = value  # found once: the next use is a plain attribute
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(LAZY))


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
    # pydantic looks for plugins (observability hooks) by reading the metadata of every
    # installed distribution when it builds its first model: a few ms of every command's
    # start-up for hooks the command line never uses. A value set by the user is kept.
    _os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")
