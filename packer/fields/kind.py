"""`FieldKind`: what a kind of field's values are and how every stage treats them.

A field (`schema.Field`) is a name, a shape, a dtype and a kind; the kind is the one object
that says what its values mean: how the pack's geometry and the augmentation move them
(`geometry`), whether the padded readers yield them, and, stage by stage, the hooks below.
Formats, readers, the workers' hand-off, augmentation, statistics and preview loop over the
pack's fields and ask each field's kind; none of them names a field. A kind that overrides
nothing is stored as its dtype's bytes in every format and batched as it is: a new kind is a
subclass that says only what differs, registered with `packer.fields.register`.
"""

from __future__ import annotations

import pickle
import sys
from collections import Counter
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from .counting import class_counts, shape_text

if TYPE_CHECKING:
    from ..labels import ClassTable
    from ..schema import Field
    from .placing import Frame

# How the geometry (resize, crop, pad; the augmentation's flips, affine warps) moves a field:
#   "pixels"  a picture of the image's size: resampled with the kind's `interpolation`
#   "labels"  a plane of class ids of the image's size: nearest neighbour, padded with ignore
#   "boxes"   rows x1, y1, x2, y2 in the image's pixels: moved as coordinates
#   "points"  rows of (x, y[, ...]) in the image's pixels: moved as coordinates
#   "planes"  one 0/1 plane of the image's size per object: nearest neighbour, padded with 0
#   "none"    numbers the geometry does not touch (class ids, flags, regression targets)
GEOMETRIES = ("pixels", "labels", "boxes", "points", "planes", "none")
INTERPOLATIONS = ("linear", "area", "nearest", "cubic")


def _importable(cls: type) -> bool:
    """Whether another process can import `cls` by its module and name (not from a main
    script, which spawned processes do not import, nor from code run without a module)."""
    if cls.__module__ in ("__main__", "__mp_main__"):
        return False
    module = sys.modules.get(cls.__module__)
    if getattr(module, "__spec__", None) is None:
        return False
    found = module
    for part in cls.__qualname__.split("."):
        found = getattr(found, part, None)
    return found is cls


def _rebuilt(base: type, name: str, attributes: dict) -> FieldKind:
    """A kind sent by value: its class made again from its importable base and attributes."""
    return type(name, (base,), attributes)()


class FieldKind:
    """The base kind: numbers the geometry leaves alone, stored as their bytes."""

    name: ClassVar[str] = "array"
    geometry: ClassVar[str] = "none"
    interpolation: ClassVar[str] = "linear"  # for geometry "pixels"
    ragged: ClassVar[bool] = False  # rows per object (values + offsets), not one array a sample
    padded: ClassVar[bool] = True  # a ragged field: yielded by the padded readers (Keras, tf)
    class_ids: ClassVar[bool] = False  # values are indices into the pack's class table

    def __init_subclass__(cls, **kwargs) -> None:
        super().__init_subclass__(**kwargs)
        if cls.geometry not in GEOMETRIES:
            raise TypeError(f"{cls.__name__}.geometry {cls.geometry!r}: one of {GEOMETRIES}")
        if cls.interpolation not in INTERPOLATIONS:
            raise TypeError(
                f"{cls.__name__}.interpolation {cls.interpolation!r}: one of {INTERPOLATIONS}"
            )

    def __repr__(self) -> str:
        return f"<field kind {self.name!r}: geometry {self.geometry}>"

    def __reduce__(self) -> tuple:
        """By reference when the kind's class can be imported by name; a kind defined in the
        main script, a notebook or any module another process cannot import goes by value
        (its base and class attributes), which is enough for a kind that only sets attributes.
        A spawned worker process (packer's, or a DataLoader's once torch or TensorFlow is
        loaded) imports nothing of the parent's main script."""
        cls = type(self)
        if _importable(cls):
            return cls, ()
        own = {k: v for k, v in vars(cls).items() if not k.startswith("__")}
        methods = sorted(k for k, v in own.items() if callable(v) or hasattr(v, "__get__"))
        if methods:
            raise pickle.PicklingError(
                f"field kind {self.name!r} ({cls.__module__}.{cls.__qualname__}) defines "
                f"{', '.join(methods)} outside an importable module, so worker processes cannot "
                "have it: define it in a module your script imports"
            )
        base = next(b for b in cls.__mro__[1:] if _importable(b))
        return _rebuilt, (base, cls.__name__, own)

    # --- packing: placing a source's value by the pack's geometry

    def place(self, value, field: Field, frame: Frame) -> np.ndarray:
        """One sample's `value` for `field` (ragged: its rows `[N, *row]`), placed by the
        pack's geometry as `frame` says (`fields.placing`: by this kind's `geometry`) and in
        the field's dtype without loss; a value that cannot be is a ValueError saying why."""
        from . import placing

        if self.geometry == "pixels":
            return placing.pixels(value, field.shape, field.dtype, frame, self.interpolation)
        if self.geometry == "labels":
            return placing.labels(value, field.dtype, frame)
        if self.geometry == "planes":
            return placing.planes(value, field.dtype, frame)
        if self.geometry in ("boxes", "points"):
            return placing.coordinates(value, field.dtype, frame, self.geometry == "boxes")
        return placing.fitted(value, field.dtype)

    # --- storage: TFRecord and RecordIO
    # TFRecord: a kind gives its Example features as key -> ("int64" | "float" | "bytes",
    # values) (the format writes the wire bytes) and reads them back from `example`, which has
    # `ints(key)`, `floats(key)`, `bytes(key)` (a list) and `raw(key)` (the first bytes value, in
    # place). The default: `packer/<field name>`, a fixed field's bytes as one value, a ragged
    # field's rows one value each (little-endian, C order). `size` is the image's (W, H),
    # `names` the class table. RecordIO: `recordio` says where a record keeps the field: the
    # payload's "image" or "mask", the IRHeader's "label", columns of MXNet's "detection"
    # label, the "objects" trailer (bit-packed planes), or the fields' "trailer"; the format
    # gives each place to the first field that asks for it, the others go to the trailer.
    # An encoded field (`Field.encoding` jpeg/png) is its compressed payload: TFRecord passes
    # the payload's bytes as the value and reads it back from the first key's one bytes value.
    recordio: ClassVar[str] = "trailer"
    detection_columns: ClassVar[int] = 1  # values an object takes in MXNet's detection label
    detection_order: ClassVar[int] = 3  # the label's column order: class, box, flags, others
    detection_optional: ClassVar[bool] = False  # absent from narrower labels (im2rec's): zeros

    @staticmethod
    def little_endian(array: np.ndarray) -> np.ndarray:
        """`array` as C-ordered little-endian values (what TFRecord and RecordIO store)."""
        return np.ascontiguousarray(array, np.asarray(array).dtype.newbyteorder("<"))

    def tfrecord_keys(self, field: Field) -> tuple[str, ...]:
        """The Example keys the field's value takes, the value's own first (two fields may not
        share a key: the second of a kind falls back to `FieldKind`'s)."""
        return (f"packer/{field.name}",)

    def tfrecord_raw_key(self, field: Field) -> str | None:
        """The key whose one bytes value is a fixed field's stored bytes (read in place)."""
        return None if field.ragged or field.encoding != "raw" else self.tfrecord_keys(field)[0]

    def tfrecord_encode(
        self, field: Field, value: Any, size: tuple[int, int], names: tuple[str, ...]
    ) -> dict[str, tuple[str, list]]:
        """The features of one sample's value (a ragged field's: `[N, *shape]`)."""
        key = self.tfrecord_keys(field)[0]
        if field.encoding != "raw":  # `value` is the payload
            return {key: ("bytes", [value])}
        if field.ragged:
            rows = self.little_endian(field.encode(value)).view(np.uint8)
            return {key: ("bytes", list(rows.reshape(len(rows), field.nbytes)))}
        return {
            key: ("bytes", [self.little_endian(field.coerce(value)).reshape(-1).view(np.uint8)])
        }

    def tfrecord_decode(self, field: Field, example: Any, size: tuple[int, int]) -> np.ndarray:
        """One sample's value back from its Example's features."""
        key = self.tfrecord_keys(field)[0]
        if field.encoding != "raw":
            from ..imaging import codec

            return codec.decode(example.raw(key), field.shape, field.dtype)
        stored = np.dtype(field.stored_dtype).newbyteorder("<")
        if field.ragged:
            rows = np.frombuffer(b"".join(example.bytes(key)), stored)
            return field.decode(rows.astype(field.stored_dtype, copy=False))
        raw = example.raw(key)
        if len(raw) != field.nbytes:
            raise ValueError(f"{key} holds {len(raw)} bytes, {field.nbytes} expected")
        value = np.frombuffer(raw, stored).reshape(field.shape)
        return value.astype(field.dtype, copy=False)

    def tf_spec(self, field: Field) -> dict:
        """The tf.io parse spec of the field's keys (a ragged field: when padded)."""
        import tensorflow as tf

        key = self.tfrecord_keys(field)[0]
        if field.ragged:
            return {key: tf.io.VarLenFeature(tf.string)}
        return {key: tf.io.FixedLenFeature([], tf.string)}

    def tf_value(self, field: Field, parsed: dict, size: tuple[int, int]):
        """A parsed batch's values: a fixed field's `[B, *shape]`, a ragged one's
        `tf.RaggedTensor` `[B, None, *shape]`, of the field's dtype."""
        import tensorflow as tf

        key = self.tfrecord_keys(field)[0]
        if field.packing:
            raise ValueError(f"{field.name}: packed rows ({field.packing}) are not padded")
        dtype = tf.as_dtype(np.dtype(field.dtype).newbyteorder("="))
        if field.encoding != "raw":  # in-graph, image by image (the streamed, gzip path)
            bands = field.shape[2] if len(field.shape) == 3 else 1

            def decode(data):
                if field.encoding == "jpeg":  # libjpeg's default DCT, as OpenCV's decode
                    return tf.io.decode_jpeg(data, bands, dct_method="INTEGER_ACCURATE")
                return tf.io.decode_png(data, bands, dtype)

            spec = tf.TensorSpec([None, None, bands], dtype)
            images = tf.map_fn(decode, parsed[key], fn_output_signature=spec)
            return tf.reshape(images, [-1, *field.shape])
        if not field.ragged:
            raw = tf.io.decode_raw(parsed[key], dtype, little_endian=True)
            return tf.reshape(raw, [-1, *field.shape])
        rows = tf.RaggedTensor.from_sparse(parsed[key])
        values = tf.io.decode_raw(rows.flat_values, dtype, little_endian=True)
        values = tf.reshape(values, [-1, *field.shape])
        return tf.RaggedTensor.from_row_splits(values, rows.row_splits)

    def detection_encode(self, field: Field, value: Any, size: tuple[int, int]) -> np.ndarray:
        """The field's columns of MXNet's detection label, `[N, detection_columns]` float64."""
        array = np.asarray(value, np.float64)
        return array.reshape(len(array), self.detection_columns)

    def detection_decode(self, field: Field, table: np.ndarray, size: tuple[int, int]):
        """The field's value `[N, *shape]` from its columns of the label (float64)."""
        return table.reshape(len(table), *field.shape).astype(field.dtype)

    # --- reading: batches, targets, the workers' hand-off
    # The readers' input is the first fixed field whose kind has `input` (the image); every
    # other field is a target (see reading.transforms.Targets). Which targets `one_hot`
    # expands and the padded readers yield is said above (`class_ids`, `padded`).
    input: ClassVar[bool] = False

    # --- augmentation

    # --- statistics, info and preview
    # Packing counts each sample's value into its shard's receipt (`packing.stats`): channel
    # histograms or moments, counts per class id, object counts; the manifest turns the
    # receipts into its `stats` (`stats_entries`); `packer info` describes the field (`info`)
    # and `packer preview` draws it on each sample's tile (`draw`, lowest `draw_layer` first).
    # The base kind counts nothing, says name, kind, shape, dtype and raggedness, and draws
    # only points (small crosses in the objects' class colours).
    # The manifest's keys for the class counts this kind makes and for the ids outside the
    # class table ("class_pixels", "other_pixels"); empty: it counts no classes.
    class_stats: ClassVar[tuple[str, ...]] = ()
    draw_layer: ClassVar[int] = 3  # 0: over the pack's pixels; 1 and up: over the tile

    def count_channels(self, value: np.ndarray) -> tuple[str, np.ndarray] | None:
        """Per-band counts of one sample's value: ("channel_hist", `[bands, 256]` int64) or
        ("channel_moments", `[bands, 3]` count, sum, sum of squares); None: none."""
        return None

    def count_classes(self, value: np.ndarray) -> np.ndarray | None:
        """Counts by class id (the index) of one sample's value; None: it counts none."""
        return None

    def count_objects(self, value: np.ndarray) -> Counter | None:
        """Object counts of one sample's rows (objects per image, sizes); None: none."""
        return None

    def stats_entries(self, receipts: list[dict], table: ClassTable) -> dict:
        """The manifest's `stats` entries from the receipts' counts: the base kind's, its class
        counts by class name and the counts of ids outside the table (when it counts any)."""
        if not self.class_stats:
            return {}
        counted, other = self.class_stats
        classes = class_counts(receipts)
        known = {c.index for c in table.classes}
        return {
            counted: {c.name: int(classes.get(c.index, 0)) for c in table.classes},
            other: {str(k): int(v) for k, v in sorted(classes.items()) if k not in known},
        }

    def info(self, field: Field) -> str:
        """The field in `packer info`'s `fields:` line: name, shape, dtype, kind, raggedness."""
        return f"{shape_text(field)} ({self.name}, {'ragged' if field.ragged else 'fixed'})"

    def draw(self, tile, value: np.ndarray) -> None:
        """Draw one sample's value on its preview tile (`cli.preview_objects.Tile`): the base
        kind draws points (x, y first in each row) as small crosses, in their objects' class
        colours; other values are not drawn."""
        points = np.asarray(value, np.float64)
        if self.geometry != "points" or points.ndim == 0 or points.shape[-1] < 2:
            return
        draw = tile.draw()
        sx, sy = tile.scale
        for k, (x, y) in enumerate(points.reshape(-1, points.shape[-1])[:, :2]):
            color = tile.object_color(k) if self.ragged else tile.sample_color()
            cx, cy = x * sx, y * sy
            draw.line((cx - 3, cy, cx + 3, cy), fill=color)
            draw.line((cx, cy - 3, cx, cy + 3), fill=color)
