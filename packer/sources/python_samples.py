"""Samples given in Python: a sequence (or any iterable) of dicts of paths, bytes, arrays,
numbers or strings, as LitData's `optimize` and MosaicML's `MDSWriter` take them.

`listed` reads the samples once (a generator: in order, said so in a note); `infer` names each
key's field kind from the first sample, with the reason a dry run shows; `as_samples` turns
them into `Sample`s whose `values` travel with the chunk tasks to the workers (class names
replaced by their class ids), each with a digest for the shard fingerprints.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Callable, Iterable, Mapping, Sequence

import numpy as np

from .. import fields
from ..errors import SourceError
from ..fields import FieldKind
from ..manifest import SAMPLE_WITHOUT_FILE
from .model import IMAGE_EXTENSIONS, Sample, Values, ext

FIELD_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_-]*")
ITERATOR_NOTE = "the samples came from an iterator without len(): read once, in order"


def listed(samples) -> tuple[Sequence[Mapping], list[str]]:
    """The samples as a sequence, and notes: a sequence as it is, any other iterable read
    once into a list (said in a note); no sample, or one that is not a dict, is an error."""
    notes: list[str] = []
    if isinstance(samples, (str, bytes, Mapping)) or not isinstance(samples, Iterable):
        raise SourceError(f"samples: a sequence of dicts, not {type(samples).__name__}")
    if not (hasattr(samples, "__len__") and hasattr(samples, "__getitem__")):
        samples, notes = list(samples), [ITERATOR_NOTE]
    if len(samples) == 0:
        raise SourceError("samples: nothing to pack (0 samples)")
    if not isinstance(samples[0], Mapping) or not samples[0]:
        raise SourceError(f"samples[0]: a dict of field values, not {samples[0]!r:.60}")
    return samples, notes


def is_image_value(value) -> bool:
    """A path to an image file (by its extension) or an image file's bytes (by its magic)."""
    if isinstance(value, (str, os.PathLike)):
        return ext(os.fspath(value)) in IMAGE_EXTENSIONS
    if isinstance(value, (bytes, bytearray)):
        return bytes(value[:8]).startswith(_MAGIC)
    return False


_MAGIC = (b"\x89PNG", b"\xff\xd8\xff", b"GIF8", b"BM", b"II*\x00", b"MM\x00*", b"RIFF")


def infer(first: Mapping, given: Mapping | None) -> dict[str, tuple[FieldKind, str]]:
    """Each key's kind and why: as `given` (a kind name or a FieldKind, registered if new),
    else from the first sample's value; an unusable entry is a one-line SourceError."""
    found: dict[str, tuple[FieldKind, str]] = {}
    for key, value in first.items():
        if not isinstance(key, str) or not FIELD_NAME.fullmatch(key):
            raise SourceError(
                f"samples[0]: key {key!r}: a field's name is letters, digits, _ and - "
                "(it names the field's files)"
            )
        if given is not None and key in given:
            found[key] = (_given_kind(key, given[key]), "given in fields=")
        else:
            found[key] = _inferred(key, value, any(k.name == "image" for k, _ in found.values()))
    extra = sorted(set(given or ()) - set(first))
    if extra:
        raise SourceError(f"fields={extra[0]!r}: the first sample has no such key")
    return found


def _given_kind(key: str, kind) -> FieldKind:
    if isinstance(kind, FieldKind):
        known = fields.BUILTIN.get(kind.name)
        return kind if known is type(kind) else fields.register(kind)
    if isinstance(kind, str):
        try:
            return fields.get(kind)
        except ValueError as exc:
            raise SourceError(f"fields[{key!r}]: {exc}") from None
    raise SourceError(f"fields[{key!r}]: a kind name or a FieldKind, not {kind!r:.60}")


def _inferred(key: str, value, have_image: bool) -> tuple[FieldKind, str]:
    """The kind the first sample's value suggests, and why."""
    if is_image_value(value):
        if not have_image:
            return fields.get("image"), "an image file: the input image"
        return fields.get("image"), "an image file: an extra image field"
    if isinstance(value, (bool, np.bool_)):
        return fields.get("array"), "a boolean: a number"
    if isinstance(value, (str, int, np.integer)):
        what = "a string: a class name" if isinstance(value, str) else "an integer: a class id"
        return fields.get("class"), what
    array = np.asarray(value)
    if array.dtype.kind not in "biuf":
        raise SourceError(
            f"samples[0][{key!r}]: cannot tell its kind ({type(value).__name__}); "
            "name it in fields="
        )
    if array.ndim == 2 and array.dtype.kind in "iu":
        return fields.get("mask"), f"an integer array {list(array.shape)}: a mask"
    if array.ndim in (2, 3) and min(array.shape[:2]) > 1 and array.dtype.kind == "f":
        return fields.get(
            "pixels"
        ), f"a float array {list(array.shape)}: pixels of the image's size"
    return fields.get("array"), f"{'a number' if array.ndim == 0 else 'numbers'}: kept as given"


def as_samples(
    samples: Sequence[Mapping],
    kinds: Mapping[str, FieldKind],
    classes: Mapping[str, int],
    split: Callable[[str], str] | None = None,
) -> tuple[str, list[Sample]]:
    """The folder every path lies under (the working folder when none is given), and each
    dict as a Sample (its keys must be the first sample's): class names as ids, paths
    relative to that folder; provenance its image's path, else `<sample N>`; split
    "train", or `split(provenance)`."""
    image_key = next((k for k, kind in kinds.items() if kind.name == "image"), None)
    paths = [_paths(index, given, kinds) for index, given in enumerate(samples)]
    folders = {os.path.dirname(p) for found in paths for p in found.values()}
    root = os.path.commonpath(sorted(folders)) if folders else os.getcwd()
    found = []
    for index, (given, named) in enumerate(zip(samples, paths, strict=True)):
        values, files = {}, []
        for key, value in given.items():
            if key in named:
                value = os.path.relpath(named[key], root)
                files.append(value)
            elif isinstance(value, str):  # a class name
                if value not in classes:
                    raise SourceError(f"sample {index}: {key}={value!r} is not a class name")
                value = classes[value]
            values[key] = value
        image = values.get(image_key) if image_key else None
        where = image if isinstance(image, str) else SAMPLE_WITHOUT_FILE.format(index)
        name = "train" if split is None else split(where)
        digest = _digest(values)
        found.append(Sample(where, name, values=Values(index, values, tuple(files), digest)))
    return root, found


def _paths(index: int, given, kinds: Mapping[str, FieldKind]) -> dict[str, str]:
    """A sample's file paths by key, absolute; its keys checked against the first sample's."""
    if not isinstance(given, Mapping) or set(given) != set(kinds):
        keys = sorted(given) if isinstance(given, Mapping) else type(given).__name__
        raise SourceError(f"sample {index}: keys {keys}, the first sample's are {sorted(kinds)}")
    return {
        key: os.path.abspath(os.fspath(value))
        for key, value in given.items()
        if isinstance(value, (str, os.PathLike)) and kinds[key].name != "class"
    }


def class_names(samples: Sequence[Mapping], key: str) -> list[str] | None:
    """The sorted set of a class field's string values (as class folders are sorted); None
    when its values are class ids."""
    names = {s[key] for s in samples if isinstance(s.get(key), str)}
    return sorted(names) if names else None


def _digest(values: Mapping) -> str:
    """A short hash of a sample's values (a path by its name: its file's bytes are checked as
    every source file's are)."""
    digest = hashlib.sha256()
    for key in sorted(values):
        value = values[key]
        digest.update(f"{key}\0{type(value).__name__}\0".encode())
        if isinstance(value, str):
            digest.update(value.encode("utf-8", "surrogateescape"))
        elif isinstance(value, (bytes, bytearray, memoryview)):
            digest.update(bytes(value))
        else:
            array = np.ascontiguousarray(value)
            digest.update(f"{array.dtype.str}{array.shape}".encode())
            digest.update(array.tobytes())
        digest.update(b"\n")
    return digest.hexdigest()[:16]
