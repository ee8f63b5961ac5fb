"""Regenerate the compiled-module fixtures of ``tests/test_compiled_fixtures.py``.

Each fixture is one ``tpusim compile`` of a tiny preset (``tests/fixtures/compiled/
tiny-*.yaml``: a few layers, small widths, so each compile takes seconds), written as
``tests/fixtures/compiled/<name>.json.gz``; the tests replay them with no JAX. Needs
the xla extra (jax, libtpu). Run one compile at a time::

    python tools/compile_fixtures.py [--only NAME ...]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "compiled"
#: SparseCore collective offload, as the tpu-recipes Ironwood recipes set it.
SPARSECORE_FLAGS = [
    f"--libtpu-flag=--xla_tpu_enable_sparse_core_collective_offload_{op}=true"
    for op in ("all_gather", "reduce_scatter", "all_reduce")
]
#: name -> the ``tpusim compile`` arguments after the model.
FIXTURES: dict[str, list[str]] = {
    "dense-v5e-2x2": [
        "tiny-dense.yaml",
        "--topology",
        "v5e:2x2",
        "--mesh",
        "fsdp=2,tensor=2",
        "--seq",
        "128",
    ],
    "moe-v5e-2x2": [
        "tiny-moe.yaml",
        "--topology",
        "v5e:2x2",
        "--mesh",
        "expert=2,tensor=2",
        "--seq",
        "128",
    ],
    "dense-v5p-2x2x2": ["tiny-dense.yaml", "--topology", "v5p:2x2x2", "--seq", "128"],
    "dense-tpu7x-sparsecore": [
        "tiny-dense.yaml",
        "--topology",
        "tpu7x:2x2x1",
        "--seq",
        "128",
        *SPARSECORE_FLAGS,
    ],
    "decode-v6e-2x2": [
        "tiny-dense.yaml",
        "--topology",
        "v6e:2x2",
        "--mesh",
        "fsdp=2,tensor=2",
        "--step",
        "decode",
        "--batch",
        "4",
        "--seq",
        "256",
    ],
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", choices=sorted(FIXTURES), help="fixtures to make")
    args = parser.parse_args()
    for name in args.only or FIXTURES:
        model, *flags = FIXTURES[name]
        out = HERE / f"{name}.json.gz"
        command = [
            sys.executable,
            "-m",
            "tpusim",
            "compile",
            str(HERE / model),
            *flags,
            "--out",
            str(out),
        ]
        print(" ".join(command[2:]), flush=True)
        subprocess.run(command, check=True, stderr=subprocess.DEVNULL)


if __name__ == "__main__":
    main()
