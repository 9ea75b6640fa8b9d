"""`--encoding raw|jpeg|png` and `--quality`: pack options every format declares (one option on
the command line), which make the pack's image fields compressed.

Compression is a property of a field (`Field.encoding`): the image fields (kind "image") take
the encoding asked for; masks and every other field stay exact (raw). A format stores an
encoded field once per sample and its shard reader decodes it into the batch rows
(`imaging.codec`). npy and TFRecord record the two options in the manifest only when given,
so packs without them keep their bytes; RecordIO has always recorded them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from ..imaging import codec
from ..options import Options, option
from ..schema import Field

DEFAULT_QUALITY = 95


@dataclass(frozen=True)
class EncodingOptions(Options):
    """The image fields' encoding, declared by every format."""

    encoding: str = option(
        "raw",
        "image payload, decoded pixels or re-encoded (masks and labels stay exact)",
        kind="choice",
        choices=codec.ENCODINGS,
    )
    quality: int = option(
        DEFAULT_QUALITY, "JPEG quality (with --encoding jpeg)", kind="int", range=(1, 100)
    )


NAMES = ("encoding", "quality")


def encoded(fields: Sequence[Field], options: dict) -> tuple[tuple[Field, ...], dict]:
    """The fields with the encoding of `options` on the image fields, and the options with what
    the manifest records of it when not raw: the encoder (and a JPEG's quality)."""
    encoding = options.get("encoding", "raw")
    if encoding == "raw":
        return tuple(fields), options
    found = tuple(
        replace(f, encoding=encoding) if f.kind == "image" and not f.ragged else f for f in fields
    )
    recorded = {"encoder": codec.BACKEND}
    if encoding == "jpeg":
        recorded["quality"] = options.get("quality", DEFAULT_QUALITY)
    return found, {**options, **recorded}


def check_fields(fields: Sequence[Field]) -> None:
    """Raise ValueError (one line naming the images' type) for a field its encoding cannot
    store exactly."""
    for f in fields:
        codec.check(f.encoding, f.name, f.dtype, f.shape)


def payload(field: Field, value, quality: int) -> bytes:
    """An encoded field's value as stored: coerced to the field's shape and type, then encoded
    (JPEG at `quality`, or PNG). The npy and TFRecord writers and the plan's estimate of the
    stored bytes all encode here, so that shards are cut by the bytes the writers store."""
    return codec.encode(field.coerce(value), field.encoding, quality)


def quality(options: dict) -> int:
    """The JPEG quality the writers use (the default where not recorded)."""
    return int(options.get("quality", DEFAULT_QUALITY))
