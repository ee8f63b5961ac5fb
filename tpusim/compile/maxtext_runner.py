"""Run in MaxText's own Python (not imported by tpusim): MaxText's ``train_compile``
with its arguments verbatim, capturing the compiled step it makes, written as the
fields of a tpusim artifact (gzip JSON) to the first argument.

    python maxtext_runner.py OUT.json.gz BASE.yml compile_topology=v5e-16 key=value ...

``train_compile.jit_and_compile`` is wrapped to keep the compiled object and the mesh
(so the device order is MaxText's own); nothing else of MaxText changes.
"""

from __future__ import annotations

import gzip
import json
import sys
import time
from importlib.metadata import PackageNotFoundError, version


def _versions() -> dict[str, str]:
    out = {}
    for name in ("maxtext", "jax", "jaxlib", "libtpu"):
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            out[name] = ""
    return out


def main() -> None:
    out, *argv = sys.argv[1:]
    from maxtext.trainers.pre_train import train_compile

    captured = {}
    original = train_compile.jit_and_compile

    def capture(func, args, kwargs, mesh, *rest):  # type: ignore[no-untyped-def]
        compiled = original(func, args, kwargs, mesh, *rest)
        captured["compiled"], captured["mesh"] = compiled, mesh
        return compiled

    train_compile.jit_and_compile = capture
    start = time.perf_counter()
    train_compile.main(["train_compile", *argv])
    compiled, mesh = captured["compiled"], captured["mesh"]
    cost = compiled.cost_analysis()
    cost = cost[0] if isinstance(cost, list) else cost
    stats = compiled.memory_analysis()
    fields = {
        "mesh": {
            "axes": list(mesh.axis_names),
            "shape": [int(mesh.shape[a]) for a in mesh.axis_names],
            "devices": [[d.id, *list(d.coords), d.core_on_chip] for d in mesh.devices.flat],
        },
        "hlo": compiled.as_text(),
        "cost_analysis": {k: float(v) for k, v in sorted(cost.items()) if "{" not in k},
        "memory_analysis": {
            n: float(getattr(stats, n)) for n in sorted(dir(stats)) if n.endswith("_in_bytes")
        },
        "versions": _versions(),
        "compile_time_s": time.perf_counter() - start,
    }
    with gzip.open(out, "wt") as f:
        json.dump(fields, f)


if __name__ == "__main__":
    main()
