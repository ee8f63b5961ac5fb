"""Exceptions with the exit codes the command line maps them to.

A user mistake (bad YAML, unknown name, bad flag) is an :class:`InputError`
(exit code 2); a simulation that cannot finish is a :class:`SimulationError`
(exit code 1). The CLI prints ``str(error)`` as one line, never a traceback.
"""

from __future__ import annotations


class TpusimError(Exception):
    """Base class of every error tpusim reports to a user."""

    exit_code = 1


class InputError(TpusimError):
    """Bad input: a config, a scenario, a file or a command-line value (exit code 2)."""

    exit_code = 2


class ConfigError(InputError):
    """A YAML config that does not validate: names the file, the YAML path and the line."""

    def __init__(
        self, message: str, file: str | None = None, path: str = "", line: int | None = None
    ):
        self.file, self.path, self.line, self.problem = file, path, line, message
        where = (file or "") + (f":{line}" if file and line is not None else "")
        text = " ".join(part for part in (where, f"{path}:" if path else "") if part)
        if text and not path:
            text += ":"
        super().__init__(f"{text} {message}" if text else message)


class SimulationError(TpusimError):
    """A simulation that cannot complete (deadlock, out of memory) (exit code 1)."""

    exit_code = 1
