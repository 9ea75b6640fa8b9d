"""The compiled batch read of `packer.tf.dataset`: a tf.data source in C++ (`ops/passes.cc`)
for npy and uncompressed tfrecord packs of plain fixed fields (a class id among them), about
twice the numpy_function read's rate (see benchmarks/results/2026-11-28-tf-data-compiled.md).

Each new iterator (a Keras epoch) asks `Passes.take_pass` once for its pass's batches, then
copies every batch's rows from the shard files with no Python and no function per element
(a tfrecord record's framing and CRC32C checked once per process before its bytes are used,
a field found by its key in each record's Example where its place varies, a class id decoded
from its varint);
as the pipeline's last stage it copies the next batch while one is consumed.
The library is built with g++ against the installed TensorFlow on first use (or by
scripts/install.sh) into a per-user folder keyed by TensorFlow's version and the source; where
it cannot be built or loaded, one line says so and `packer.tf.dataset` reads as before.
"""

from __future__ import annotations

import hashlib
import os
import secrets
import subprocess
import sys
import sysconfig
import tempfile
import threading
import weakref
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import tensorflow as tf

from ..fields import ClassId, FieldKind
from ..formats import npy, tfrecord, tfrecord_objects
from ..schema import Field, fixed
from ..storage.cache import default_dir

if TYPE_CHECKING:
    from .indexed import Passes

SOURCE = Path(__file__).with_name("ops") / "passes.cc"
HEADERS = sorted(SOURCE.parent.glob("*.h"))  # included by the source: part of its key
CALLBACK = f"{__name__}:take_pass"
READ_COMPILED, READ_NUMPY = "compiled", "numpy_function"
# Whether datasets built from now on may use it: PACKER_TF_COMPILED=0 turns it off.
ENABLED = os.environ.get("PACKER_TF_COMPILED", "1") != "0"
# Whether a source that ends its pipeline reads ahead itself rather than through a tf.data
# prefetch after it (the benchmark turns it off to measure the prefetch in the same run).
READ_AHEAD = True

_lock = threading.Lock()
_library: object | None = None
_tried = False
_passes: weakref.WeakValueDictionary[str, Passes] = weakref.WeakValueDictionary()


def library_path() -> Path:
    """Where the library for this TensorFlow and this source lives."""
    flags = [*tf.sysconfig.get_compile_flags(), *tf.sysconfig.get_link_flags()]
    code = b"".join(p.read_bytes() for p in (SOURCE, *HEADERS))
    digest = hashlib.sha256(code + " ".join(flags).encode()).hexdigest()[:16]
    folder = default_dir().with_name(default_dir().name + "-tf-ops")
    return folder / f"passes-tf{tf.__version__}-{digest}.so"


def build(target: Path | None = None) -> Path:
    """Compile the library (g++, TensorFlow's and Python's headers) unless it is there."""
    target = target or library_path()
    if target.exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, partial = tempfile.mkstemp(suffix=".so", dir=target.parent)
    os.close(fd)
    command = [
        os.environ.get("CXX", "g++"), "-shared", "-fPIC", "-O2", "-Wno-deprecated-declarations",
        f"-I{sysconfig.get_paths()['include']}", *tf.sysconfig.get_compile_flags(),
        str(SOURCE), "-o", partial, *tf.sysconfig.get_link_flags(),
    ]  # fmt: skip
    try:
        done = subprocess.run(command, capture_output=True, text=True)
        if done.returncode != 0:  # the first error says why (the last line is g++'s summary)
            lines = done.stderr.strip().splitlines() or ["no output"]
            why = next((line for line in lines if "error" in line), lines[-1])
            raise OSError(f"{command[0]} failed: {why.strip()}")
        os.replace(partial, target)  # whole, even with several processes building at once
    finally:
        if os.path.exists(partial):
            os.unlink(partial)
    return target


def library() -> object | None:
    """The loaded op library, or None (said once) where it cannot be built or loaded."""
    global _library, _tried
    with _lock:
        if not _tried:
            _tried = True
            try:
                _library = tf.load_op_library(str(build()))
            except (OSError, tf.errors.OpError) as exc:
                reason = str(exc).strip().splitlines()[-1] if str(exc).strip() else type(exc)
                print(
                    f"packer.tf: the compiled batch read is unavailable ({reason}); "
                    "reading through tf.numpy_function (about half the rate)",
                    file=sys.stderr,
                )
        return _library


def take_pass(token: str) -> tuple[np.ndarray, np.ndarray]:
    """The next pass of the dataset `token` names (called by the source, once an iterator)."""
    passes = _passes.get(token)
    if passes is None:
        raise RuntimeError("packer.tf.dataset: iterating a dataset whose reader is gone")
    return passes.take_pass()


def handles(passes: Passes) -> bool:
    """Whether the compiled source reads this dataset: a local npy or uncompressed tfrecord
    pack (not a mixture) of plain fixed fields in native byte order (a tfrecord pack's each a
    bytes feature, or a class id's int64 one, or at the same place of every record), read
    without augmentation or object targets, and built eagerly (a dataset built inside a
    traced function, a `flat_map`'s say, keeps no Python object alive to hand the source its
    passes)."""
    loader = passes.loader
    dataset = getattr(loader.split, "dataset", None)
    if (
        not ENABLED
        or not tf.executing_eagerly()
        or passes.keys
        or loader.objects
        or getattr(loader.split, "plan", None) is not None
    ):
        return False
    if dataset is None or dataset.format not in ("npy", "tfrecord") or dataset.cache is not None:
        return False
    fields = fixed(dataset.fields)
    native = all(np.dtype(f.dtype).isnative for f in fields)
    if not native or fields != npy.plain(dataset.fields):
        return False
    if dataset.format == "tfrecord" and not _records_hold(passes):
        return False
    return library() is not None


def _records_hold(passes: Passes) -> bool:
    """Whether the compiled source finds every field in every record of an uncompressed
    tfrecord split: by its Example key, or at the same place of every record."""
    split = passes.loader.split
    if not tfrecord.random_access(split.dataset.format_options):
        return False
    features = _features(split, passes.fields)
    keyless = {f.name for f, (key, _) in zip(passes.fields, features, strict=True) if not key}
    shards = zip(split.shards, split.reader.shards, strict=True)
    return all(keyless <= reader.raw_layout()[2].keys() for s, reader in shards if s["count"])


def _features(split: object, fields: list[Field]) -> list[tuple[str, bool]]:
    """Each field's Example key, and whether it is a class id's Int64List (else its bytes'
    BytesList), as the shard reader decodes it; ("", False) where the compiled source can only
    copy it from the same place of every record."""
    kinds = {f.name: k for f, k in tfrecord_objects.codecs(split.dataset.fields)}
    found = []
    for field in fields:
        kind, decode = kinds[field.name], type(kinds[field.name]).tfrecord_decode
        if isinstance(kind, ClassId) and field.shape == () and decode is ClassId.tfrecord_decode:
            integer = np.issubdtype(np.dtype(field.dtype), np.integer)
            found.append((kind.tf_key, True) if integer else ("", False))
        elif decode in (FieldKind.tfrecord_decode, ClassId.tfrecord_decode) and (
            np.dtype(field.stored_dtype) == np.dtype(field.dtype)
        ):
            found.append((kind.tfrecord_raw_key(field) or "", False))
        else:
            found.append(("", False))
    return found


def source(
    passes: Passes, structure: object, rows: int | None, batches: int | None, ahead: bool
) -> tf.data.Dataset:
    """Each iterator's next pass: batches of the fields named in `structure` (a nest of field
    names), shaped as it; `rows` the batch size when every batch has it, `batches` every
    pass's length when known; `ahead`: copy the next batch while one is consumed (where the
    source is the pipeline's last stage, no prefetch after it)."""
    loader, token = passes.loader, secrets.token_hex(8)
    _passes[token] = passes
    split = loader.split
    by_name = {f.name: f for f in passes.fields}
    fields = [by_name[name] for name in tf.nest.flatten(structure)]
    files, bases, strides, framed = _places(split, fields)
    features = _features(split, fields) if split.dataset.format == "tfrecord" else []
    dtypes = [tf.as_dtype(np.dtype(f.dtype)) for f in fields]
    variant = library().packer_passes_dataset(
        dtypes=dtypes,
        shapes=[list(f.shape) for f in fields],
        rows=-1 if rows is None else rows,
        files=files,
        bases=bases,
        strides=strides,
        firsts=[int(first) for first in split.offsets],
        callback=CALLBACK,
        token=token,
        batches=-2 if batches is None else batches,  # -2: unknown
        framed=framed,
        ahead=ahead,
        keys=[key for key, _ in features] or [""] * len(fields),
        varints=[int(varint) for _, varint in features] or [0] * len(fields),
    )
    specs = [tf.TensorSpec([rows, *f.shape], d) for f, d in zip(fields, dtypes, strict=True)]
    return tf.data.experimental.from_variant(variant, tf.nest.pack_sequence_as(structure, specs))


def _places(split: object, fields: list[Field]) -> tuple[list, list, list, list]:
    """Every shard field's file, its record 0's byte (npy) or its byte in every record's data
    where it sits at one (tfrecord; else -1: found by its key), the bytes between records
    (npy), shard-major; and whether each shard is TFRecord records (1) or npy files (0)."""
    root = Path(split.dataset.local_root) / split.name
    if split.dataset.format == "npy":
        files = [root / npy.file_name(s["name"], f.name) for s in split.shards for f in fields]
        bases = [npy.HEADER_BYTES] * len(files)
        strides = [f.nbytes for _ in split.shards for f in fields]
        return [str(f) for f in files], bases, strides, [0] * len(split.shards)
    files, bases = [], []
    options = split.dataset.format_options
    for s, shard in zip(split.shards, split.reader.shards, strict=True):
        offsets = shard.raw_layout()[2] if s["count"] else {f.name: 0 for f in fields}
        files += [str(root / tfrecord.file_name(s["name"], options))] * len(fields)
        bases += [offsets.get(f.name, -1) for f in fields]
    return files, bases, [0] * len(files), [1] * len(split.shards)
