"""`packer.Mixture` and `packer.Stream`: several packs read as one, in set proportions.

    mix = packer.Mixture([packer.Stream("coco-npy/", proportion=0.7),
                          packer.Stream("mine-npy/", repeat=3)])
    seq = packer.keras.PackedSequence(mix, "train", 32)   # wherever a pack's path goes

A mixture is a description (picklable, JSON-ready); readers open it for a split
(`mixture_read.MixedSplit`), whose epochs come from a seeded plan (`mixture_plan`): the order
is a function of (seed, epoch, mixture) only, so ranks, workers, readers and resumes agree as
they do over one pack. `describe()` shows an epoch: draws per pack, share against the asked
proportion, repeats and the longest run from one pack beside what independent draws give.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from .. import storage
from ..errors import MixtureError
from .dataset import PackedDataset, Split
from .mixture_classes import ClassMap
from .mixture_plan import independent_longest_run, longest_run_bound, longest_runs
from .mixture_read import MixedSplit

AMOUNTS = ("proportion", "repeat", "choose")


@dataclass(frozen=True)
class Stream:
    """One pack of a mixture and how much of it each epoch takes: `proportion` (its share of
    the epoch), `repeat` (times each sample appears per epoch: 0.5 takes half, 3 upsamples) or
    `choose` (samples per epoch); none: the pack's size once. `split` overrides the reader's
    for this pack; `class_map` ({pack class: mixture class or None}, or a `source,target` CSV)
    reconciles its classes with the others' by name, at read time."""

    path: str | os.PathLike
    proportion: float | None = None
    repeat: float | None = None
    choose: int | None = None
    split: str | None = None
    class_map: ClassMap | None = None

    def __post_init__(self) -> None:
        given = [k for k in AMOUNTS if getattr(self, k) is not None]
        if len(given) > 1:
            raise MixtureError(f"{self.label}: give at most one of proportion, repeat and choose, "
                               f"not {' and '.join(given)}")  # fmt: skip
        for name in ("proportion", "repeat"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not value > 0
                                      or not math.isfinite(value)):  # fmt: skip
                raise MixtureError(f"{self.label}: {name} must be a number above 0, not {value!r}")
        if self.choose is not None and (
            isinstance(self.choose, bool) or int(self.choose) != self.choose or self.choose < 1
        ):
            raise MixtureError(f"{self.label}: choose must be a whole number >= 1, "
                               f"not {self.choose!r}")  # fmt: skip

    @property
    def label(self) -> str:
        """How messages and summaries name this pack (with its split when it names one)."""
        text = os.fspath(self.path).rstrip("/")
        return text + (f"[{self.split}]" if self.split else "")

    @property
    def amount(self) -> tuple[str, float] | None:
        """(kind, value) of the amount given, None for the pack's size once."""
        return next(((k, getattr(self, k)) for k in AMOUNTS if getattr(self, k) is not None), None)

    def to_json(self, base: Path | None = None) -> dict:
        path = os.fspath(self.path)
        if base is not None and not storage.is_url(path):
            path = os.path.relpath(Path(path).resolve(), base.resolve())
        out = {"path": path}
        for name in (*AMOUNTS, "split", "class_map"):
            value = getattr(self, name)
            if value is not None:
                out[name] = value if name != "class_map" or isinstance(value, dict) else str(value)
        return out


class Mixture:
    """Several packs read as one: each epoch takes from every `Stream` its amount, each pack's
    samples shuffled (each repeat in a new order) and spread evenly through the epoch.
    `epoch_size` fixes the samples per epoch (proportions share what repeat/choose leave);
    without it the epoch follows from the streams (see `mixture_plan.draws`)."""

    def __init__(
        self, streams: Iterable[Stream | str | os.PathLike], epoch_size: int | None = None
    ):
        self.streams = tuple(s if isinstance(s, Stream) else Stream(s) for s in streams)
        if not self.streams:
            raise MixtureError("a Mixture needs at least one packer.Stream(path, ...)")
        if epoch_size is not None and (isinstance(epoch_size, bool) or int(epoch_size) != epoch_size
                                       or epoch_size < 1):  # fmt: skip
            raise MixtureError(f"epoch_size must be a whole number >= 1, not {epoch_size!r}")
        self.epoch_size = None if epoch_size is None else int(epoch_size)

    def __repr__(self) -> str:
        def shown(s: Stream) -> str:
            extra = [f"{k}={v!r}" for k, v in s.to_json().items() if k != "path"]
            return f"Stream({os.fspath(s.path)!r}{''.join(', ' + e for e in extra)})"

        streams = ", ".join(shown(s) for s in self.streams)
        return f"Mixture([{streams}], epoch_size={self.epoch_size!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Mixture) and repr(self) == repr(other)

    def __hash__(self) -> int:
        return hash(repr(self))

    def open(self, split: str = "train", cache_dir=None, cache_bytes: int | None = None):
        """The mixture's `split` as readers see it (`mixture_read.MixedSplit`)."""
        return MixedSplit(self, split, cache_dir, cache_bytes)

    def epoch(self, split: str = "train", seed: int = 0, epoch: int = 0) -> EpochSummary:
        """What epoch `epoch` (with `seed`) of `split` holds, per pack."""
        part = self.open(split)
        plan = part.plan
        order = plan.order(seed, epoch)
        packs = plan.locate(order)[1]
        runs = longest_runs(packs, len(self.streams))
        rows = []
        for k, stream in enumerate(self.streams):
            size, drawn = plan.sizes[k], plan.draws[k]
            share = drawn / plan.count
            rows.append(PackRow(
                stream.label, part.parts[k].name, size, stream.amount, drawn, share, drawn / size,
                runs[k], longest_run_bound(plan.draws, k),
                independent_longest_run(share, plan.count),
            ))  # fmt: skip
        return EpochSummary(split, seed, epoch, plan.count, rows, part.dataset.class_names)

    def describe(self, split: str = "train", seed: int = 0, epoch: int = 0) -> str:
        """A table of epoch `epoch`: per pack its draws, share against the asked proportion,
        repeats and longest run; then the mixture's classes."""
        return self.epoch(split, seed, epoch).render()

    def to_json(self, base: Path | None = None) -> dict:
        """JSON-ready: the streams (paths relative to `base` when given) and epoch_size."""
        return {"streams": [s.to_json(base) for s in self.streams], "epoch_size": self.epoch_size}

    @classmethod
    def from_json(cls, data: dict, base: Path | None = None) -> Mixture:
        """The mixture `to_json` wrote; relative paths are under `base`."""
        try:
            streams = []
            for entry in data["streams"]:
                path = entry["path"]
                if base is not None and not storage.is_url(path) and not os.path.isabs(path):
                    path = os.fspath(base / path)
                streams.append(Stream(**{**entry, "path": path}))
            return cls(streams, data.get("epoch_size"))
        except (KeyError, TypeError) as exc:
            raise MixtureError(f"not a mixture description ({{'streams': [{{'path': ...}}]}}): "
                               f"{exc}") from None  # fmt: skip

    def save(self, path: str | os.PathLike) -> None:
        """Write the mixture as JSON (`packer bench`/`packer preview` take the file)."""
        path = Path(path)
        path.write_text(json.dumps(self.to_json(path.parent), indent=1) + "\n")

    @classmethod
    def load(cls, path: str | os.PathLike) -> Mixture:
        """A mixture saved by `save` (its packs' relative paths are beside the file)."""
        path = Path(path)
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError) as exc:
            raise MixtureError(f"{path}: cannot read a mixture description: {exc}") from None
        return cls.from_json(data, path.parent)


def open_split(
    path: str | os.PathLike | Mixture,
    split: str,
    cache_dir: str | os.PathLike | None = None,
    cache_bytes: int | None = None,
) -> Split | MixedSplit:
    """The split a reader reads: of a pack (path or URL), or of a `Mixture` (its packs' splits,
    each `Stream`'s own split where it names one)."""
    if isinstance(path, Mixture):
        return MixedSplit(path, split, cache_dir, cache_bytes)
    return PackedDataset(path, cache_dir, cache_bytes)[split]


def is_mixture_file(path: str | os.PathLike) -> bool:
    """Whether a command's path names a saved mixture (a .json file) rather than a pack."""
    return (
        not storage.is_url(os.fspath(path))
        and Path(path).suffix == ".json"
        and Path(path).is_file()
    )


@dataclass(frozen=True)
class PackRow:
    """One pack's part of an epoch."""

    label: str
    split: str
    size: int
    asked: tuple[str, float] | None
    draws: int
    share: float
    repeats: float
    longest_run: int
    run_bound: int
    independent_run: float


@dataclass(frozen=True)
class EpochSummary:
    """An epoch of a mixture: its size, each pack's row and the mixture's classes."""

    split: str
    seed: int
    epoch: int
    size: int
    packs: list[PackRow]
    classes: list[str]

    def render(self) -> str:
        lines = [
            f"mixture epoch {self.epoch} of split {self.split!r} (seed {self.seed}): "
            f"{self.size} samples from {len(self.packs)} pack(s)",
            f"{'pack':28} {'size':>7} {'asked':>16} {'draws':>7} {'share':>7} {'repeats':>7} "
            f"{'longest run':>11} {'(bound, independent)':>20}",
        ]
        for r in self.packs:
            asked = "all once" if r.asked is None else f"{r.asked[0]} {r.asked[1]:g}"
            lines.append(
                f"{r.label[-28:]:28} {r.size:>7} {asked:>16} {r.draws:>7} {r.share:>7.3f} "
                f"{r.repeats:>7.2f} {r.longest_run:>11} {r.run_bound:>9} {r.independent_run:>10.1f}"
            )
        lines.append(f"classes ({len(self.classes)}): {', '.join(self.classes)}")
        return "\n".join(lines)
