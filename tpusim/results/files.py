"""Writing files so that nothing is ever half-written, and output paths checked early.

Every file tpusim writes goes first to a temporary file in the same folder and is
renamed into place (:func:`atomic_write`): a reader sees the old file or the whole
new one, never a prefix, even after a crash, a full disk or Ctrl-C. A target that
exists and is not a regular file (``/dev/stdout``, ``/dev/full``, a FIFO) is written
directly, since renaming over a device would replace it.

A scenario run's folder is staged (:func:`staged_folder`): its files are written
into a hidden ``.tpusim-partial-*`` folder inside it and moved into place only when
every writer has finished; on any failure (or Ctrl-C) the staging folder is removed,
so the output folder holds the previous run's files or all of the new run's.

:func:`check_file_target` and :func:`check_folder_target` test an output path before
a simulation (by creating and removing a probe file, which also catches read-only
file systems, ``/proc`` and, for root, every case permissions would not); a problem
is one :class:`~tpusim.errors.InputError` naming the flag and the path.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import shutil
import signal
import stat
import tempfile
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from tpusim.errors import InputError, SimulationError

if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.figure import Figure

__all__ = [
    "STAGING_PREFIX",
    "atomic_csv",
    "atomic_write",
    "atomic_write_text",
    "check_file_target",
    "check_folder_target",
    "file_in",
    "file_stem",
    "json_text",
    "output_error",
    "safe_name",
    "staged_folder",
]

#: Name prefix of the hidden folder a run's files are written into before they are
#: moved into the output folder (assumption: no user file starts with it).
STAGING_PREFIX = ".tpusim-partial-"


#: Longest file name (bytes, UTF-8) a name from the input may give: most file systems'
#: NAME_MAX is 255, less room for a suffix such as ``.yaml``.
MAX_NAME_BYTES = 200


def safe_name(name: str, what: str) -> str:
    """``name`` (from the input: a scenario's, a server profile's) as one plain file
    name, never a path: refused (InputError naming ``what``) when empty, ``.`` or
    ``..``, with a ``/``, a ``\\`` or a control character, starting with ``.`` or
    longer than MAX_NAME_BYTES, so no file built from it is written outside its folder."""
    problem = None
    if any(c in "/\\" or ord(c) < 32 or ord(c) == 127 for c in name):
        problem = "has a '/', a '\\' or a control character"
    elif name in ("", ".", "..") or name.startswith("."):
        problem = "is empty or starts with '.'"
    elif len(name.encode("utf-8", "surrogatepass")) > MAX_NAME_BYTES:
        problem = f"is longer than {MAX_NAME_BYTES} bytes"
    if problem is not None:
        raise InputError(f"{what} {name!r} {problem}: it names a file, give a plain name")
    return name


def file_stem(text: str) -> str:
    """``text`` (names from the input: a system's, a workload's) as part of one file
    name: ``/``, ``\\`` and control characters become ``_``, ``,`` too and ``=`` a
    ``-`` (sweep labels), and a text over MAX_NAME_BYTES is cut, a digest of the whole
    appended so that two long names stay two files."""
    import hashlib

    out = "".join("_" if c in "/\\," or ord(c) < 32 or ord(c) == 127 else c for c in text)
    out = out.replace("=", "-")
    raw = out.encode("utf-8", "surrogatepass")
    if len(raw) <= MAX_NAME_BYTES:
        return out
    digest = hashlib.sha256(raw).hexdigest()[:12]
    return raw[: MAX_NAME_BYTES - 13].decode("utf-8", "ignore") + "-" + digest


def file_in(folder: str | Path, name: str, what: str) -> Path:
    """``folder / name`` for a ``name`` from the input (:func:`safe_name`), refused
    (InputError) when that path is a symbolic link (writing would follow it out of
    ``folder``)."""
    path = Path(folder) / safe_name(name, what)
    if path.is_symlink():
        raise InputError(f"{what} {name!r}: {path} is a symbolic link; not written through it")
    return path


def output_error(flag: str, path: str | Path, exc: OSError) -> InputError:
    """The one-line error for an output path that cannot be written."""
    reason = exc.strerror or str(exc)
    return InputError(f"{flag} {path}: cannot write ({reason})")


def _is_special(path: Path) -> bool:
    """True when ``path`` exists and is neither a regular file nor a folder."""
    try:
        mode = path.stat().st_mode
    except OSError:
        return False
    return not stat.S_ISREG(mode) and not stat.S_ISDIR(mode)


def atomic_write(
    path: str | Path, write: Callable[[IO[Any]], object], binary: bool = False
) -> Path:
    """Call ``write(handle)`` on a temporary file next to ``path``, then rename it to
    ``path``; the temporary file is removed on any failure. A device or FIFO target
    is written directly. Raises the OSError of a failed write or rename."""
    target = Path(path)
    mode = "wb" if binary else "w"
    if _is_special(target):
        with open(target, mode) as handle:
            write(handle)
        return target
    fd, temp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, mode) as handle:
            write(handle)
        os.chmod(temp, 0o666 & ~_umask())
        os.replace(temp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise
    return target


def _umask() -> int:
    """The process's file-creation mask (mkstemp makes files 0600; a renamed output
    gets the permissions an ordinary ``open`` would have given it)."""
    mask = os.umask(0)
    os.umask(mask)
    return mask


def atomic_write_text(path: str | Path, text: str) -> Path:
    """Write ``text`` to ``path`` atomically (:func:`atomic_write`)."""
    return atomic_write(path, lambda handle: handle.write(text))


def save_figure(fig: Figure, path: str | Path) -> tuple[Path, Path]:
    """Write ``fig`` as ``path.png`` and ``path.svg`` (creating the folder); return both.
    Each is written to a temporary file and renamed into place
    (:func:`atomic_write`). The SVG carries no date and fixed
    element ids, so the same figure gives the same bytes (runs compare file by file)."""
    import matplotlib

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    png, svg = path.with_suffix(".png"), path.with_suffix(".svg")
    atomic_write(png, lambda f: fig.savefig(f, format="png", dpi=150, bbox_inches="tight"), True)
    with matplotlib.rc_context({"svg.hashsalt": "tpusim"}):
        atomic_write(
            svg,
            lambda f: fig.savefig(f, format="svg", bbox_inches="tight", metadata={"Date": None}),
            True,
        )
    return png, svg


def atomic_csv(frame: pd.DataFrame, path: str | Path, **options: object) -> Path:
    """``frame.to_csv(path, **options)`` (a pandas DataFrame), written atomically."""
    return atomic_write(path, lambda handle: frame.to_csv(handle, **options))


def _probe(folder: Path) -> None:
    """Create and remove a file in ``folder``; raises the OSError if that fails."""
    fd, temp = tempfile.mkstemp(prefix=".tpusim-probe-", dir=folder)
    os.close(fd)
    os.unlink(temp)


def check_file_target(path: str | Path, flag: str) -> None:
    """Raise an InputError now if ``path`` cannot be written as a file later: its
    folder is missing or not a folder, it is a folder, or the folder refuses a file."""
    target = Path(path)
    folder = target.parent
    if target.is_dir():
        raise InputError(f"{flag} {path}: is a folder, expected a file")
    if _is_special(target):
        if not os.access(target, os.W_OK):
            raise InputError(f"{flag} {path}: cannot write (permission denied)")
        return
    if not folder.exists():
        raise InputError(f"{flag} {path}: folder {folder} does not exist")
    if not folder.is_dir():
        raise InputError(f"{flag} {path}: {folder} is not a folder")
    try:
        _probe(folder)
    except OSError as exc:
        raise output_error(flag, path, exc) from None


def check_folder_target(path: str | Path, flag: str) -> None:
    """Raise an InputError now if ``path`` cannot become an output folder: it is a
    file, or its nearest existing ancestor is not a folder or refuses new files."""
    target = Path(path)
    if target.exists() and not target.is_dir():
        raise InputError(f"{flag} {path}: exists and is not a folder")
    existing = target
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        raise InputError(f"{flag} {path}: {existing} is not a folder")
    try:
        _probe(existing)
    except OSError as exc:
        raise output_error(flag, path, exc) from None


@contextlib.contextmanager
def staged_folder(out: str | Path) -> Iterator[Path]:
    """Create ``out`` and yield a hidden staging folder inside it; on a clean exit move
    every staged file into ``out`` (replacing files of the same name), on any
    exception remove the staging folder (and ``out`` if this call created it empty)."""
    folder = Path(out)
    created = not folder.exists()
    folder.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=STAGING_PREFIX, dir=folder))
    try:
        yield staging
        _move_all(staging, folder)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
        if created:
            with contextlib.suppress(OSError):
                folder.rmdir()  # only succeeds when nothing was moved in


def _move_all(staging: Path, folder: Path) -> None:
    """Rename every file under ``staging`` to the same place under ``folder``, with
    Ctrl-C held back until the renames are done (they take milliseconds)."""
    blocked = threading.current_thread() is threading.main_thread()
    if blocked:
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        for source in sorted(p for p in staging.rglob("*") if p.is_file()):
            target = folder / source.relative_to(staging)
            target.parent.mkdir(parents=True, exist_ok=True)
            os.replace(source, target)
    finally:
        if blocked:
            signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})


def _finite(value: object, path: str) -> None:
    """Raise SimulationError at the first NaN or infinity in ``value`` (a JSON tree)."""
    if isinstance(value, float) and not math.isfinite(value):
        raise SimulationError(
            f"result {path or '.'} is {value}, which JSON cannot hold (a bug: please report it)"
        )
    if isinstance(value, dict):
        for key, item in value.items():
            _finite(item, f"{path}.{key}")
    elif isinstance(value, list | tuple):
        for i, item in enumerate(value):
            _finite(item, f"{path}[{i}]")


def json_text(record: object, indent: int | None = 2) -> str:
    """``record`` as strict JSON (no ``NaN`` or ``Infinity``, which JSON does not have).

    A non-finite number is a bug at its source (an input that should have been
    refused, or a figure that should be ``null``): it raises a SimulationError naming
    its path in the record rather than printing invalid JSON.
    """
    try:
        return json.dumps(record, indent=indent, allow_nan=False)
    except ValueError:
        _finite(record, "")
        raise
