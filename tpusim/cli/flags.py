"""Values of command-line flags: sizes, sweeps, axes, chip pairs, counts.

Each parser turns a flag's text into a value or raises
:class:`~tpusim.errors.InputError` naming the flag and the value (``--bytes 0.5:
0.5 is not a whole number of bytes``), or, for argparse ``type=`` functions,
``argparse.ArgumentTypeError``. Limits come from :mod:`tpusim.config.limits`.
"""

from __future__ import annotations

import argparse
import math
from typing import TYPE_CHECKING, TypeAlias

from tpusim import units
from tpusim.config.limits import (
    MAX_SWEEP_POINTS,
    MAX_SYSTEM_CHIPS,
    points_problem,
    whole_bytes_problem,
)
from tpusim.errors import InputError
from tpusim.later import Later
from tpusim.results.files import check_file_target

if TYPE_CHECKING:
    from tpusim.engine import CollectiveOptions

#: The subcommand parsers each command module's ``add_parsers`` adds its commands to.
Subparsers: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"

__all__ = [
    "Subparsers",
    "axes_flag",
    "check_network_work",
    "pairs_flag",
    "path_flag",
    "plot_flag",
    "positive_flag",
    "size_flag",
    "size_in_binary",
    "sweep_sizes",
    "whole_flag",
]


def size_flag(text: str, flag: str) -> float:
    """A size flag's value in bytes: finite, > 0 and whole."""
    try:
        value = units.parse(text, "bytes")
    except units.UnitError as exc:
        raise InputError(f"{flag} {text}: {exc}") from None
    problem = whole_bytes_problem(value)
    if problem is not None:
        raise InputError(f"{flag} {text}: {problem}")
    return value


def size_in_binary(text: str | None) -> bool:
    """Whether a size flag was given in binary units (``KiB``, ``MiB``...), so that it is
    echoed in them; decimal units (``MB``) and plain byte counts echo in decimal. For
    ``LOW:HIGH``, LOW's unit."""
    return "i" in (text or "").partition(":")[0]


def sweep_sizes(text: str, max_points: int = MAX_SWEEP_POINTS) -> list[float]:
    """``1KiB:1GiB`` -> every power of two from the first size to the second; at most
    ``max_points`` of them (counted before any is listed)."""
    lo_text, sep, hi_text = text.partition(":")
    if not sep:
        raise InputError(f"--sweep-bytes {text}: expected LOW:HIGH such as 1KiB:1GiB")
    lo, hi = size_flag(lo_text, "--sweep-bytes"), size_flag(hi_text, "--sweep-bytes")
    if hi < lo:
        raise InputError(f"--sweep-bytes {text}: HIGH is below LOW")
    count = math.floor(math.log2(hi * (1 + 1e-12) / lo)) + 1
    problem = points_problem(count, max_points, "raise it with --max-points")
    if problem is not None:
        raise InputError(f"--sweep-bytes {text}: {problem}")
    return [lo * 2.0**k for k in range(count)]


def pairs_flag(text: str | None) -> list[tuple[int, int]] | None:
    """``--pairs 0:1,2:3`` -> [(0, 1), (2, 3)]: chip ids below MAX_SYSTEM_CHIPS (the
    system's own range is checked when the group is placed), each pair once (a
    repeated pair would send its bytes twice)."""
    if text is None:
        return None
    try:
        pairs = [(int(a), int(b)) for a, b in (p.split(":") for p in text.split(","))]
    except ValueError:
        raise InputError(f"--pairs {text}: expected SRC:DST[,SRC:DST...] chip ids") from None
    for pair in pairs:
        if not all(0 <= chip < MAX_SYSTEM_CHIPS for chip in pair):
            raise InputError(
                f"--pairs {pair[0]}:{pair[1]}: chip ids are 0 to {MAX_SYSTEM_CHIPS - 1:,} "
                "at most (and below the system's chip count)"
            )
    repeated = sorted({p for p in pairs if pairs.count(p) > 1})
    if repeated:
        a, b = repeated[0]
        raise InputError(f"--pairs {text}: {a}:{b} is given more than once")
    return pairs


def axes_flag(text: str | None) -> list[str] | None:
    """``x,z`` -> ["x", "z"]; None when not given; an empty name is an error."""
    if text is None:
        return None
    names = [name.strip() for name in text.split(",")]
    if not all(names):
        raise InputError(f"--axes {text!r}: expected axis names such as x,z")
    return names


#: The collectives layer (numpy), imported only when a collective's size is checked.
_FEWEST_SENDS = Later("tpusim.collectives", "fewest_sends_per_chip")


def check_network_work(
    num_chips: int, sizes: list[float], options: CollectiveOptions, op: str
) -> None:
    """Refuse collective ``op`` too large to simulate at its fidelity (packet: see
    :func:`~tpusim.config.limits.packet_work_problem`, counting the transfers of every
    algorithm ``auto`` may try) before starting it (``num_chips`` the system's)."""
    chips = min(options.chips or num_chips, num_chips)
    sends = _FEWEST_SENDS(op, chips, options.algorithm)
    problem = options.network.work_problem(chips, max(sizes), sends)
    if problem is not None:
        raise InputError(problem)


def whole_flag(text: str) -> int:
    """A whole number (argparse type; its own message for anything else)."""
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None


def path_flag(text: str) -> str:
    """A flag that names something (``--out DIR``, ``--rates R1,R2``): not empty, not
    only spaces (an empty value was taken as the flag not given)."""
    if not text.strip():
        raise argparse.ArgumentTypeError("expected a value, got an empty string")
    return text


def plot_flag(text: str) -> str:
    """``--plot PATH`` (PATH.png and PATH.svg are written): not empty, and its folder
    exists and takes files (a missing folder is refused, never created)."""
    path_flag(text)
    try:
        check_file_target(text + ".png", "--plot")
    except InputError as exc:
        raise argparse.ArgumentTypeError(str(exc).removeprefix("--plot ")) from None
    return text


def positive_flag(text: str) -> int:
    value = whole_flag(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be 1 or more, got {value}")
    return value
