"""The words of a command line as vLLM's own parsers read them, shared by the readers
of a server line (:mod:`tpusim.serving.vllm_serve_line`) and of a benchmark line
(:mod:`tpusim.serving.vllm_bench_line`): split with :mod:`shlex`, the ``NAME=value``
words before the command taken as its environment, ``--flag value``, ``--flag=value``
and switches read, a flag's underscores as dashes (vLLM's FlexibleArgumentParser)."""

from __future__ import annotations

import itertools
import math
import re
import shlex
from collections.abc import Callable, Mapping

#: A flag's reader: its value text (None for a switch) to the fields it sets.
Reader = Callable[[str | None], dict[str, object]]


def whole(flag: str, text: str | None) -> int:
    if text is None or not text.strip().isdigit() or int(text) < 1:
        raise ValueError(f"{flag}: expected a whole number >= 1, got {text!r}")
    return int(text)


def real(flag: str, text: str | None) -> float:
    try:
        value = float(text or "")
    except ValueError:
        raise ValueError(f"{flag}: expected a number, got {text!r}") from None
    if math.isnan(value) or value < 0:
        raise ValueError(f"{flag}: expected a number >= 0, got {text!r}")
    return value


def field_reader(field: str, flag: str) -> Reader:
    return lambda text: {field: whole(flag, text)}


#: Switches (flags that take no value) among the flags read.
SWITCHES = {
    "--async-scheduling",
    "--no-async-scheduling",
    "--enable-prefix-caching",
    "--no-enable-prefix-caching",
    "--ignore-eos",
    "--enable-expert-parallel",
    "--no-enable-expert-parallel",
    "--trust-remote-code",
    "--disable-log-requests",
    "--save-result",
    "--disable-tqdm",
}


#: A leading ``NAME=value`` word of a shell line: the command's environment.
_ENVIRONMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")


def split_line(line: str) -> tuple[list[str], list[str]]:
    """The environment assignments leading ``line`` (``NAME=value`` words, as a shell
    reads them) and its other words."""
    try:
        words = shlex.split(line)
    except ValueError as exc:
        raise ValueError(f"cannot split {line!r}: {exc}") from None
    env = list(itertools.takewhile(_ENVIRONMENT.match, words))
    return env, words[len(env) :]


def command_words(line: str, heads: tuple[tuple[str, ...], ...]) -> tuple[list[str], list[str]]:
    """The environment assignments of ``line`` and its words after its command, one of
    ``heads`` (``vllm serve``)."""
    env, words = split_line(line)
    for head in heads:
        if tuple(words[: len(head)]) == head:
            return env, words[len(head) :]
    starts = " or ".join(repr(" ".join(head)) for head in heads)
    raise ValueError(f"expected a line starting {starts}, got {line!r}")


def flag_pairs(words: list[str]) -> tuple[list[str], list[tuple[str, str | None]]]:
    """The positional words and the (flag, value) pairs of ``words``: ``--f=v``,
    ``--f v`` (the next word when it is not a flag) or a switch of :data:`SWITCHES`."""
    positional: list[str] = []
    pairs: list[tuple[str, str | None]] = []
    i = 0
    while i < len(words):
        word = dashed(words[i])
        if not word.startswith("-"):
            positional.append(word)
        elif "=" in word:
            pairs.append(tuple(word.split("=", 1)))  # type: ignore[arg-type]
        elif word in SWITCHES or i + 1 == len(words) or words[i + 1].startswith("--"):
            pairs.append((word, None))
        else:
            pairs.append((word, words[i + 1]))
            i += 1
        i += 1
    return positional, pairs


def dashed(word: str) -> str:
    """``--a_b=v`` as ``--a-b=v``: vLLM's parser takes a flag's underscores as dashes
    (FlexibleArgumentParser); other words unchanged."""
    if not word.startswith("--"):
        return word
    flag, eq, value = word.partition("=")
    return flag.replace("_", "-") + eq + value


def read_flags(
    pairs: list[tuple[str, str | None]], table: Mapping[str, Reader]
) -> tuple[dict[str, object], list[str]]:
    """The fields the modelled flags set and the names of the others."""
    values: dict[str, object] = {}
    unmodelled = []
    for flag, text in pairs:
        if flag not in table:
            unmodelled.append(flag)
            continue
        values |= table[flag](text)
    return values, unmodelled


def read_command(
    words: list[str], table: Mapping[str, Reader]
) -> tuple[list[str], list[str], dict[str, object], list[str]]:
    """A command's ``words`` read by ``table``: its positional words, the models its
    ``--model`` flags name, the fields the modelled flags set and the other flags."""
    positional, pairs = flag_pairs(words)
    models = [text for flag, text in pairs if flag == "--model" and text]
    values, unmodelled = read_flags([p for p in pairs if p[0] != "--model"], table)
    return positional, models, values, unmodelled
