"""Batch-time transforms of every reader: normalisation and one-hot expansion, defined once.

`BatchTransform` turns a batch's field arrays into `(images, targets)`: NumPy for the NumPy
readers (`__call__`), the same arithmetic in-graph for tf.data (`tf_apply`). Packs store
class indices; one-hot happens here, per batch.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..errors import ManifestError
from ..fields import kind_of
from ..schema import Field

NORMALIZE_MODES = (None, "unit", "dataset")


def unit_scale(dtype) -> float:
    """What "unit" multiplies images of `dtype` by: 1 / its maximum for integers (1/255 for
    uint8, 1/65535 for uint16), 1 for floats (kept as they are)."""
    dtype = np.dtype(dtype)
    return 1.0 / np.iinfo(dtype).max if dtype.kind in "ui" else 1.0


class Normalizer:
    """Images as they are (None), scaled to [0, 1] by their sample type's maximum ("unit"), or
    standardised per band ("dataset")."""

    def __init__(self, mode: str | None, stats: dict, dtype=np.uint8) -> None:
        if mode not in NORMALIZE_MODES:
            raise ValueError(f"normalize must be one of {NORMALIZE_MODES}, got {mode!r}")
        self.mode = mode
        self.scale = unit_scale(dtype)
        self.mean = np.asarray(stats["mean"], np.float32)
        self.inv_std = 1.0 / np.maximum(np.asarray(stats["std"], np.float32), 1e-6)

    def __call__(self, images: np.ndarray) -> np.ndarray:
        if self.mode is None:
            return images
        out = images.astype(np.float32)
        if self.mode == "unit":
            if self.scale != 1.0:
                out *= np.float32(self.scale)
        else:
            out -= self.mean
            out *= self.inv_std
        return out


def ids_table(num_classes: int, ignore_index: int | None, fields: Sequence[Field]) -> np.ndarray:
    """A lookup table: row k is the one-hot vector of class k; other ids (ignore) are all zero.

    Rows cover every id `fields` (the fixed class-id fields expanded) can hold: an 8- or
    16-bit unsigned field's whole range (a uint16 mask's 65536), else the classes (256 at
    least), and the ignore index of planes of class ids. Indexing it with a whole batch of ids
    (`table[ids]`) expands the batch in one vectorised step.
    """
    rows = max(256, num_classes)
    for f in fields:
        dtype = np.dtype(f.dtype)
        if dtype.kind == "u" and dtype.itemsize <= 2:
            rows = max(rows, 2 ** (8 * dtype.itemsize))
        if ignore_index is not None and kind_of(f).geometry == "labels":
            rows = max(rows, ignore_index + 1)
    table = np.zeros((rows, num_classes), np.float32)
    table[np.arange(num_classes), np.arange(num_classes)] = 1.0
    return table


def input_field(pack_fields: Sequence[Field]) -> Field:
    """The field readers yield as inputs: the first fixed one whose kind is an input (image)."""
    found = next((f for f in pack_fields if not f.ragged and kind_of(f).input), None)
    if found is None:
        kinds = ", ".join(f"{f.name} ({f.kind})" for f in pack_fields)
        raise ManifestError(f"this pack has no field of kind 'image' to read as inputs: {kinds}")
    return found


@dataclass(frozen=True)
class Targets:
    """What a pack's readers yield, decided by its fields' kinds: the input field, and every
    other field as a target: fixed ones batched `[B, ...]`, ragged ones per object (the padded
    readers: those whose kind has `padded`, `[B, max_boxes, *row]`)."""

    input: str
    fixed: tuple[str, ...]  # fixed target fields, in the pack's order
    ragged: tuple[str, ...]  # every ragged field
    padded: tuple[str, ...]  # the ragged fields the padded readers yield
    class_ids: tuple[str, ...]  # the fixed targets one_hot expands (kinds with class_ids)
    names: tuple[str, ...]  # the padded readers' targets: fixed and padded, in the pack's order

    @classmethod
    def of(cls, pack_fields: Sequence[Field]) -> Targets:
        source = input_field(pack_fields)
        others = [f for f in pack_fields if f is not source]
        return cls(
            source.name,
            tuple(f.name for f in others if not f.ragged),
            tuple(f.name for f in others if f.ragged),
            tuple(f.name for f in others if f.ragged and kind_of(f).padded),
            tuple(f.name for f in others if not f.ragged and kind_of(f).class_ids),
            tuple(f.name for f in others if not f.ragged or kind_of(f).padded),
        )

    @property
    def single(self) -> str | None:
        """The one target field when there is exactly one and it is fixed (class ids, masks):
        readers yield its array itself rather than a dict."""
        return self.fixed[0] if len(self.fixed) == 1 and not self.ragged else None


def targets_of(arrays: dict, targets: Targets):
    """The targets of a batch's arrays: the single target's array, or a dict by name."""
    if targets.single is not None:
        return arrays[targets.single]
    return {name: arrays[name] for name in targets.names}


class BatchTransform:
    """Field arrays -> (images, targets), normalised and one-hot as asked (`Targets` says
    which field is which)."""

    def __init__(self, manifest: dict, normalize: str | None = None, one_hot: bool = False):
        pack_fields = tuple(Field.from_json(f) for f in manifest["fields"])
        self.targets = Targets.of(pack_fields)
        source = next(f for f in pack_fields if f.name == self.targets.input)
        self.normalizer = Normalizer(normalize, manifest["stats"], source.dtype)
        self.num_classes = len(manifest["classes"])
        if one_hot and not self.targets.class_ids:
            shown = ", ".join(self.targets.fixed + self.targets.ragged) or "none"
            raise ValueError(
                "one_hot=True does not apply to this pack's targets: none is a fixed field of "
                f"class ids (its targets: {shown}); read them without it"
            )
        expanded = [f for f in pack_fields if f.name in self.targets.class_ids]
        self.one_hot = (
            ids_table(self.num_classes, manifest.get("ignore_index"), expanded) if one_hot else None
        )

    @property
    def identity(self) -> bool:
        """True when `(images, targets)` are the stored arrays as they are (nothing to compute)."""
        return self.normalizer.mode is None and self.one_hot is None

    def expand(self, arrays: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """`arrays` with each class-id target one-hot, when asked."""
        if self.one_hot is None:
            return arrays
        return arrays | {k: self.one_hot[arrays[k]] for k in self.targets.class_ids if k in arrays}

    def __call__(self, arrays: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray | dict]:
        images = self.normalizer(arrays[self.targets.input])
        return images, targets_of(self.expand(arrays), self.targets)

    def tf_apply(self, arrays: dict) -> tuple:
        """The same transform on tf tensors, in-graph (ids outside 0..C-1 become zero rows)."""
        import tensorflow as tf

        images = arrays[self.targets.input]
        mode = self.normalizer.mode
        if mode is not None:
            images = tf.cast(images, tf.float32)
            if mode == "unit":
                images = images * self.normalizer.scale
            else:
                images = (images - self.normalizer.mean) * self.normalizer.inv_std
        if self.one_hot is not None:
            arrays = arrays | {
                k: tf.one_hot(tf.cast(arrays[k], tf.int32), self.num_classes, dtype=tf.float32)
                for k in self.targets.class_ids
            }
        return images, targets_of(arrays, self.targets)
