"""MaxText's own training step, compiled by MaxText's ``train_compile`` in MaxText's
Python (issue 42's path (a)), written as a tpusim artifact. No JAX is imported here:
:mod:`.maxtext_runner` runs in the other interpreter (``--maxtext-python``, where
``pip install "maxtext[tpu]"`` put MaxText; Python 3.12) and hands back the fields.

The topology is named as MaxText names slices: ``v5e-16`` and ``v6e-16`` count
chips, ``v5p-16``, ``v4-16`` and ``tpu7x-8`` TensorCores (two per chip; published,
MaxText ``accelerator_to_spec_map.py``: ``"v5p-16"`` is ``v5:2x2x2``, ``"tpu7x-8"``
is ``tpu7x:2x2x1``).
"""

from __future__ import annotations

import gzip
import json
import math
import os
import shlex
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from tpusim.compile.request import QUIET_ENV
from tpusim.errors import InputError, TpusimError
from tpusim.program.hlo.artifact import write_artifact

RUNNER = Path(__file__).with_name("maxtext_runner.py")
#: TensorCores per chip in MaxText's slice names (the rest count chips).
CORES_IN_NAME = {"v4": 2, "v5p": 2, "tpu7x": 2}
#: Longest a MaxText compile may run, seconds (assumption: a 70B step took 157 s on a
#: 2-core machine; an hour is a hung compile).
MAX_COMPILE_S = 3600


def maxtext_topology(topology: str) -> str:
    """MaxText's slice name of ``FAMILY:SHAPE`` (``v5e:4x4`` -> ``v5e-16``)."""
    family, shape = topology.split(":")
    chips = math.prod(int(x) for x in shape.split("x"))
    return f"{family}-{chips * CORES_IN_NAME.get(family, 1)}"


def _root(python: str) -> Path:
    """MaxText's package folder in ``python``; InputError when it is not there."""
    try:
        found = subprocess.run(
            [python, "-c", "import maxtext, os; print(os.path.dirname(maxtext.__file__))"],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise InputError(f"--maxtext-python {python}: cannot run it: {exc}") from None
    if found.returncode != 0:
        raise InputError(
            f'--maxtext-python {python}: no MaxText there (pip install "maxtext[tpu]" in a '
            "Python 3.12 environment)"
        )
    return Path(found.stdout.strip())


def _last_line(text: str) -> str:
    """The last line of ``text`` that names an error (``...Error: ...``), else its last
    line (a compile that runs out of HBM ends with a link after the reason)."""
    lines = [line for line in text.strip().splitlines() if line.strip()]
    errors = [line for line in lines if "Error: " in line]
    return (errors or lines or ["(no output)"])[-1][:300]


def compile_maxtext(
    overrides: str,
    topology: str,
    python: str,
    out: Path,
    flags: tuple[str, ...] = (),
    num_slices: int = 1,
) -> dict[str, Any]:
    """Run MaxText's ``train_compile`` with ``overrides`` (its ``key=value`` flags,
    verbatim) for ``num_slices`` slices of ``topology`` and write the artifact to
    ``out``; its fields.

    Raises InputError when MaxText is not found, TpusimError (one line, the last of
    MaxText's output) when its compile fails.
    """
    base = _root(python) / "configs" / "base.yml"
    name = maxtext_topology(topology)
    env = {**os.environ, **QUIET_ENV, "LIBTPU_INIT_ARGS": " ".join(flags)}
    with tempfile.TemporaryDirectory() as tmp:
        raw = Path(tmp) / "fields.json.gz"
        args = [f"compile_topology={name}", f"compile_topology_num_slices={num_slices}"]
        # -P: the runner's folder (this package, whose maxtext.py would shadow MaxText's
        # package) is not put on sys.path
        command = [python, "-P", str(RUNNER), str(raw), str(base), *args]
        command += shlex.split(overrides)
        try:
            done = subprocess.run(
                command, capture_output=True, text=True, env=env, timeout=MAX_COMPILE_S, check=False
            )
        except subprocess.TimeoutExpired:
            raise TpusimError(f"MaxText train_compile for {name}: over {MAX_COMPILE_S} s") from None
        if done.returncode != 0 or not raw.exists():
            raise TpusimError(
                f"MaxText train_compile for {name} failed (exit {done.returncode}): "
                f"{_last_line(done.stderr or done.stdout)}"
            )
        with gzip.open(raw, "rt") as f:
            fields: dict[str, Any] = json.load(f)
    fields["request"] = {
        "maxtext": overrides,
        "topology": topology,
        "compile_topology": name,
        "num_slices": num_slices,
        "libtpu_flags": list(flags),
    }
    fields["topology"] = topology
    write_artifact(fields, out)
    return fields
