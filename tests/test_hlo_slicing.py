"""Unfused slices and uninitialised buffers in a TPU-compiled module: the bytes each op
moves, worked out by hand from XLA's ``HloCostAnalysis`` (``HandleSlice``,
``HandleDynamicSlice``, ``HandleDynamicUpdateSlice``: the slice or the update read and
written, operand 0 of an update aliased to the result) and from JAX's ``lax.empty``
(``AllocateBuffer``: a buffer allocated, nothing written)."""

from __future__ import annotations

from tpusim.program.hlo import hlo_to_program, parse_hlo

LAYER_BYTES = 1024 * 1024 * 2  # one bf16 [1, 1024, 1024] layer: 2 MiB
INDEX_BYTES = 4  # one s32 start index

# A layer scan's stack of 80 layers (160 MiB) filled by an unfused dynamic-update-slice
# in place, one layer read back by a dynamic-slice and one by a static slice; the stack
# itself starts as an uninitialised buffer (AllocateBuffer).
STACK = """HloModule stack, is_scheduled=true

ENTRY %main (x: bf16[1,1024,1024], i: s32[]) -> (bf16[80,1024,1024], bf16[1,1024,1024],\
 bf16[1,1024,1024]) {
  %x = bf16[1,1024,1024]{2,1,0} parameter(0)
  %i = s32[] parameter(1)
  %z = s32[] constant(0)
  %empty = bf16[80,1024,1024]{2,1,0} custom-call(), custom_call_target="AllocateBuffer"
  %put = bf16[80,1024,1024]{2,1,0} dynamic-update-slice(%empty, %x, %i, %z, %z)
  %get = bf16[1,1024,1024]{2,1,0} dynamic-slice(%put, %i, %z, %z),\
 dynamic_slice_sizes={1,1024,1024}
  %first = bf16[1,1024,1024]{2,1,0} slice(%put), slice={[0:1], [0:1024], [0:1024]}
  ROOT %out = (bf16[80,1024,1024]{2,1,0}, bf16[1,1024,1024]{2,1,0},\
 bf16[1,1024,1024]{2,1,0}) tuple(%put, %get, %first)
}
"""


def _ops():
    return {op.name: op for op in hlo_to_program(parse_hlo(STACK)).ops}


def test_an_unfused_dynamic_update_slice_moves_its_update_not_the_stack():
    """2 MiB read, 2 MiB written, three 4-byte indices: not the 160 MiB stack twice."""
    assert _ops()["put"].bytes == 2 * LAYER_BYTES + 3 * INDEX_BYTES


def test_an_unfused_slice_moves_the_slice():
    """dynamic-slice: the layer read and written plus its three indices; slice: the
    layer read and written."""
    ops = _ops()
    assert ops["get"].bytes == 2 * LAYER_BYTES + 3 * INDEX_BYTES
    assert ops["first"].bytes == 2 * LAYER_BYTES


def test_an_uninitialised_buffer_moves_nothing():
    """AllocateBuffer writes none of its 160 MiB: no op runs for it."""
    assert "empty" not in _ops()
