"""A key of a spec table, and the ``[measure]`` keys one backend owns.

The types the schema's tables are made of (``perfab.specfile.schema``) and
that each backend's declaration uses for its own keys
(``perfab.specfile.backends``): below both, so neither imports the other
to name a key.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from perfab.specfile.kinds import Kind


class _Required:
    """The default of a key that must be given."""

    def __repr__(self) -> str:
        return "required"


REQUIRED = _Required()


@dataclass(frozen=True)
class Key:
    """One key of a spec table."""

    name: str  # the key as written in TOML
    value: Kind  # how its value is checked and typed
    default: Any  # the typed value that applies when it is absent; REQUIRED for required keys
    doc: str | Callable[[], str]  # what it means, one or two sentences (a function: words asked of the backends)
    shown: str | None = None  # the README's default when the typed one is resolved later (e.g. "the host's")
    field: str | None = None  # the dataclass field it fills; None: the key's name

    @property
    def kind(self) -> str:
        """Its TOML type, in words."""
        return self.value.words

    @property
    def attr(self) -> str:
        """The dataclass field it fills."""
        return self.field or self.name

    def text(self) -> str:
        """What it means, in the README's words."""
        return self.doc() if callable(self.doc) else self.doc

    def default_text(self) -> str:
        """The README's default column."""
        return self.shown if self.shown is not None else render(self.default)


def render(value: Any) -> str:
    """A typed default as the README shows it."""
    if value is None:
        return "none"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, str):
        return f'"{value}"'
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, (tuple, list)):
        return "[]" if not value else repr(list(value))
    if isinstance(value, dict):
        return "{}" if not value else repr(value)
    return str(value)


@dataclass(frozen=True)
class BackendKeys:
    """The ``[measure]`` keys one backend reads; any other backend refuses them."""

    keys: tuple[Key, ...] = ()  # the keys, in README order
    fix: str = ""  # added to the fix when another backend meets one, e.g. " (with [variant.kernel] sides)"
    borrows: tuple[str, ...] = ()  # another backend's keys this one also reads when ``borrows_when`` is true
    borrows_when: str = ""  # the boolean key of this backend that makes it read ``borrows``
    shares: tuple[str, ...] = ()  # another backend's keys this one also reads, always (e.g. branch_sim)
