"""The option model: every option is a field of a frozen dataclass, one dataclass per stage.

A field's name is the option's Python keyword (`--name-with-dashes` on the command line), its
type and default the option's, and its metadata (`option(...)`) an `Option`: the help text and
how the command line spells and reads it (kind, choices, range, the default as typed or as
words). The pack's stages (`packing.options.PlanOptions`, `RunOptions`), the engines and the
readers (`reading.options`) declare theirs so. From a dataclass come its `Option`s (`declared`,
which `cli.params.declared_options` turns into click options), its checked, typed value from
what a caller gave (`Options.resolve`: the same one-line errors from Python and the command
line) or from a reader's arguments (`Options.of`), and the lines its reader's docstring lists
(`Options.describe`).
"""

from __future__ import annotations

import dataclasses
import difflib
import inspect
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar

from .errors import PackError
from .flags import flag, on_command_line

# What a value is, for the command line (how it is read) and for Python (how it is checked):
KINDS = (
    "text",  # a string
    "int",  # an integer within `range`
    "number",  # a real number (an int or a float) within `range`
    "choice",  # one of `choices`
    "switch",  # --name/--no-name, True or False
    "flag",  # --name, off unless given
    "file",  # an existing file
    "folder",  # an existing folder
    "size",  # WIDTHxHEIGHT or one number
    "bytes",  # a byte count with an optional unit (256MB)
    "split",  # name=fraction pairs
)


T = TypeVar("T")


class OptionError(PackError, ValueError):
    """A value an option does not take: a PackError for the pack, a ValueError for a reader."""


def _listed(choices: tuple) -> str:
    """Choices as the caller writes them: bare words on the command line, Python's values
    (`'global'`, `True`) from Python."""
    return ", ".join(c if on_command_line() and isinstance(c, str) else repr(c) for c in choices)


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
    choices: tuple[Any, ...] = ()
    range: tuple[int | None, int | None] | None = None
    shown: str | None = None
    cli_default: str | None = None
    multiple: bool = False
    engine: str | None = None

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise TypeError(f"option {self.name!r}: unknown kind {self.kind!r}")
        if self.kind == "choice" and (
            not self.choices or self.default not in (None, *self.choices)
        ):
            raise TypeError(f"option {self.name!r}: a choice's default is one of its choices")
        if self.kind == "int" and self.default is not None and not self._integer(self.default):
            raise TypeError(f"option {self.name!r}: an int's default is an integer in its range")
        if self.kind == "number" and self.default is not None and not self._number(self.default):
            raise TypeError(f"option {self.name!r}: a number's default is a number in its range")
        if self.kind in ("switch", "flag") and not isinstance(self.default, bool | None):
            raise TypeError(f"option {self.name!r}: a switch's default is True or False")

    def check(self, value: Any) -> Any:
        """`value` if it is one this option takes (None always is), else an OptionError."""
        if value is None:
            return value
        if self.kind == "choice" and value not in self.choices:
            raise OptionError(f"{flag(self.name, value)}: choose one of {_listed(self.choices)}")
        if self.kind == "int" and not self._integer(value):
            low, high = self.range or (None, None)
            span = f"{low}..{high}" if high is not None else f"{low} or more"
            raise OptionError(f"{flag(self.name, value)}: expected an integer, {span}")
        if self.kind == "number" and not self._number(value):
            low, high = self.range or (None, None)
            span = f"{low}..{high}" if high is not None else f"{low} or more"
            raise OptionError(f"{flag(self.name, value)}: expected a number, {span}")
        if self.kind in ("switch", "flag") and not isinstance(value, bool):
            raise OptionError(f"{flag(self.name, value)}: expected True or False")
        return value

    def _integer(self, value: Any) -> bool:
        if not isinstance(value, int) or isinstance(value, bool):
            return False
        return self._within(value)

    def _number(self, value: Any) -> bool:
        if not isinstance(value, int | float) or isinstance(value, bool):
            return False
        return value == value and self._within(value)  # NaN is no number of a range

    def _within(self, value: float) -> bool:
        low, high = self.range or (None, None)
        return (low is None or value >= low) and (high is None or value <= high)


def option(default: Any, help: str, **spelling: Any) -> Any:
    """A dataclass field for one option: its default, its help in a sentence or two, and how
    the command line spells it (`kind`, `choices`, `range`, `shown`, `cli_default`,
    `multiple`, `engine`: see `Option`)."""
    return field(default=default, metadata={"option": Option("", default, help, **spelling)})


def again(
    base: type,
    name: str,
    default: Any,
    shown: str | None = None,
    help: str = "",
    choices: tuple = (),
) -> Any:
    """`base`'s option `name` declared again with another default (and help or choices, when
    given), as a reader whose default or accepted values differ declares it."""
    declared = base.__dataclass_fields__[name].metadata["option"]
    redeclared = replace(
        declared,
        default=default,
        help=help or declared.help,
        shown=shown,
        choices=choices or declared.choices,
    )
    return field(default=default, metadata={"option": redeclared})


def declared(options: type) -> tuple[Option, ...]:
    """The `Option` of each field of an options dataclass, in order."""
    return tuple(replace(f.metadata["option"], name=f.name) for f in dataclasses.fields(options))


class Options:
    """What every options dataclass can do: be resolved from what a caller gave, be built from
    a reader's arguments, list itself."""

    @classmethod
    def resolve(cls: type[T], given: Mapping[str, Any]) -> T:
        """The typed options: each given value checked (a PackError naming the option for one
        it does not take), the defaults for the rest; names not declared are left to the
        caller (see `refuse_unknown`)."""
        return cls(**resolve(declared(cls), given))

    @classmethod
    def of(cls: type[T], arguments: Mapping[str, Any]) -> T:
        """The options among `arguments` (a reader's `locals()`), each checked as `resolve`
        checks it: one typed value."""
        return cls(**{o.name: o.check(arguments[o.name]) for o in declared(cls)})

    @classmethod
    def describe(cls) -> list[str]:
        """`name=default (shown): help` of each option, in order."""
        return [
            f"{o.name}={o.default!r}{f' ({o.shown})' if o.shown else ''}: {o.help}"
            for o in declared(cls)
        ]


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
