"""Every option of a pack, declared once: its name, default, help and the kind of value it takes.

The command line builds its flags from these declarations (`cli_params`), `make_plan` and
`packer.pack()` take their defaults from them and check values through them, and their
signatures (what `help()` and `inspect` show) are made from them, so a default, a choice or a
help text is never written twice. Formats (`formats.FormatOption`) and engines (each engine's
`OPTIONS`) declare their own options with the same `Option`.
"""

from __future__ import annotations

import difflib
import inspect
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from .errors import PackError
from .flags import flag

# What a value is, for the command line (how it is read) and for Python (how it is checked):
KINDS = (
    "text",  # a string
    "int",  # an integer within `range`
    "choice",  # one of `choices`
    "switch",  # --name/--no-name, True or False
    "flag",  # --name, off unless given
    "file",  # an existing file
    "folder",  # an existing folder
    "size",  # WIDTHxHEIGHT or one number
    "bytes",  # a byte count with an optional unit (256MB)
    "split",  # name=fraction pairs
)


@dataclass(frozen=True)
class Option:
    """One option: `name` is its Python keyword (`--name-with-dashes` on the command line).

    `shown` is the default as `--help` states it when the value itself says too little (a
    computed default); `cli_default` is the default as typed (`256MB`) when it differs from
    the Python value; `multiple` options are repeated on the command line and a sequence in
    Python; `engine` names the one engine the option belongs to.
    """

    name: str
    default: Any
    help: str
    kind: str = "text"
    choices: tuple[str, ...] = ()
    range: tuple[int | None, int | None] | None = None
    shown: str | None = None
    cli_default: str | None = None
    multiple: bool = False
    engine: str | None = None

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise TypeError(f"option {self.name!r}: unknown kind {self.kind!r}")

    def check(self, value: Any) -> Any:
        """`value` if it is one this option takes (None always is), else a PackError."""
        if value is None or value == self.default:
            return value
        if self.kind == "choice" and value not in self.choices:
            raise PackError(f"{flag(self.name, value)}: choose one of {', '.join(self.choices)}")
        if self.kind == "int" and not self._integer(value):
            low, high = self.range or (None, None)
            span = f"{low}..{high}" if high is not None else f"{low} or more"
            raise PackError(f"{flag(self.name, value)}: expected an integer, {span}")
        if self.kind in ("switch", "flag") and not isinstance(value, bool):
            raise PackError(f"{flag(self.name, value)}: expected True or False")
        return value

    def _integer(self, value: Any) -> bool:
        if not isinstance(value, int) or isinstance(value, bool):
            return False
        low, high = self.range or (None, None)
        return (low is None or value >= low) and (high is None or value <= high)


def defaults(options: Iterable[Option]) -> dict[str, Any]:
    """name -> default of each option."""
    return {o.name: o.default for o in options}


def resolve(declared: Iterable[Option], given: Mapping[str, Any]) -> dict[str, Any]:
    """Every declared option's value: the given one, checked, else its default. Names that
    are not declared are left to the caller (see `refuse_unknown`)."""
    return {o.name: o.check(given[o.name]) if o.name in given else o.default for o in declared}


def refuse_unknown(given: Iterable[str], known: Iterable[str]) -> None:
    """A PackError for the first name not in `known`, with the nearest known name, so a typo
    never passes silently."""
    names = list(known)
    for name in given:
        if name not in names:
            close = difflib.get_close_matches(name, names, n=1)
            hint = f"; did you mean {' or '.join(close)}?" if close else ""
            raise PackError(f"unknown option {name}{hint}")


def with_signature(function: Callable, declared: Iterable[Option]) -> Callable:
    """`function` (which takes the options as **keywords) shown by `help()` and `inspect` with
    each declared option as a keyword of its own, with its default."""
    signature = inspect.signature(function)
    params = [p for p in signature.parameters.values() if p.kind != p.VAR_KEYWORD]
    named = {p.name for p in params}
    params += [
        inspect.Parameter(o.name, inspect.Parameter.KEYWORD_ONLY, default=o.default)
        for o in declared
        if o.name not in named
    ]
    params += [p for p in signature.parameters.values() if p.kind == p.VAR_KEYWORD]
    function.__signature__ = signature.replace(parameters=params)  # type: ignore[attr-defined]
    return function
