"""Every option of a packer reader, declared once: a field of a frozen dataclass (see
`packer.options`, the model the pack's options share).

A reader takes a pack's path, `split` and `batch_size` (also by position), then its options by
keyword. `ReaderOptions` are what every reader takes, `LoaderOptions` add what the readers
built on a `Loader` take, and each adapter extends these with its own options, next to its
code (`SequenceOptions`, `TfOptions`, `TorchOptions`). A field's type is the option's type, its
default the reader's default, and its metadata (`option(...)`) the help text, so that the
docstring a reader shows (`takes`) and the typed value it passes around (`of`) come from
one place. A reader writes its keywords in its own `def` (what `help()`, `inspect` and an IDE
read); a test checks that they are exactly its dataclass's fields, with the same defaults.
A reader whose default differs declares the field again (`again`), keeping the help.
"""

from __future__ import annotations

import difflib
import functools
import inspect
import numbers
import os
import textwrap
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from ..augment import Augment
from ..flags import flag
from ..options import OptionError, Options, option
from .sampler import SHUFFLE_MODES, UNEVEN_MODES
from .transforms import NORMALIZE_MODES

T = TypeVar("T")

SPLIT = "train"  # every reader's default split (its second parameter, after the path)
BATCH_SIZE = 32  # and batch size (its third)
POSITIONAL_HELP = {
    "split": "The split to read.",
    "batch_size": "Samples per batch (of each rank or input pipeline).",
}


def batch_size_of(value: object) -> int:
    """The batch size as an int; anything but a whole number of at least 1 (a string from a
    config file, a float, a bool) is a one-line OptionError, before it reaches arithmetic."""
    if isinstance(value, numbers.Integral) and not isinstance(value, bool) and value >= 1:
        return int(value)
    raise OptionError(f"{flag('batch_size', value)}: expected a whole number of samples, 1 or more")


@dataclass(frozen=True)
class ReaderOptions(Options):
    """What every packer reader takes by keyword."""

    shuffle: bool | str = option(
        True,
        'A new seeded order every epoch: "global" draws batches from the whole split; '
        '"windows" visits shards in a shuffled order and shuffles within windows of '
        "`shuffle_window` records, each read ahead as sequential runs (for packs larger "
        'than RAM); True picks "windows" when the split exceeds half the RAM, else "global"; '
        "False keeps the pack's order.",
        kind="choice",
        choices=SHUFFLE_MODES,
    )
    one_hot: bool = option(
        False,
        "Float32 one-hot targets `[B,C]` / `[B,H,W,C]` (ignore-index pixels: all-zero rows).",
        kind="switch",
    )
    normalize: str | None = option(
        None,
        'Float32 images: "unit" (/255; uint16 /65535; float32 as stored) or "dataset" (the '
        "manifest's per-band mean/std); None keeps the stored images.",
        kind="choice",
        choices=tuple(m for m in NORMALIZE_MODES if m is not None),
    )
    drop_remainder: bool = option(
        False, "Leave out an epoch's last batch when it is smaller.", kind="switch"
    )
    seed: int | None = option(
        None,
        "Seed of the epochs' orders: the same seed gives the same sequence of orders.",
        shown="0",
    )
    rank: int | None = option(
        0,
        "This reader's part of every epoch: the parts of ranks 0..world_size-1 are "
        "disjoint, together the whole split, each with as many batches (see `uneven`).",
    )
    world_size: int | None = option(1, "Readers that share each epoch (ranks).")
    uneven: str | None = option(
        "pad",
        'When the ranks cannot have equal parts: "pad" repeats a few samples, "drop" '
        'leaves a few out (uneven batch counts hang distributed training); "allow" gives '
        "the first ranks one sample more.",
        kind="choice",
        choices=UNEVEN_MODES,
    )
    augment: Augment | None = option(
        None,
        "A `packer.Augment`: warps images and masks, drawn per (seed, epoch, sample index), "
        "before normalisation and one-hot.",
    )
    max_boxes: int = option(
        100,
        "Detection packs, for the padded targets of PackedSequence and packer.tf.dataset: "
        "objects per image in `boxes` [B,max_boxes,4] and `labels` [B,max_boxes] (padding "
        "-1); an image's further objects are cut, counted and warned of once.",
    )
    cache_dir: str | os.PathLike | None = option(
        None,
        "Where the shards of a pack at a URL are cached, each fetched when first needed.",
        shown="the user's cache folder",
    )
    cache_bytes: int | None = option(
        None,
        "The bound of that cache: the least recently used files go first.",
        shown="$PACKER_CACHE_BYTES, else 50 GB",
    )


@dataclass(frozen=True)
class LoaderOptions(ReaderOptions):
    """What the readers built on `reading.Loader` take (all but `packer.tf.dataset`)."""

    shuffle_window: int | None = option(
        None, 'Records per window of shuffle="windows".', shown="about 256 MB, at least 4 batches"
    )


def takes(declared: type[Options]) -> Callable[[T], T]:
    """A decorator for a reader (a function or a class) that takes `declared`: its docstring
    lists them after `split` and `batch_size`, each with its default and help (what `help()`
    shows), and a keyword it does not take is refused with the nearest one it does (Python's
    own TypeError suggests none)."""
    positional = [
        f"split={SPLIT!r}: {POSITIONAL_HELP['split']}",
        f"batch_size={BATCH_SIZE!r}: {POSITIONAL_HELP['batch_size']}",
    ]
    lines = [
        textwrap.fill(line, 96, initial_indent="- ", subsequent_indent="  ")
        for line in (*positional, *declared.describe())
    ]

    def add(obj: T) -> T:
        doc = inspect.cleandoc(obj.__doc__ or "")
        obj.__doc__ = f"{doc}\n\nOptions:\n" + "\n".join(lines)
        if isinstance(obj, type):
            obj.__init__ = _known_keywords(obj.__init__, obj.__name__)  # type: ignore[misc]
            return obj
        adapter = obj.__module__.split(".")[1]  # as users call it: tf.dataset (not tf.tfdata.)
        return _known_keywords(obj, f"{adapter}.{obj.__name__}")

    return add


def _known_keywords(function: Callable, name: str) -> Callable:
    """`function`, refusing a keyword it does not take with a TypeError that names the nearest
    one it does."""
    parameters = inspect.signature(function).parameters.values()
    known = [p.name for p in parameters if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]

    @functools.wraps(function)
    def checked(*args, **kwargs):
        for keyword in kwargs:
            if keyword not in known:
                close = difflib.get_close_matches(keyword, known, n=1)
                hint = f"; did you mean {close[0]}?" if close else ""
                raise TypeError(f"{name}() got an unexpected keyword argument {keyword!r}{hint}")
        return function(*args, **kwargs)

    return checked
