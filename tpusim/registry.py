"""One registry class for every family that grows by registration: topology kinds,
collective algorithms, network fidelities, workload kinds and output writers.

Every registry behaves the same way:

- :meth:`Registry.register` adds an entry under a name. Registering the *same* entry
  again under its name does nothing (a module imported twice, a notebook cell run
  twice); another entry under a taken name raises :class:`DuplicateEntryError`.
  Nothing is ever overwritten silently; :meth:`Registry.unregister` removes a name
  first (the test files that add toy entries do).
- :meth:`Registry.get` returns the entry or raises :class:`UnknownEntryError`, whose
  message names the family and the known names (``unknown network fidelity 'fluid'
  (choose from analytic, flow, packet)``). Both errors are :class:`~tpusim.errors.InputError`
  (exit code 2 on the command line) and ``ValueError``.
- Entries carry their properties (an algorithm's cost class, a fidelity's settings,
  a workload kind's record type): a rule about entries asks the entries
  (:meth:`Registry.names` with ``where=``), never a list of names kept elsewhere.
- Names come back in registration order.

The shipped entries are registered explicitly, each family in one list (beside its
registry, or in its package's ``__init__`` when the entries' modules need the
registry themselves); a new entry is a new module and one :meth:`~Registry.register`
call. A family whose entries must also be made known elsewhere (a topology kind's
spec to the system-file schema) gives the registry an ``on_register`` hook.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Generic, TypeVar

from tpusim.errors import InputError

__all__ = ["DuplicateEntryError", "Registry", "RegistryError", "UnknownEntryError"]

E = TypeVar("E")


class RegistryError(InputError, ValueError):
    """A registry refused a name (exit code 2)."""


class DuplicateEntryError(RegistryError):
    """A name is already registered with another entry."""


class UnknownEntryError(RegistryError):
    """No entry has the name asked for; the message lists the known names."""


class Registry(Generic[E]):
    """Entries of one family by name (``what`` names the family in messages, e.g.
    ``"network fidelity"``)."""

    def __init__(self, what: str, on_register: Callable[[str, E], None] | None = None) -> None:
        self.what = what
        self._entries: dict[str, E] = {}
        #: Called with (name, entry) after a new entry is stored (None: nothing to do).
        self.on_register = on_register

    def register(self, name: str, entry: E) -> E:
        """Add ``entry`` under ``name`` and return it. The same entry again is a no-op;
        raises :class:`DuplicateEntryError` if ``name`` holds another entry.

        A new entry is then passed to the registry's ``on_register`` hook; if the hook
        raises, the entry is removed again and the hook's error propagates."""
        known = self._entries.get(name)
        if known is not None and (known is entry or known == entry):
            return known
        if known is not None:
            raise DuplicateEntryError(f"{self.what} '{name}' is already registered")
        self._entries[name] = entry
        if self.on_register is not None:
            try:
                self.on_register(name, entry)
            except BaseException:
                del self._entries[name]
                raise
        return entry

    def register_all(self, entries: Iterable[tuple[str, E]]) -> None:
        """:meth:`register` each (name, entry) pair in order (a family's shipped list)."""
        for name, entry in entries:
            self.register(name, entry)

    def unregister(self, name: str) -> None:
        """Forget ``name`` (a no-op when it is not registered)."""
        self._entries.pop(name, None)

    def get(self, name: str) -> E:
        """The entry of ``name``; raises :class:`UnknownEntryError` naming the known ones."""
        try:
            return self._entries[name]
        except KeyError:
            known = ", ".join(self._entries) or "none"
            raise UnknownEntryError(f"unknown {self.what} '{name}' (choose from {known})") from None

    def names(self, where: Callable[[E], bool] | None = None) -> tuple[str, ...]:
        """Registered names in registration order; with ``where``, only those whose
        entry satisfies it."""
        return tuple(n for n, e in self._entries.items() if where is None or where(e))

    def items(self) -> Iterator[tuple[str, E]]:
        """(name, entry) pairs in registration order."""
        return iter(list(self._entries.items()))

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def __len__(self) -> int:
        return len(self._entries)

    def __repr__(self) -> str:
        return f"Registry({self.what!r}: {', '.join(self._entries)})"
