"""HLO module text -> computations of instructions (shapes, operands, attributes).

The grammar read is what ``compiled.as_text()`` prints: an ``HloModule name, k=v, ...``
header, computations ``[ENTRY] %name (params) -> shape {`` ... ``}`` of one instruction
per line (``[ROOT] %name = shape opcode(operands), attr=value, ...``), and sections such
as ``FileNames`` that are skipped. Errors are :class:`ProgramError` ``file:line: ...``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

from tpusim.program.hlo.shapes import Shape, parse_shape
from tpusim.program.hlo.syntax import match_close, open_brackets, split_top
from tpusim.program.ir import ProgramError

#: ``[ENTRY] %name (params) -> shape {``; one ``.*`` only, so a long line is one scan
#: (``(...)\s*->`` is checked after, see :func:`_outside`).
_HEADER_RE = re.compile(r"^(ENTRY\s+)?%?([\w.\-]+)\s*(\(.*)?\{\s*$")
_ARROW_RE = re.compile(r"\)\s*->")
_INSTR_RE = re.compile(r"^(ROOT\s+)?%?([\w.\-]+)\s*=\s*(.*)$")
_STRAY_RE = re.compile(r"^(ROOT\s+%?|%)[\w.\-]+\s*=|^\}$")
#: XLA's memory space of host memory in a layout (``{1,0:T(8,128)S(5)}``; published,
#: XLA ``Layout::kHostMemorySpace = 5``): a ``copy-start`` to or from it is a
#: host-offload copy.
HOST_MEMORY_SPACE = "S(5)"
#: A line that starts an instruction or ends a computation: never a continuation.
_NEXT_RE = re.compile(r"^(ROOT\s+)?%?[\w.\-]+\s*=\s*\S|^\}(,|$)")
_SHAPE_RE = re.compile(r"[a-z][a-z0-9]*\[[^\]]*\](\{[^{}]*\})?|[a-z][a-z0-9]*(?=\s)")


@dataclass
class Instruction:
    """One line ``name = shape opcode(operands), attrs`` (``line``: 1-based in the file)."""

    name: str
    shape: Shape
    opcode: str
    operands: list[str]
    attrs: dict[str, str]
    line: int
    is_root: bool = False
    #: A ``constant``'s literal text (``4``, ``{0, 128}``); '' for other ops.
    literal: str = ""
    #: A ``while``'s trip count found from its induction variable when its
    #: ``backend_config`` has none (:mod:`.loops`); None when not found.
    inferred_trips: int | None = None
    #: Whether its result shape puts an array in host memory (layout ``S(5)``).
    host_memory: bool = False


@dataclass
class Computation:
    """A named computation: its instructions in text order (``line``: its header)."""

    name: str
    instructions: dict[str, Instruction]
    is_entry: bool
    line: int
    #: ``execution_thread`` after its closing brace (``sparsecore``); '' for the main one.
    execution_thread: str = ""

    @property
    def root(self) -> Instruction:
        """The ``ROOT`` instruction, else the last one."""
        roots = [i for i in self.instructions.values() if i.is_root]
        return roots[0] if roots else list(self.instructions.values())[-1]


@dataclass
class ParsedText:
    """What the text holds: module name and attributes, computations, the ENTRY's name."""

    name: str
    attrs: dict[str, str]
    computations: dict[str, Computation]
    entry: str
    line: int = 1  # of the ``HloModule`` header


def parse_text(text: str, file: str) -> ParsedText:
    """Read HLO module text; :class:`ProgramError` ``file:line: ...`` on bad input."""
    lines = text.splitlines()
    parsed = ParsedText("", {}, {}, "")
    current: Computation | None = None
    for lineno, line in _logical_lines(lines):
        if not line or line.startswith("//"):
            continue
        if current is None:
            current = _outside(parsed, line, file, lineno)
        elif line == "}" or line.startswith("},"):
            _close(parsed, current, file, lineno, line)
            current = None
        else:
            _add_instruction(current, line, file, lineno)
    _check_complete(parsed, current, file, len(lines))
    return parsed


#: Most physical lines one instruction may span (assumption: XLA breaks a line only
#: inside a quoted attribute that holds newlines, a kernel's metadata, a few lines).
MAX_CONTINUATION_LINES = 64


def _logical_lines(lines: list[str]) -> Iterator[tuple[int, str]]:
    """(first line number, stripped text) of each instruction or header: a line whose
    brackets do not close (an attribute value holding newlines, as a Pallas kernel's
    ``frontend_attributes`` may) is joined with the lines that close them."""
    i = 0
    while i < len(lines):
        start, text = i + 1, lines[i].strip()
        i += 1
        if not _INSTR_RE.match(text):  # a computation header or brace: one line
            yield start, text
            continue
        depth = open_brackets(text)
        while depth > 0 and i < len(lines) and i - start < MAX_CONTINUATION_LINES:
            if _NEXT_RE.match(lines[i].strip()):  # unbalanced after all: its own error
                break
            text += " " + lines[i].strip()
            depth = open_brackets(text)
            i += 1
        yield start, text


def _outside(parsed: ParsedText, line: str, file: str, lineno: int) -> Computation | None:
    """A line between computations: the module header, a computation header or skipped."""
    if line.startswith("HloModule"):
        head, _, rest = line.partition(",")
        parsed.name = head.split()[1] if len(head.split()) > 1 else ""
        parsed.line = lineno
        for part in split_top(rest):
            key, eq, value = part.strip().partition("=")
            if eq:
                parsed.attrs[key.strip()] = value.strip()
        return None
    hm = _HEADER_RE.match(line)
    if hm and (hm.group(1) or (hm.group(3) and _ARROW_RE.search(hm.group(3)))):
        computation = Computation(hm.group(2), {}, bool(hm.group(1)), lineno)
        if computation.name in parsed.computations:
            first = parsed.computations[computation.name].line
            raise ProgramError(
                f"{file}:{lineno}: computation '{computation.name}' is defined twice "
                f"(first at line {first})"
            )
        if computation.is_entry:
            if parsed.entry:
                raise ProgramError(
                    f"{file}:{lineno}: a second ENTRY computation ('{parsed.entry}' is one)"
                )
            parsed.entry = computation.name
        return computation
    if not parsed.computations and not parsed.name:
        raise ProgramError(f"{file}:{lineno}: not HLO text (expected 'HloModule ...')")
    if _STRAY_RE.match(line):
        what = "'}'" if line == "}" else "instruction"
        raise ProgramError(f"{file}:{lineno}: {what} outside any computation: {line[:80]}")
    return None  # FileNames / StackFrames sections and the like


def _close(parsed: ParsedText, current: Computation, file: str, lineno: int, line: str) -> None:
    """End ``current`` at ``}`` or ``}, execution_thread="sparsecore"``."""
    if not current.instructions:
        raise ProgramError(f"{file}:{lineno}: computation '{current.name}' is empty")
    if line != "}":
        try:
            attrs = _attributes(line[1:].strip())
        except ValueError as exc:
            raise ProgramError(f"{file}:{lineno}: {exc}: {line[:80]}") from None
        current.execution_thread = attrs.get("execution_thread", "").strip('"')
    parsed.computations[current.name] = current


def _add_instruction(current: Computation, line: str, file: str, lineno: int) -> None:
    try:
        ins = parse_instruction(line)
    except ValueError as exc:
        raise ProgramError(f"{file}:{lineno}: {exc}: {line[:80]}") from None
    ins.line = lineno
    if ins.name in current.instructions:
        first = current.instructions[ins.name].line
        raise ProgramError(
            f"{file}:{lineno}: '{ins.name}' is defined twice in '{current.name}' "
            f"(first at line {first})"
        )
    current.instructions[ins.name] = ins


def _check_complete(
    parsed: ParsedText, current: Computation | None, file: str, num_lines: int
) -> None:
    if current is not None:
        raise ProgramError(
            f"{file}:{num_lines}: file ends inside computation '{current.name}' "
            f"(opened at line {current.line}): truncated?"
        )
    if not parsed.computations:
        raise ProgramError(f"{file}:{max(num_lines, 1)}: no HLO computation found")
    if not parsed.entry:
        raise ProgramError(f"{file}:{num_lines}: no ENTRY computation")


def parse_instruction(text: str) -> Instruction:
    """One instruction line (``line`` left 0); ValueError saying what is malformed."""
    text = re.sub(r"/\*index=\d+\*/", "", text)
    m = _INSTR_RE.match(text)
    if not m:
        raise ValueError("not an instruction ('name = shape opcode(operands), attributes')")
    is_root, name, rest = bool(m.group(1)), m.group(2), m.group(3).strip()
    before = rest
    shape, rest = _split_shape(rest)
    host = HOST_MEMORY_SPACE in before[: len(before) - len(rest)]
    om = re.match(r"([a-z][\w\-]*)\(", rest)
    if not om:
        raise ValueError(f"expected 'opcode(' after the shape, got '{rest[:40]}'")
    opcode = om.group(1)
    open_at = om.end() - 1
    close = match_close(rest, open_at)
    if close < 0:
        raise ValueError(f"unbalanced parentheses in the operands of {opcode}")
    operand_text = re.sub(r"/\*.*?\*/", "", rest[open_at + 1 : close])
    operands = [] if opcode in ("constant", "parameter") else _operands(operand_text)
    attrs = _attributes(rest[close + 1 :].strip())
    literal = operand_text.strip() if opcode == "constant" else ""
    return Instruction(name, shape, opcode, operands, attrs, 0, is_root, literal, None, host)


def _split_shape(rest: str) -> tuple[Shape, str]:
    """The result shape at the start of ``rest`` and the text after it."""
    if rest.startswith("("):
        end = match_close(rest, 0)
        if end < 0:
            raise ValueError("unbalanced tuple shape")
        return parse_shape(rest[: end + 1]), rest[end + 1 :].lstrip()
    sm = _SHAPE_RE.match(rest)
    if not sm:
        raise ValueError(f"bad shape in '{rest[:40]}'")
    return parse_shape(sm.group(0)), rest[sm.end() :].lstrip()


def _operands(operand_text: str) -> list[str]:
    """Names of the operands (``%x``, or a bare name; literals are dropped)."""
    operands = []
    for part in split_top(operand_text):
        refs = re.findall(r"%([\w.\-]+)", part)
        if refs:
            operands.append(refs[-1])
        elif part.strip() and re.fullmatch(r"[A-Za-z_][\w.\-]*", part.strip().split()[-1]):
            operands.append(part.strip().split()[-1])
    return operands


def _attributes(tail: str) -> dict[str, str]:
    """``, key=value, ...`` after the operands -> {key: value}."""
    attrs: dict[str, str] = {}
    if not tail:
        return attrs
    if not tail.startswith(","):
        raise ValueError(f"unexpected text after the operands: '{tail[:40]}'")
    for part in split_top(tail[1:]):
        part = part.strip()
        if not part:
            continue
        key, eq, value = part.partition("=")
        if not eq:
            raise ValueError(f"bad attribute '{part[:40]}'")
        attrs[key.strip()] = value.strip()
    return attrs
