"""Start-up (issue 44): a small answer costs what it computes. Fresh-process wall times,
the median of RUNS runs, of

- ``tpusim --version`` (target 0.3 s);
- ``tpusim collective`` of a 64 MiB all-reduce on a 4x4x4 torus of Ironwood chips
  (target 0.15 s; 0.37 s before, nearly all of it start-up);
- the same on an 8-chip (2x2x2) torus (0.42 s before).

Each runs as ``python -m tpusim ...`` with this interpreter (``sys.executable``, not a
pyenv shim, whose own bash start-up is not tpusim's), in the repository this file
belongs to (``-m`` puts the working folder first on ``sys.path``: run from another
checkout, it would time that one's package whatever ``PYTHONPATH`` says). The tori are
system files written to a temporary folder (no shipped system is a single cube). Beside
the wall median each line shows the median CPU time of the process (user + system: the
load of a shared machine inflates wall time, not this) and the interpreter's own
start-up (``python -c pass``) measured the same way, the floor under every figure.
What a command imports: ``python -X importtime -m tpusim ...``.

Bytecode: an installed package runs from compiled bytecode (pip writes ``__pycache__``
at install; a checkout writes it on its first run), so the children run with a bytecode
cache in a temporary folder (``PYTHONPYCACHEPREFIX``), filled by one untimed run of each
command, even where the environment says ``PYTHONDONTWRITEBYTECODE`` (compiling
tpusim's ~100 modules from source on every run costs ~0.1 s). ``--no-bytecode-cache``
measures with the environment as it is.

Run: ``python benchmarks/bench_startup.py [RUNS] [--no-bytecode-cache]`` (default 7).
Exit 1 if a median is over its target.
"""

from __future__ import annotations

import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

#: The repository whose package is timed.
ROOT = Path(__file__).resolve().parent.parent

#: Wall-time targets (s), median of fresh processes (issue 44).
TARGET_S = {"--version": 0.3, "4x4x4 all-reduce 64 MiB": 0.15}
CUBE = """\
name: {name}
description: "a {dims} torus of Ironwood chips (benchmarks/bench_startup.py)"
chip: ironwood
topology: {{kind: torus, dims: [{dims_list}]}}
"""


def _system(folder: Path, dims: tuple[int, ...]) -> str:
    """A torus system file of ``dims`` in ``folder``; its path."""
    text = "x".join(map(str, dims))
    path = folder / f"torus-{text}.yaml"
    path.write_text(
        CUBE.format(name=f"torus-{text}", dims=text, dims_list=", ".join(map(str, dims)))
    )
    return str(path)


def _environment(cache: str | None) -> dict[str, str]:
    """The children's environment: with a bytecode cache in ``cache``, or as it is."""
    env = dict(os.environ)
    if cache is not None:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = cache
    return env


def _timed(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(wall s, CPU s) of one fresh process running ``argv`` (CPU from getrusage, to
    the microsecond; ``os.times`` counts clock ticks of 10 ms)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    began = time.perf_counter()
    subprocess.run(argv, check=True, capture_output=True, env=env, cwd=ROOT)
    wall = time.perf_counter() - began
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def main(runs: int, bytecode_cache: bool) -> int:
    with tempfile.TemporaryDirectory() as folder:
        env = _environment(str(Path(folder) / "pycache") if bytecode_cache else None)
        cube, small = _system(Path(folder), (4, 4, 4)), _system(Path(folder), (2, 2, 2))
        tpusim = [sys.executable, "-m", "tpusim"]
        all_reduce = ["--op", "all-reduce", "--bytes", "64MiB", "--json"]
        commands = {
            "python -c pass": [sys.executable, "-c", "pass"],
            "--version": [*tpusim, "--version"],
            "4x4x4 all-reduce 64 MiB": [*tpusim, "collective", cube, *all_reduce],
            "2x2x2 all-reduce 64 MiB": [*tpusim, "collective", small, *all_reduce],
        }
        failed = False
        cache = "cached" if bytecode_cache else "as the environment says"
        print(
            f"{'command':<26} {'wall_s':>7} {'cpu_s':>7} {'target_s':>8}   (median of {runs}; "
            f"bytecode {cache})"
        )
        for name, argv in commands.items():
            if bytecode_cache:
                _timed(argv, env)  # writes the bytecode
            times = [_timed(argv, env) for _ in range(runs)]
            wall = statistics.median(t[0] for t in times)
            cpu = statistics.median(t[1] for t in times)
            target = TARGET_S.get(name)
            failed |= target is not None and wall > target
            shown = f"{target:>8.2f}" if target is not None else f"{'':>8}"
            print(f"{name:<26} {wall:>7.3f} {cpu:>7.3f} {shown}")
    return 1 if failed else 0


if __name__ == "__main__":
    words = sys.argv[1:]
    counts = [w for w in words if w != "--no-bytecode-cache"]
    sys.exit(main(int(counts[0]) if counts else 7, "--no-bytecode-cache" not in words))
