"""Every option of a packer reader, declared once: its type, default and help.

A reader takes a pack's path, `split` and `batch_size` (also by position, as it always did;
their declarations are `SPLIT` and `BATCH_SIZE`), then its options by keyword. The options are
a TypedDict: its field types are what a type checker and an IDE read (`**options:
Unpack[SequenceOptions]`), and each field's `Annotated` metadata, a `Default`, holds its value
and help text. `ReaderOptions` are what every reader takes (`Loader`, `PackedSequence`,
`packer.tf.dataset`, `packer.torch`), `LoaderOptions` add what the readers built on a `Loader`
take, and each adapter extends these with its own options, next to its code. `options_of`
turns a TypedDict into `ReaderOption`s, from which a reader takes its keywords (`resolve`),
shows its signature (`with_signature`: what `help()` and `inspect` show) and lists its options
under its docstring (`documented`). A reader whose default differs says so there
(`options_of(TorchOptions, rank=Default(None, shown=...))`), keeping the declared type and help.

This is the reader's counterpart of `packer.options` (the pack's options), apart in two ways:
a reader option's kind is its Python type rather than a command-line flag's, and a wrong value
is the reader's one-line ValueError, raised where the value is used.
"""

from __future__ import annotations

import difflib
import inspect
import os
import textwrap
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Annotated, Any, TypedDict, get_type_hints

from ..augment import Augment


@dataclass(frozen=True)
class Default:
    """An option's default `value` and `help`; `shown` words a default whose value says too
    little (None that the reader works out, say)."""

    value: Any
    help: str = ""
    shown: str | None = None


@dataclass(frozen=True)
class ReaderOption:
    """One keyword of a reader: its name, type, default and help."""

    name: str
    type: Any
    default: Any
    help: str
    shown: str | None = None

    def parameter(self) -> inspect.Parameter:
        """The keyword-only parameter a signature shows for it."""
        return inspect.Parameter(
            self.name, inspect.Parameter.KEYWORD_ONLY, default=self.default, annotation=self.type
        )

    def describe(self) -> str:
        """`name=default (shown): help`, as the readers' docstrings list it."""
        shown = f" ({self.shown})" if self.shown else ""
        return f"{self.name}={self.default!r}{shown}: {self.help}"


# Every reader's positional parameters after the pack's path (as in `Loader(path, "train", 64)`),
# whose defaults its signature takes from here.
SPLIT = ReaderOption("split", str, "train", "The split to read.")
BATCH_SIZE = ReaderOption(
    "batch_size", int, 32, "Samples per batch (of each rank or input pipeline)."
)


class ReaderOptions(TypedDict, total=False):
    """What every packer reader takes by keyword."""

    shuffle: Annotated[
        bool | str,
        Default(
            True,
            'A new seeded order every epoch: "global" draws batches from the whole split; '
            '"windows" visits shards in a shuffled order and shuffles within windows of '
            "`shuffle_window` records, each read ahead as sequential runs (for packs larger "
            'than RAM); True picks "windows" when the split exceeds half the RAM, else "global"; '
            "False keeps the pack's order.",
        ),
    ]
    one_hot: Annotated[
        bool,
        Default(
            False,
            "Float32 one-hot targets `[B,C]` / `[B,H,W,C]` (ignore-index pixels: all-zero rows).",
        ),
    ]
    normalize: Annotated[
        str | None,
        Default(
            None,
            'Float32 images: "unit" (/255) or "dataset" (the manifest\'s per-channel '
            "mean/std); None keeps uint8.",
        ),
    ]
    drop_remainder: Annotated[
        bool, Default(False, "Leave out an epoch's last batch when it is smaller.")
    ]
    seed: Annotated[
        int | None,
        Default(
            None,
            "Seed of the epochs' orders: the same seed gives the same sequence of orders.",
            shown="0",
        ),
    ]
    rank: Annotated[
        int | None,
        Default(
            0,
            "This reader's part of every epoch: the parts of ranks 0..world_size-1 are "
            "disjoint, together the whole split, each with as many batches (see `uneven`).",
        ),
    ]
    world_size: Annotated[int | None, Default(1, "Readers that share each epoch (ranks).")]
    uneven: Annotated[
        str | None,
        Default(
            "pad",
            'When the ranks cannot have equal parts: "pad" repeats a few samples, "drop" '
            'leaves a few out (uneven batch counts hang distributed training); "allow" gives '
            "the first ranks one sample more.",
        ),
    ]
    augment: Annotated[
        Augment | None,
        Default(
            None,
            "A `packer.Augment`: warps images and masks, drawn per (seed, epoch, sample index), "
            "before normalisation and one-hot.",
        ),
    ]
    max_boxes: Annotated[
        int,
        Default(
            100,
            "Detection packs, for the padded targets of PackedSequence and packer.tf.dataset: "
            "objects per image in `boxes` [B,max_boxes,4] and `labels` [B,max_boxes] (padding "
            "-1); an image's further objects are cut, counted and warned of once.",
        ),
    ]
    cache_dir: Annotated[
        str | os.PathLike | None,
        Default(
            None,
            "Where the shards of a pack at a URL are cached, each fetched when first needed.",
            shown="the user's cache folder",
        ),
    ]
    cache_bytes: Annotated[
        int | None,
        Default(
            None,
            "The bound of that cache: the least recently used files go first.",
            shown="$PACKER_CACHE_BYTES, else 50 GB",
        ),
    ]


class LoaderOptions(ReaderOptions, total=False):
    """What the readers built on `reading.Loader` take (all but `packer.tf.dataset`)."""

    shuffle_window: Annotated[
        int | None,
        Default(
            None,
            'Records per window of shuffle="windows".',
            shown="about 256 MB, at least 4 batches",
        ),
    ]


def options_of(declared: type, **overrides: Default) -> tuple[ReaderOption, ...]:
    """The options a TypedDict declares, in order; `overrides` give a reader's own default
    (and help, when given) for some, keeping the declared type."""
    hints = get_type_hints(declared, include_extras=True)
    unknown = set(overrides) - set(hints)
    if unknown:
        raise TypeError(f"{declared.__name__} declares no {', '.join(sorted(unknown))}")
    options = []
    for name, hint in hints.items():
        default = next(m for m in hint.__metadata__ if isinstance(m, Default))
        option = ReaderOption(name, hint.__origin__, default.value, default.help, default.shown)
        if name in overrides:
            own = overrides[name]
            option = replace(
                option, default=own.value, help=own.help or option.help, shown=own.shown
            )
        options.append(option)
    return tuple(options)


def resolve(declared: Iterable[ReaderOption], given: Mapping[str, Any], caller: str) -> dict:
    """Every declared option's value, given or default; a keyword that is not declared is the
    TypeError Python raises for one, with the nearest declared name."""
    names = {o.name: o.default for o in declared}
    for name in given:
        if name not in names:
            close = difflib.get_close_matches(name, [SPLIT.name, BATCH_SIZE.name, *names], n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise TypeError(f"{caller}() got an unexpected keyword argument {name!r}{hint}")
    return {**names, **given}


def with_signature(function: Callable, declared: Iterable[ReaderOption]) -> Callable:
    """`function` (which takes the options as **keywords) shown by `help()` and `inspect` with
    each declared option as a keyword of its own, with its type and default."""
    signature = inspect.signature(function)
    params = [p for p in signature.parameters.values() if p.kind != p.VAR_KEYWORD]
    params += [o.parameter() for o in declared]
    function.__signature__ = signature.replace(parameters=params)  # type: ignore[attr-defined]
    return function


def documented(obj: Any, declared: Iterable[ReaderOption]) -> Any:
    """`obj` with its docstring followed by its options, `split` and `batch_size` first, each
    with its default and help."""
    lines = [
        textwrap.fill(o.describe(), 96, initial_indent="- ", subsequent_indent="  ")
        for o in (SPLIT, BATCH_SIZE, *declared)
    ]
    obj.__doc__ = f"{inspect.cleandoc(obj.__doc__ or '')}\n\nOptions:\n" + "\n".join(lines)
    return obj
