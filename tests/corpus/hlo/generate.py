"""Generators of the large members of the HLO corpus (written at test time, never committed).

``cases.yaml`` names one in a case's ``generate:`` field as a Python call on the
functions below (``deep_tuple(3000)``); the text it returns is written to
``{tmp}/generated.hlo.txt`` before the case runs.
"""

from __future__ import annotations

_HEAD = "HloModule generated, num_partitions=1\n\n"


def deep_tuple(depth: int) -> str:
    """An ENTRY parameter whose shape is a tuple nested ``depth`` deep."""
    shape = "(" * depth + "f32[8]" + ")" * depth
    return (
        f"{_HEAD}ENTRY %main (p: f32[8]) -> f32[8] {{\n"
        f"  %t = {shape} parameter(0)\n"
        "  ROOT %n = f32[8]{0} constant({...})\n}\n"
    )


def _computation(name: str, body: list[str], entry: bool = False) -> str:
    head = "ENTRY " if entry else ""
    lines = "\n".join(f"  {line}" for line in body)
    return f"{head}%{name} (a: f32[8]) -> f32[8] {{\n  %a = f32[8]{{0}} parameter(0)\n{lines}\n}}\n"


def call_chain(depth: int, calls_per_level: int = 1) -> str:
    """Computations ``c0`` .. ``c<depth>``, each calling the next ``calls_per_level`` times
    (2 calls per level: a walk of 2**depth instruction runs)."""
    parts = [_computation(f"c{depth}", ["ROOT %n = f32[8]{0} negate(%a)"])]
    for level in reversed(range(depth)):
        body = [
            f"%k{j} = f32[8]{{0}} call(%a), to_apply=%c{level + 1}" for j in range(calls_per_level)
        ]
        body.append("ROOT %r = f32[8]{0} negate(%a)")
        parts.append(_computation(f"c{level}", body))
    parts.append(_computation("main", ["ROOT %m = f32[8]{0} call(%a), to_apply=%c0"], True))
    return _HEAD + "\n".join(parts)


def nested_loops(levels: int, trips: int) -> str:
    """``levels`` while loops nested in each other, each of ``trips`` known iterations
    (short enough to be unrolled: ``trips**levels`` copies of the innermost body)."""
    config = f'backend_config={{"known_trip_count":{{"n":"{trips}"}}}}'
    cond = (
        "%cond (c: f32[8]) -> pred[] {\n  %c = f32[8]{0} parameter(0)\n"
        "  ROOT %t = pred[] constant(true)\n}\n"
    )
    parts = [cond, _computation(f"l{levels}", ["ROOT %n = f32[8]{0} negate(%a)"])]
    for level in reversed(range(levels)):
        loop = f"ROOT %w = f32[8]{{0}} while(%a), condition=%cond, body=%l{level + 1}, {config}"
        parts.append(_computation(f"l{level}", [loop]))
    parts.append(_computation("main", ["ROOT %m = f32[8]{0} call(%a), to_apply=%l0"], True))
    return _HEAD + "\n".join(parts)


def long_line(num_operands: int) -> str:
    """One ``tuple`` instruction with ``num_operands`` operands on a single line."""
    operands = ", ".join(["%a"] * num_operands)
    shape = "(" + ", ".join(["f32[8]"] * num_operands) + ")"
    body = [f"%t = {shape} tuple({operands})", "ROOT %n = f32[8]{0} negate(%a)"]
    return _HEAD + _computation("main", body, True)


def arrows_line(count: int) -> str:
    """A valid module after a line of ``count`` ``)->`` outside any computation (a
    regex with two ``.*`` around ``->`` once took quadratic time on it)."""
    body = ["ROOT %n = f32[8]{0} negate(%a)"]
    return _HEAD + "%a (" + ")->" * count + "\n\n" + _computation("main", body, True)


def spaced_mesh(spaces: int) -> str:
    """An all-reduce whose mesh replica groups hold ``spaces`` blanks before the axes."""
    groups = "mesh['a'=4]" + " " * spaces + "{'a'}"
    head = _HEAD.replace("num_partitions=1", "num_partitions=4")
    add = (
        "%add (x: f32[], y: f32[]) -> f32[] {\n  %x = f32[] parameter(0)\n"
        "  %y = f32[] parameter(1)\n  ROOT %s = f32[] add(%x, %y)\n}\n\n"
    )
    body = [f"ROOT %r = f32[8]{{0}} all-reduce(%a), replica_groups={groups}, to_apply=%add"]
    return head + add + _computation("main", body, True)
