"""The command line's one deferred import: a command's run code named by its module.

Building the parser loads only a command's flags module (its options models); the
module that runs the command, which imports its layers at module level, is imported
when the command runs, by :class:`Later`. A heavy library a command needs only on
one branch (pandas to write a table) is a :class:`LaterModule`, imported on its first
attribute. ``tpusim --version``, ``--help`` and a bad flag so stay fast, and no run
function imports inside itself (issue 44).

A command's modules are imported by :func:`import_held`, with Ctrl-C held back until
the import is done: a SIGINT that lands inside an extension module's initialisation
(pydantic-core's, built with PyO3, panics instead of raising) is delivered as
KeyboardInterrupt when the import returns, at a point the command line reports in one
line.
"""

from __future__ import annotations

import importlib
import signal
import sys
import threading
from collections.abc import Callable
from types import ModuleType
from typing import Any

__all__ = ["Later", "LaterModule", "import_held"]


def import_held(name: str) -> ModuleType:
    """The module ``name`` (dotted), imported with SIGINT blocked in the main thread; a
    Ctrl-C pressed meanwhile raises KeyboardInterrupt as the import returns."""
    if name in sys.modules:
        return sys.modules[name]
    held = hasattr(signal, "pthread_sigmask") and (
        threading.current_thread() is threading.main_thread()
    )
    if held:
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        return importlib.import_module(name)
    finally:
        if held:  # a pending SIGINT runs its Python handler here
            signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})


class Later:
    """The function ``name`` of the module ``module`` (dotted), imported on first call.

    ``p.set_defaults(func=Later("tpusim.cli.collective_run", "cmd_collective"))``: the
    parser holds the name, the run imports it.
    """

    __slots__ = ("module", "name")

    def __init__(self, module: str, name: str) -> None:
        self.module = module
        self.name = name

    def function(self) -> Callable[..., Any]:
        """The named function (its module imported now, if not yet)."""
        function: Callable[..., Any] = vars(import_held(self.module))[self.name]
        return function

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.function()(*args, **kwargs)

    def __repr__(self) -> str:
        return f"Later({self.module!r}, {self.name!r})"


class LaterModule:
    """The module ``name``, imported on its first attribute (``pd.DataFrame``); bound
    at module level under ``if not TYPE_CHECKING`` beside the real import for type
    checkers. Until then it is not in ``sys.modules``."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __getattr__(self, attribute: str) -> Any:
        return getattr(importlib.import_module(self.name), attribute)

    def __repr__(self) -> str:
        return f"LaterModule({self.name!r})"
