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
#: MaxText flags of a tiny model of its default decoder (MaxText ``configs/base.yml``).
MAXTEXT_TINY = [
    "model_name=default",
    "base_num_decoder_layers=2",
    "base_emb_dim=256",
    "base_mlp_dim=512",
    "base_num_query_heads=4",
    "base_num_kv_heads=4",
    "head_dim=64",
    "vocab_size=1024",
    "per_device_batch_size=1",
    "max_target_length=256",
    "dataset_type=synthetic",
]
#: name -> the ``tpusim compile`` arguments after ``compile`` (a model file first, or
#: ``--maxtext``).
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
    # MaxText's own step (needs MaxText: TPUSIM_MAXTEXT_PYTHON=<its python>): a
    # 2-layer, 256-wide model of its default decoder, splash attention and all
    "maxtext-v5e-2x2": ["--maxtext", " ".join(MAXTEXT_TINY), "--topology", "v5e:2x2"],
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


def pallas_fixture(out: Path) -> None:
    """``pallas-v5e``: JAX's own Pallas TPU kernels, a megablox grouped matmul (gmm:
    lhs [512, 256] by 4 groups of [256, 512]) and a causal splash attention forward
    (4 heads, 512 tokens, head dimension 128), compiled for one v5e chip."""
    import jax
    import jax.numpy as jnp
    import numpy as np
    from jax.experimental.pallas.ops.tpu.megablox import gmm
    from jax.experimental.pallas.ops.tpu.splash_attention import splash_attention_kernel as sk
    from jax.experimental.pallas.ops.tpu.splash_attention import splash_attention_mask as sm
    from jax.sharding import Mesh, NamedSharding, PartitionSpec

    from tpusim.compile import driver
    from tpusim.program.hlo.artifact import write_artifact

    mesh = Mesh(
        np.array(
            driver.topologies.get_topology_desc(platform="tpu", topology_name="v5e:2x2").devices[:1]
        ),
        ("data",),
    )
    replicated = NamedSharding(mesh, PartitionSpec())

    def kernels(lhs, rhs, group_sizes, q, k, v):
        mask = sm.MultiHeadMask([sm.CausalMask((512, 512)) for _ in range(4)])
        attention = sk.make_splash_mha(mask, head_shards=1, q_seq_shards=1)
        return gmm(lhs, rhs, group_sizes), attention(q, k, v)

    shapes = [((512, 256), jnp.bfloat16), ((4, 256, 512), jnp.bfloat16), ((4,), jnp.int32)]
    shapes += [((4, 512, 128), jnp.bfloat16)] * 3
    args = [jax.ShapeDtypeStruct(s, t, sharding=replicated) for s, t in shapes]
    compiled = jax.jit(kernels).lower(*args).compile()
    fields = {
        "request": {"kernels": "gmm 512x256 by 4x256x512; causal splash 4x512x128", "layers": 1},
        "topology": "v5e:1x1",
        "mesh": {"axes": ["data"], "shape": [1], "devices": driver.devices_of(mesh)},
        "hlo": compiled.as_text(),
        "cost_analysis": driver.cost_of(compiled),
        "memory_analysis": driver.memory_of(compiled),
        "versions": driver.versions(),
        "compile_time_s": 0.0,
    }
    write_artifact(fields, out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    names = [*FIXTURES, "pallas-v5e"]
    parser.add_argument("--only", nargs="*", choices=sorted(names), help="fixtures to make")
    args = parser.parse_args()
    for name in args.only or names:
        if name == "pallas-v5e":
            pallas_fixture(HERE / f"{name}.json.gz")
            continue
        first, *flags = FIXTURES[name]
        out = HERE / f"{name}.json.gz"
        model = [first] if first.startswith("--") else [str(HERE / first)]
        command = [sys.executable, "-m", "tpusim", "compile", *model, *flags, "--out", str(out)]
        print(" ".join(command[2:]), flush=True)
        subprocess.run(command, check=True, stderr=subprocess.DEVNULL)


if __name__ == "__main__":
    main()
