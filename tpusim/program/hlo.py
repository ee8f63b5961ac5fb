"""Import XLA's compiled HLO text (``jax.jit(f).lower(...).compile().as_text()``) as a program.

:func:`parse_hlo` reads the text into an :class:`HloModule` (computations of
instructions with shapes, operands and attributes); :func:`hlo_to_program` turns the
ENTRY computation into the program IR (:mod:`tpusim.program.ir`); :func:`load_hlo`
does both for a file.

Cost model (per chip, the module is the per-device SPMD program):

- ``dot``: 2 x prod(result dims) x prod(lhs contracting dims);
- ``convolution``: 2 x prod(output dims) x prod(kernel dims) / kernel output features,
  i.e. 2 x output elements x kernel spatial size x input features per group (an
  approximation: padding, dilation and strides are taken as already reflected in
  the output shape);
- elementwise arithmetic (``add``, ``multiply``, ``compare``, ...): 1 FLOP per output
  element; ``reduce`` and ``all-reduce``/``reduce-scatter``: 1 FLOP per input element
  (the reduction). Transcendentals (``exp``, ``tanh``, ...) and data movement cost no
  FLOPs, as in XLA's ``HloCostAnalysis``;
- ``fusion``/``call``/``async-start``: the cost of the called computation, recursively;
  ``conditional``: its first branch (``branch_computations`` or ``true_computation``;
  the program and the collective counts take that branch too);
- ``while``: (body + condition) x trip count, the trip count read from the
  ``backend_config`` ``"known_trip_count":{"n":"10"}`` and 1 when absent.
  ``HloModule.flops(loop_trip_counts=False)`` counts every loop body once, which is what
  XLA's ``compiled.cost_analysis()`` reports.

An opcode this module does not know is costed as an elementwise op by its result
bytes and counted in ``HloModule.unknown_ops``; it never fails the import.

Collectives (``all-reduce``, ``all-gather``, ``reduce-scatter``, ``all-to-all``,
``collective-permute``, their ``-start``/``-done`` pairs and ``async-start`` wrapping
one) are recorded as :class:`HloCollective` with the size in the nccl-tests convention
(all-reduce, all-to-all, collective-permute: operand bytes; all-gather: gathered output
bytes; reduce-scatter: full input bytes; a tuple-shaped collective counts all its
elements), the group size and the explicit device groups. An async pair counts once.
A collective inside a ``while`` body counts once per iteration.

Replica group forms: explicit ``{{0,1},{2,3}}``, iota ``[2,4]<=[8]``, transposed iota
``[4,2]<=[2,4]T(1,0)``, empty ``{}`` (all devices) and the mesh form
``mesh['axis_0'=8,'axis_1'=1] {'axis_0'}`` (devices in iota order over the mesh, one
group per combination of the axes not listed). Anything else is a :class:`ProgramError`
``file:line: ...``.
"""

from __future__ import annotations

import contextlib
import math
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from tpusim.program.ir import Op, Program, ProgramError

COLLECTIVE_KINDS = (
    "all-reduce",
    "all-gather",
    "reduce-scatter",
    "all-to-all",
    "collective-permute",
)
MAX_UNROLL = 256  # while loops with more iterations become one scaled copy of the body


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


DTYPE_BYTES: dict[str, float] = {
    "pred": 1,
    "s2": 0.25,
    "u2": 0.25,
    "s4": 0.5,
    "u4": 0.5,
    "s8": 1,
    "u8": 1,
    "s16": 2,
    "u16": 2,
    "s32": 4,
    "u32": 4,
    "s64": 8,
    "u64": 8,
    "f16": 2,
    "bf16": 2,
    "f32": 4,
    "f64": 8,
    "c64": 8,
    "c128": 16,
    "token": 0,
    "opaque": 0,
}
_DTYPE_RE = re.compile(r"^(f8\w*|f4\w*|f6\w*|[a-z]+\d*)$")

# 1 FLOP per output element (XLA's HloCostAnalysis counts these as flops).
ELEMENTWISE_FLOP_OPS = _words(
    "add subtract multiply divide maximum minimum compare select negate abs remainder "
    "and or xor not clamp sign floor ceil round-nearest-afz round-nearest-even "
    "shift-left shift-right-arithmetic shift-right-logical atan2 is-finite"
)
# Transcendentals: no FLOPs (XLA reports them separately), costed by bytes.
TRANSCENDENTAL_OPS = _words(
    "exponential exponential-minus-one log log-plus-one logistic tanh sqrt rsqrt cbrt power "
    "sine cosine tan erf"
)
# Zero-cost ops: they become no Op, dependencies pass through them.
PASS_THROUGH_OPS = _words(
    "parameter constant get-tuple-element tuple bitcast copy opt-barrier partition-id "
    "replica-id after-all iota copy-start copy-done add-dependency domain"
)
# Data movement and other known ops: no FLOPs, costed by bytes.
MOVEMENT_OPS = _words(
    "broadcast reshape transpose slice dynamic-slice dynamic-update-slice concatenate pad "
    "gather scatter convert bitcast-convert reverse sort select-and-scatter reduce-window "
    "reduce-precision rng rng-bit-generator rng-get-and-update-state custom-call infeed "
    "outfeed send send-done recv recv-done batch-norm-training batch-norm-inference "
    "batch-norm-grad cholesky triangular-solve fft real imag complex map clz popcnt "
    "stochastic-convert top-k set-dimension-size get-dimension-size optimization-barrier "
    "collective-broadcast all-reduce-done all-gather-done collective-permute-done "
    "async-update async-done"
)
CALL_OPS = frozenset({"fusion", "call", "async-start", "custom-call"})
KNOWN_OPS = (
    ELEMENTWISE_FLOP_OPS
    | TRANSCENDENTAL_OPS
    | PASS_THROUGH_OPS
    | MOVEMENT_OPS
    | CALL_OPS
    | {"dot", "convolution", "reduce", "while", "conditional"}
    | set(COLLECTIVE_KINDS)
    | {f"{k}-start" for k in COLLECTIVE_KINDS}
    | {f"{k}-done" for k in COLLECTIVE_KINDS}
)


@dataclass(frozen=True)
class Shape:
    """An array shape ``dtype[dims]`` or a tuple of shapes (``dtype == "tuple"``)."""

    dtype: str
    dims: tuple[int, ...] = ()
    elements: tuple[Shape, ...] = ()

    @property
    def is_tuple(self) -> bool:
        return self.dtype == "tuple"

    @property
    def num_elements(self) -> int:
        return math.prod(self.dims)

    @property
    def bytes(self) -> float:
        if self.is_tuple:
            return sum(e.bytes for e in self.elements)
        return self.num_elements * _dtype_bytes(self.dtype)

    def leaves(self) -> list[Shape]:
        return [x for e in self.elements for x in e.leaves()] if self.is_tuple else [self]


@dataclass
class Instruction:
    name: str
    shape: Shape
    opcode: str
    operands: list[str]
    attrs: dict[str, str]
    line: int
    is_root: bool = False


@dataclass
class Computation:
    name: str
    instructions: dict[str, Instruction]
    is_entry: bool
    line: int

    @property
    def root(self) -> Instruction:
        roots = [i for i in self.instructions.values() if i.is_root]
        return roots[0] if roots else list(self.instructions.values())[-1]


@dataclass(frozen=True)
class HloCollective:
    """One collective instruction (an async pair counts once); ``count`` = executions."""

    name: str
    kind: str
    size_bytes: float
    group_size: int
    groups: tuple[tuple[int, ...], ...]
    is_async: bool
    computation: str
    line: int
    count: int = 1


@dataclass
class HloModule:
    name: str
    file: str
    attrs: dict[str, str]
    computations: dict[str, Computation]
    entry: str
    unknown_ops: Counter = field(default_factory=Counter)
    collective_list: list[HloCollective] = field(default_factory=list)
    collective_groups: dict[str, tuple[tuple[int, ...], ...]] = field(default_factory=dict)

    # ---------------------------------------------------------------- properties
    @property
    def num_devices(self) -> int:
        declared = 1
        for key in ("num_partitions", "replica_count"):
            if key in self.attrs:
                with contextlib.suppress(ValueError):
                    declared *= int(self.attrs[key])
        seen = [d for c in self.collective_list for g in c.groups for d in g]
        return max(declared, max(seen) + 1 if seen else 1)

    @property
    def flops_per_chip(self) -> float:
        return self.flops(loop_trip_counts=True)

    def flops(self, loop_trip_counts: bool = True) -> float:
        """FLOPs per chip of the ENTRY computation (see module doc for the model)."""
        return self._comp_flops(self.entry, loop_trip_counts, {})

    @property
    def collectives(self) -> Counter:
        """Count per kind (executions; an async pair counts once)."""
        out: Counter = Counter()
        for c in self.collective_list:
            out[c.kind] += c.count
        return out

    @property
    def collective_bytes_per_chip(self) -> float:
        return sum(c.size_bytes * c.count for c in self.collective_list)

    # ---------------------------------------------------------------- costs
    def instruction_flops(self, comp: Computation, ins: Instruction, trips: bool = True) -> float:
        op = ins.opcode
        if op == "dot":
            lhs = self._operand_shape(comp, ins, 0)
            contracting = _int_list(ins.attrs.get("lhs_contracting_dims", "{}"))
            k = math.prod(lhs.dims[d] for d in contracting) if lhs else 1
            return 2.0 * ins.shape.num_elements * k
        if op == "convolution":
            kernel = self._operand_shape(comp, ins, 1)
            if kernel is None or not kernel.dims:
                return 2.0 * ins.shape.num_elements
            return 2.0 * ins.shape.num_elements * math.prod(kernel.dims) / _kernel_out(ins, kernel)
        if op in ELEMENTWISE_FLOP_OPS:
            return float(ins.shape.num_elements)
        if op in ("reduce", "all-reduce", "all-reduce-start", "reduce-scatter"):
            return float(sum(self._operand_elements(comp, ins)))
        if op == "while":
            trip = _trip_count(ins) if trips else 1
            body = self._comp_flops(_strip(ins.attrs.get("body", "")), trips, {})
            cond = self._comp_flops(_strip(ins.attrs.get("condition", "")), trips, {})
            return trip * (body + cond)
        if op == "conditional":
            branches = _called(
                ins, ("branch_computations", "true_computation", "false_computation")
            )
            return max((self._comp_flops(b, trips, {}) for b in branches), default=0.0)
        if op in CALL_OPS or op == "call":
            return sum(self._comp_flops(c, trips, {}) for c in _called(ins, ("calls", "to_apply")))
        return 0.0

    def _comp_flops(self, name: str, trips: bool, memo: dict[str, float]) -> float:
        comp = self.computations.get(name)
        if comp is None:
            return 0.0
        return sum(self.instruction_flops(comp, i, trips) for i in comp.instructions.values())

    def _operand_shape(self, comp: Computation, ins: Instruction, index: int) -> Shape | None:
        if index >= len(ins.operands):
            return None
        src = comp.instructions.get(ins.operands[index])
        return src.shape if src else None

    def _operand_elements(self, comp: Computation, ins: Instruction) -> list[int]:
        """Elements of the data operands (reduce: the first half, the rest are inits)."""
        shapes = [comp.instructions[o].shape for o in ins.operands if o in comp.instructions]
        if ins.opcode == "reduce":
            shapes = shapes[: max(1, len(shapes) // 2)]
        return [leaf.num_elements for s in shapes for leaf in s.leaves()]

    def operand_bytes(self, comp: Computation, ins: Instruction) -> float:
        return sum(comp.instructions[o].shape.bytes for o in ins.operands if o in comp.instructions)


# -------------------------------------------------------------------- parsing helpers
def _dtype_bytes(dtype: str) -> float:
    if dtype in DTYPE_BYTES:
        return DTYPE_BYTES[dtype]
    if dtype.startswith(("f8", "f6", "f4")):
        return 1 if dtype.startswith("f8") else 0.5
    return 4


def _strip(name: str) -> str:
    return name.strip().lstrip("%")


def _int_list(text: str) -> list[int]:
    return [int(x) for x in re.findall(r"-?\d+", text)]


def _called(ins: Instruction, keys: tuple[str, ...]) -> list[str]:
    out = []
    for key in keys:
        if key in ins.attrs:
            out += [_strip(x) for x in ins.attrs[key].strip("{}").split(",") if x.strip()]
    return out


def _first_branch(ins: Instruction) -> list[str]:
    """The branch a ``conditional`` is taken to run: its first (or ``true``) computation."""
    return _called(ins, ("branch_computations", "true_computation"))[:1]


def _trip_count(ins: Instruction) -> int:
    m = re.search(
        r'"known_trip_count"\s*:\s*\{\s*"n"\s*:\s*"(\d+)"', ins.attrs.get("backend_config", "")
    )
    return int(m.group(1)) if m else 1


def _kernel_out(ins: Instruction, kernel: Shape) -> int:
    labels = ins.attrs.get("dim_labels", "")
    parts = re.match(r"[^_]*_([^-]*)->", labels)
    if parts and "o" in parts.group(1) and len(parts.group(1)) == len(kernel.dims):
        return kernel.dims[parts.group(1).index("o")]
    return kernel.dims[-1]


def _split_top(text: str, sep: str = ",") -> list[str]:
    """Split ``text`` at ``sep`` outside brackets, braces, parentheses and quotes."""
    parts, depth, cur, quote = [], 0, [], False
    i = 0
    while i < len(text):
        ch = text[i]
        if quote:
            cur.append(ch)
            if ch == "\\" and i + 1 < len(text):
                cur.append(text[i + 1])
                i += 1
            elif ch == '"':
                quote = False
        elif ch == '"':
            quote = True
            cur.append(ch)
        elif ch in "([{":
            depth += 1
            cur.append(ch)
        elif ch in ")]}":
            depth -= 1
            cur.append(ch)
        elif ch == sep and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
        i += 1
    parts.append("".join(cur))
    return parts


def _match_close(text: str, start: int) -> int:
    """Index of the bracket closing the one at ``start`` (-1 when unbalanced)."""
    pairs = {"(": ")", "[": "]", "{": "}"}
    stack, quote = [], False
    for i in range(start, len(text)):
        ch = text[i]
        if quote:
            if ch == '"' and text[i - 1] != "\\":
                quote = False
        elif ch == '"':
            quote = True
        elif ch in pairs:
            stack.append(pairs[ch])
        elif ch in ")]}":
            if not stack or stack.pop() != ch:
                return -1
            if not stack:
                return i
    return -1


_ARRAY_RE = re.compile(r"^([a-z][a-z0-9]*)\[([^\]]*)\](\{[^{}]*\})?$")


def parse_shape(text: str) -> Shape:
    """``f32[128,256]{1,0}``, ``(f32[2], bf16[4,4])``, ``s32[]``, ``token[]``; ValueError if not."""
    text = text.strip()
    if text.startswith("("):
        inner = text[1 : text.rindex(")")]
        elems = tuple(parse_shape(p) for p in _split_top(inner) if p.strip())
        return Shape("tuple", (), elems)
    m = _ARRAY_RE.match(text)
    if not m:
        if re.fullmatch(r"[a-z][a-z0-9]*", text):  # e.g. "token" without brackets
            return Shape(text, ())
        raise ValueError(f"bad shape '{text}'")
    dims = tuple(int(d.replace("<=", "").strip()) for d in m.group(2).split(",") if d.strip())
    return Shape(m.group(1), dims)


def parse_replica_groups(text: str, num_devices: int | None = None) -> list[list[int]]:
    """Device groups of a ``replica_groups=`` value; ValueError naming an unknown form.

    ``{}`` means all devices (needs ``num_devices``; ``[]`` when unknown).
    """
    text = text.strip()
    if re.fullmatch(r"\{\s*\}", text):
        return [list(range(num_devices))] if num_devices else []
    if text.startswith("{"):
        inner = text[1:-1] if text.endswith("}") else None
        groups = re.findall(r"\{([^{}]*)\}", inner or "")
        if inner is None or re.sub(r"\{[^{}]*\}|[\s,]", "", inner):
            raise ValueError(f"unknown replica group syntax '{text}'")
        return [_int_list(g) for g in groups]
    m = re.fullmatch(r"\[([\d,\s]+)\]\s*<=\s*\[([\d,\s]+)\](?:\s*T\(([\d,\s]+)\))?", text)
    if m:
        shape, dims = _int_list(m.group(1)), _int_list(m.group(2))
        ids = np.arange(math.prod(dims)).reshape(dims)
        if m.group(3):
            ids = ids.transpose(_int_list(m.group(3)))
        if math.prod(shape) != ids.size:
            raise ValueError(f"iota replica groups {shape} do not hold {ids.size} devices")
        return ids.reshape(shape[0], -1).tolist() if len(shape) > 1 else [ids.ravel().tolist()]
    m = re.fullmatch(
        r"mesh\[([^\]]*)\]\s*(?:<=\s*\[([\d,\s]+)\](?:\s*T\(([\d,\s]+)\))?)?\s*\{([^}]*)\}", text
    )
    if m:
        axes = re.findall(r"'([^']+)'\s*=\s*(\d+)", m.group(1))
        if not axes:
            raise ValueError(f"unknown replica group syntax '{text}'")
        names = [a for a, _ in axes]
        sizes = [int(s) for _, s in axes]
        ids = np.arange(math.prod(sizes))
        if m.group(2):
            dims = _int_list(m.group(2))
            ids = ids.reshape(dims)
            if m.group(3):
                ids = ids.transpose(_int_list(m.group(3)))
        ids = ids.reshape(sizes)
        chosen = re.findall(r"'([^']+)'", m.group(4))
        if (
            not chosen
            or any(c not in names for c in chosen)
            or re.sub(r"'[^']*'|[\s,]", "", m.group(4))
        ):
            raise ValueError(f"unknown replica group syntax '{text}' (axes {m.group(4)!r})")
        keep = [i for i, n in enumerate(names) if n not in chosen]
        inside = [names.index(c) for c in chosen]
        size = math.prod(sizes[i] for i in inside)
        return ids.transpose(keep + inside).reshape(-1, size).tolist()
    raise ValueError(f"unknown replica group syntax '{text}'")


_HEADER_RE = re.compile(r"^(ENTRY\s+)?%?([\w.\-]+)\s*(\(.*\)\s*->\s*.*)?\{\s*$")
_INSTR_RE = re.compile(r"^(ROOT\s+)?%?([\w.\-]+)\s*=\s*(.*)$")


def _parse_instruction(text: str) -> Instruction:
    text = re.sub(r"/\*index=\d+\*/", "", text)
    m = _INSTR_RE.match(text)
    if not m:
        raise ValueError("not an instruction ('name = shape opcode(operands), attributes')")
    is_root, name, rest = bool(m.group(1)), m.group(2), m.group(3).strip()
    if rest.startswith("("):
        end = _match_close(rest, 0)
        if end < 0:
            raise ValueError("unbalanced tuple shape")
        shape_text, rest = rest[: end + 1], rest[end + 1 :].lstrip()
    else:
        sm = re.match(r"[a-z][a-z0-9]*\[[^\]]*\](\{[^{}]*\})?|[a-z][a-z0-9]*(?=\s)", rest)
        if not sm:
            raise ValueError(f"bad shape in '{rest[:40]}'")
        shape_text, rest = sm.group(0), rest[sm.end() :].lstrip()
    shape = parse_shape(shape_text)
    om = re.match(r"([a-z][\w\-]*)\(", rest)
    if not om:
        raise ValueError(f"expected 'opcode(' after the shape, got '{rest[:40]}'")
    opcode = om.group(1)
    open_at = om.end() - 1
    close = _match_close(rest, open_at)
    if close < 0:
        raise ValueError(f"unbalanced parentheses in the operands of {opcode}")
    operand_text = re.sub(r"/\*.*?\*/", "", rest[open_at + 1 : close])
    operands = []
    if opcode not in ("constant", "parameter"):
        for part in _split_top(operand_text):
            refs = re.findall(r"%([\w.\-]+)", part)
            if refs:
                operands.append(refs[-1])
            elif part.strip() and re.fullmatch(r"[A-Za-z_][\w.\-]*", part.strip().split()[-1]):
                operands.append(part.strip().split()[-1])
    attrs: dict[str, str] = {}
    tail = rest[close + 1 :].strip()
    if tail:
        if not tail.startswith(","):
            raise ValueError(f"unexpected text after the operands: '{tail[:40]}'")
        for part in _split_top(tail[1:]):
            part = part.strip()
            if not part:
                continue
            key, eq, value = part.partition("=")
            if not eq:
                raise ValueError(f"bad attribute '{part[:40]}'")
            attrs[key.strip()] = value.strip()
    return Instruction(name, shape, opcode, operands, attrs, 0, is_root)


def parse_hlo(text: str, file: str = "<hlo>") -> HloModule:
    """Parse HLO module text; :class:`ProgramError` ``file:line: ...`` on bad input."""
    lines = text.splitlines()
    name, attrs = "", {}
    computations: dict[str, Computation] = {}
    current: Computation | None = None
    entry = ""
    for lineno, raw in enumerate(lines, start=1):
        line = raw.strip()
        if not line or line.startswith("//"):
            continue
        if current is None:
            if line.startswith("HloModule"):
                head, _, rest = line.partition(",")
                name = head.split()[1] if len(head.split()) > 1 else ""
                for part in _split_top(rest):
                    key, eq, value = part.strip().partition("=")
                    if eq:
                        attrs[key.strip()] = value.strip()
                continue
            hm = _HEADER_RE.match(line)
            if hm and (hm.group(1) or hm.group(3)):
                current = Computation(hm.group(2), {}, bool(hm.group(1)), lineno)
                if current.is_entry:
                    entry = current.name
                continue
            if not computations and not name:
                raise ProgramError(f"{file}:{lineno}: not HLO text (expected 'HloModule ...')")
            continue  # FileNames / StackFrames sections and the like
        if line == "}":
            if not current.instructions:
                raise ProgramError(f"{file}:{lineno}: computation '{current.name}' is empty")
            computations[current.name] = current
            current = None
            continue
        try:
            ins = _parse_instruction(line)
        except ValueError as exc:
            raise ProgramError(f"{file}:{lineno}: {exc}: {line[:80]}") from None
        ins.line = lineno
        current.instructions[ins.name] = ins
    if current is not None:
        raise ProgramError(
            f"{file}:{len(lines)}: file ends inside computation '{current.name}' "
            f"(opened at line {current.line}): truncated?"
        )
    if not computations:
        raise ProgramError(f"{file}:{max(len(lines), 1)}: no HLO computation found")
    if not entry:
        raise ProgramError(f"{file}:{len(lines)}: no ENTRY computation")
    module = HloModule(name, file, attrs, computations, entry)
    _check_references(module)
    _collect(module)
    return module


def _check_references(module: HloModule) -> None:
    for comp in module.computations.values():
        for ins in comp.instructions.values():
            for op in ins.operands:
                if op not in comp.instructions:
                    raise ProgramError(
                        f"{module.file}:{ins.line}: '{ins.name}' uses unknown operand '{op}'"
                    )
            for callee in _called(ins, ("calls", "to_apply", "body", "condition")):
                if callee not in module.computations:
                    raise ProgramError(
                        f"{module.file}:{ins.line}: '{ins.name}' calls unknown computation "
                        f"'{callee}'"
                    )


# -------------------------------------------------------------------- collectives
def _collective_kind(opcode: str) -> tuple[str, bool] | None:
    """(kind, is_async_start) for a collective opcode; None for others and for -done."""
    if opcode in COLLECTIVE_KINDS:
        return opcode, False
    if opcode.endswith("-start") and opcode[: -len("-start")] in COLLECTIVE_KINDS:
        return opcode[: -len("-start")], True
    return None


def _collective_record(
    module: HloModule, comp: Computation, ins: Instruction, kind: str, is_async: bool, count: int
) -> HloCollective:
    n = module.num_devices
    try:
        if kind == "collective-permute":
            pairs = re.findall(
                r"\{\s*(\d+)\s*,\s*(\d+)\s*\}", ins.attrs.get("source_target_pairs", "")
            )
            groups = [[int(a), int(b)] for a, b in pairs]
            group_size = len({d for g in groups for d in g}) if groups else 1
        else:
            rg = ins.attrs.get("replica_groups", "{}")
            groups = parse_replica_groups(rg, n)
            group_size = len(groups[0]) if groups and groups[0] else n
    except ValueError as exc:
        raise ProgramError(f"{module.file}:{ins.line}: {ins.name}: {exc}") from None
    operand_bytes = module.operand_bytes(comp, ins)
    if kind == "all-gather":
        size = operand_bytes * group_size if is_async else ins.shape.bytes
    else:  # all-reduce, all-to-all, collective-permute: operand; reduce-scatter: full input
        size = operand_bytes
    return HloCollective(
        ins.name,
        kind,
        float(size),
        group_size,
        tuple(tuple(g) for g in groups),
        is_async,
        comp.name,
        ins.line,
        count,
    )


def _collect(module: HloModule) -> None:
    """Walk from ENTRY (through calls, fusions, loops) recording collectives and unknown ops."""
    seen_unknown: set[tuple[str, str]] = set()

    def walk(name: str, count: int, stack: tuple[str, ...]) -> None:
        comp = module.computations.get(name)
        if comp is None or name in stack:
            return
        for ins in comp.instructions.values():
            if ins.opcode not in KNOWN_OPS and (name, ins.name) not in seen_unknown:
                seen_unknown.add((name, ins.name))
                module.unknown_ops[ins.opcode] += 1
            ck = _collective_kind(ins.opcode)
            if ck:
                module.collective_list.append(
                    _collective_record(module, comp, ins, ck[0], ck[1], count)
                )
                continue
            if ins.opcode == "async-start":
                for callee in _called(ins, ("calls",)):
                    inner = module.computations.get(callee)
                    if inner is None:
                        continue
                    for sub in inner.instructions.values():
                        sk = _collective_kind(sub.opcode)
                        if sk:
                            module.collective_list.append(
                                _collective_record(module, inner, sub, sk[0], True, count)
                            )
                continue
            if ins.opcode == "while":
                trip = _trip_count(ins)
                walk(_strip(ins.attrs.get("body", "")), count * trip, (*stack, name))
                walk(_strip(ins.attrs.get("condition", "")), count * trip, (*stack, name))
            elif ins.opcode in ("call", "fusion"):
                for callee in _called(ins, ("calls", "to_apply")):
                    walk(callee, count, (*stack, name))
            elif ins.opcode == "conditional":
                for callee in _first_branch(ins):
                    walk(callee, count, (*stack, name))

    walk(module.entry, 1, ())


# -------------------------------------------------------------------- to the program IR
def _dot_dims(comp: Computation, ins: Instruction) -> tuple[int, int, int, int]:
    """(batch, m, n, k) of a dot with 2*batch*m*n*k == its FLOPs."""
    lhs = comp.instructions[ins.operands[0]].shape.dims if ins.operands else ()
    rhs = (
        comp.instructions[ins.operands[1]].shape.dims
        if len(ins.operands) > 1 and ins.operands[1] in comp.instructions
        else ()
    )
    lc = _int_list(ins.attrs.get("lhs_contracting_dims", "{}"))
    lb = _int_list(ins.attrs.get("lhs_batch_dims", "{}"))
    rc = _int_list(ins.attrs.get("rhs_contracting_dims", "{}"))
    rb = _int_list(ins.attrs.get("rhs_batch_dims", "{}"))
    k = math.prod(lhs[d] for d in lc if d < len(lhs))
    batch = math.prod(lhs[d] for d in lb if d < len(lhs))
    m = math.prod(d for i, d in enumerate(lhs) if i not in lc and i not in lb)
    n = math.prod(d for i, d in enumerate(rhs) if i not in rc and i not in rb)
    if batch * m * n != ins.shape.num_elements:  # odd layouts: keep the FLOPs exact
        batch, m, n = 1, ins.shape.num_elements, 1
    return batch, m, n, k


def _matmul_parts(module: HloModule, comp: Computation, ins: Instruction):
    """(batch, m, n, k, dtype) of each dot/convolution that ``ins`` is or fuses."""
    if ins.opcode == "dot":
        return [(*_dot_dims(comp, ins), ins.shape.dtype)]
    if ins.opcode == "convolution":
        flops = module.instruction_flops(comp, ins)
        kernel = module._operand_shape(comp, ins, 1)
        n = _kernel_out(ins, kernel) if kernel and kernel.dims else 1
        m = max(1, ins.shape.num_elements // max(n, 1))
        k = max(1, round(flops / (2 * m * n)))
        return [(1, m, n, k, ins.shape.dtype)]
    if ins.opcode == "fusion":
        out = []
        for callee in _called(ins, ("calls",)):
            sub = module.computations.get(callee)
            if sub is not None:
                for s in sub.instructions.values():
                    out += _matmul_parts(module, sub, s)
        return out
    return []


def _dtype_name(dtype: str) -> str:
    """The chip dtype (``tpusim.config.chip.Dtype``) an HLO element type runs as."""
    if dtype.startswith("f8"):
        return "fp8"
    if dtype.startswith("f4"):
        return "fp4"
    table = {"bf16": "bf16", "f16": "bf16", "s8": "int8", "u8": "int8", "s4": "int4", "u4": "int4"}
    return table.get(dtype, "fp32")


def hlo_to_program(module: HloModule, name: str | None = None) -> Program:
    """The ENTRY computation as a :class:`Program` (loops unrolled up to ``MAX_UNROLL``).

    Dots, convolutions and fusions with dots become ``matmul`` ops (one per dot),
    collectives ``collective`` ops (``axes=()``; their explicit device groups are kept in
    ``module.collective_groups`` by op name), other costly ops ``elementwise`` ops of
    their operand + result bytes. Parameters, constants, tuples, get-tuple-element,
    bitcast, copy and ``-done`` halves become no op; dependencies pass through them.
    """
    ops: list[Op] = []
    module.collective_groups.clear()
    records = {(c.computation, c.name): c for c in module.collective_list}

    def emit(comp_name: str, prefix: str, param_deps: frozenset[str], scale: int) -> frozenset[str]:
        comp = module.computations[comp_name]
        deps: dict[str, frozenset[str]] = {}
        for ins in comp.instructions.values():
            before = frozenset().union(*(deps.get(o, frozenset()) for o in ins.operands))
            op_name = prefix + ins.name
            opc = ins.opcode
            if opc == "parameter":
                deps[ins.name] = param_deps
                continue
            if opc in PASS_THROUGH_OPS or opc.endswith("-done") or opc == "async-update":
                deps[ins.name] = before
                continue
            if opc == "while":
                trip = _trip_count(ins)
                body = _strip(ins.attrs.get("body", ""))
                cur = before
                if trip <= MAX_UNROLL:
                    for i in range(trip):
                        cur = emit(body, f"{op_name}/{i}/", cur, scale)
                else:
                    cur = emit(body, f"{op_name}/", cur, scale * trip)
                deps[ins.name] = cur
                continue
            if opc in ("call", "conditional"):
                callees = (
                    _first_branch(ins)
                    if opc == "conditional"
                    else _called(ins, ("to_apply", "calls"))
                )
                cur = before
                for callee in callees[:1]:
                    cur = emit(callee, f"{op_name}/", cur, scale)
                deps[ins.name] = cur
                continue
            after = tuple(sorted(before))
            record = None
            ck = _collective_kind(opc)
            if ck:
                record = records.get((comp_name, ins.name))
            elif opc == "async-start":
                for callee in _called(ins, ("calls",)):
                    for c in module.collective_list:
                        if c.computation == callee:
                            record = c
            if record is not None:
                ops.append(
                    Op(
                        op_name,
                        "collective",
                        after=after,
                        collective=record.kind,
                        size_bytes=record.size_bytes * scale,
                        axes=(),
                        overlap=record.is_async,
                    )
                )
                module.collective_groups[op_name] = record.groups
                deps[ins.name] = frozenset({op_name})
                continue
            parts = _matmul_parts(module, comp, ins)
            if parts:
                prev = after
                for j, (b, m, n, k, dt) in enumerate(parts):
                    nm = op_name if len(parts) == 1 else f"{op_name}/dot{j}"
                    ops.append(
                        Op(
                            nm,
                            "matmul",
                            after=prev,
                            m=m,
                            n=n,
                            k=k,
                            batch=b * scale,
                            dtype=_dtype_name(dt),
                        )
                    )
                    prev = (nm,)
                deps[ins.name] = frozenset(prev)
                continue
            if opc in KNOWN_OPS:
                nbytes = ins.shape.bytes + module.operand_bytes(comp, ins)
            else:
                nbytes = ins.shape.bytes
            if nbytes <= 0:
                deps[ins.name] = before
                continue
            ops.append(Op(op_name, "elementwise", after=after, bytes=float(nbytes) * scale))
            deps[ins.name] = frozenset({op_name})
        return deps.get(comp.root.name, frozenset())

    emit(module.entry, "", frozenset(), 1)
    return Program(name or module.name or "hlo", tuple(ops))


def load_hlo(path: str | Path) -> tuple[HloModule, Program]:
    """Read an HLO text file; :class:`ProgramError` if it cannot be read or parsed."""
    path = Path(path)
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise ProgramError(f"{path}: cannot read HLO file: {exc}") from None
    module = parse_hlo(text, str(path))
    return module, hlo_to_program(module, path.name.split(".")[0])


def replay_program(
    module: HloModule, program: Program, num_chips: int, device_chips: list[int] | None = None
) -> Program:
    """The program with every collective's chip groups attached, ready for the engine.

    Device ``d`` of the module runs on chip ``d`` of the system (the order
    ``jax.devices()`` lists TPU chips in, x fastest), or on ``device_chips[d]``.
    A collective over all devices (``replica_groups={}``) gets one group of every
    device; a collective-permute's source-target pairs become groups of two chips
    exchanging data (each pair costed as a two-way exchange, an upper bound).
    Raises ProgramError, naming the file, when the module needs more devices than
    the system has chips or the device order is not a list of distinct chips.
    """
    import dataclasses

    devices = module.num_devices
    if devices > num_chips:
        raise ProgramError(
            f"{module.file}:1: the module runs on {devices} devices but the "
            f"system has {num_chips} chips"
        )
    chips = list(range(devices)) if device_chips is None else list(device_chips)
    if (
        len(chips) != devices
        or len(set(chips)) != devices
        or not all(0 <= c < num_chips for c in chips)
    ):
        raise ProgramError(
            f"{module.file}:1: the device order must list {devices} distinct chips "
            f"in 0..{num_chips - 1}"
        )
    everyone = (tuple(range(devices)),)

    def on_chips(groups: tuple[tuple[int, ...], ...]) -> tuple[tuple[int, ...], ...]:
        return tuple(tuple(chips[d] for d in group) for group in groups)

    ops = tuple(
        dataclasses.replace(op, groups=on_chips(module.collective_groups.get(op.name) or everyone))
        if op.kind == "collective"
        else op
        for op in program.ops
    )
    return dataclasses.replace(program, ops=ops)


__all__ = [
    "COLLECTIVE_KINDS",
    "HloCollective",
    "HloModule",
    "Shape",
    "hlo_to_program",
    "load_hlo",
    "parse_hlo",
    "parse_replica_groups",
    "parse_shape",
    "replay_program",
]
