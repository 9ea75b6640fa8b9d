"""The remote storage backend: object stores and other fsspec file systems (s3://, gs://, ...).

The same functions as `storage.local`, over fsspec, so that a pack, its sources and its
manifest can live in a bucket. Objects appear only complete: a file is written to a local
temporary file first, then sent in one upload (a single PUT, or a multipart upload that the
store assembles only when it completes), so nobody ever sees half an object. The lock is an
object holding its owner (host, pid) and a heartbeat time.

Credentials and endpoints come only from the usual places (for S3: AWS_* variables,
AWS_PROFILE, ~/.aws/config and credentials, instance roles; for any fsspec protocol:
FSSPEC_<PROTOCOL>_<OPTION> variables and fsspec's config files). packer never takes them as
options and never prints them.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import os
import tempfile
from collections.abc import Iterable, Iterator
from datetime import datetime
from pathlib import Path

from ..errors import StorageError
from . import lock_object
from .local import COPY_BLOCK, FileInfo, HashingWriter, open_in_place, write_hashed
from .url import url_scheme

STREAM_BLOCK = 1 << 20  # bytes per read of a streamed GET: 1 MB beat 4 MB by ~15% on moto

_INSTALL = {"s3": "s3fs", "gs": "gcsfs", "gcs": "gcsfs", "hf": "huggingface_hub"}
_PIP = {"hf": "huggingface_hub"}  # what to pip install for a backend packer[remote] lacks
_REMOTE = "'packer[remote]'"
_CREDENTIAL_HINT = {
    "s3": "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, AWS_PROFILE, ~/.aws/credentials "
    "or an instance role",
    "gs": "GOOGLE_APPLICATION_CREDENTIALS or `gcloud auth application-default login`",
}


def filesystem(url: str):
    """The fsspec file system of `url`'s protocol, configured from the environment alone."""
    scheme = url_scheme(url) or "file"
    try:
        import fsspec

        return fsspec.filesystem(scheme, use_listings_cache=False)
    except ImportError as exc:
        package = _INSTALL.get(scheme, f"an fsspec backend for {scheme}://")
        hint = f"need {package}, which is not installed (pip install {_PIP.get(scheme, _REMOTE)})"
        raise StorageError(f"{url}: remote paths ({scheme}://) {hint}: {exc}") from None


def _bucket(url: str) -> str:
    """The bucket (first path component) of a URL."""
    return url.split("://", 1)[1].split("/", 1)[0]


def _translate(url: str, exc: BaseException) -> BaseException:
    """A clear one-line error for what a remote store says; other errors pass through."""
    scheme = url_scheme(url) or "file"
    name = type(exc).__name__
    text = str(exc)
    if "Credentials" in name or "Unable to locate credentials" in text:
        hint = _CREDENTIAL_HINT.get(scheme, "the environment or the fsspec configuration")
        return StorageError(f"{url}: no credentials for {scheme}:// found (set them via {hint})")
    if isinstance(exc, FileNotFoundError) and _no_bucket(exc):
        return StorageError(f"{url}: the bucket {_bucket(url)!r} does not exist")
    if isinstance(exc, PermissionError):
        return StorageError(f"{url}: access denied ({text or name})")
    if isinstance(exc, OSError | StorageError):
        return exc
    if "EndpointConnectionError" in name or "ClientConnectorError" in name:
        return StorageError(f"{url}: cannot reach the {scheme}:// endpoint ({text})")
    return exc


def clear_errors(function):
    """Turn a store's credential, bucket and permission errors into one-line StorageErrors."""

    @functools.wraps(function)
    def wrapper(url, *args, **kwargs):
        try:
            return function(url, *args, **kwargs)
        except Exception as exc:
            translated = _translate(str(url), exc)
            if translated is exc:
                raise
            raise translated from None

    return wrapper


@clear_errors
def read_bytes(url: str) -> bytes:
    return filesystem(url).cat_file(url)


@clear_errors
def read_text(url: str) -> str:
    return read_bytes(url).decode("utf-8")


def _mtime_ns(info: dict) -> int:
    """An object's modification time in ns, whole seconds (as listings and HEADs agree); where
    the store keeps none (the Hub), a number of its content's id: a same-size swap shows."""
    for key in ("LastModified", "mtime", "last_modified", "updated", "created"):
        value = info.get(key)
        if value is None:
            continue
        if hasattr(value, "timestamp"):
            value = value.timestamp()
        elif isinstance(value, str):
            value = datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
        return int(float(value)) * 10**9
    tag = info.get("blob_id") or (info.get("lfs") or {}).get("sha256")
    return int(hashlib.sha256(str(tag).encode()).hexdigest()[:15], 16) if tag else 0


@clear_errors
def read_with_stat(url: str) -> tuple[bytes, int, int]:
    """An object's bytes with its size and time. S3: one GET, whose answer dates the very
    bytes it carries (s3fs's cat_file alone asks a HEAD first; packs read every source this
    way). Elsewhere the time is taken first, so a later change shows as a newer time."""
    fs = filesystem(url)
    if hasattr(fs, "_call_s3"):

        async def whole(answer: dict) -> tuple[bytes, object]:
            return await answer["Body"].read(), answer["LastModified"]

        data, modified = _s3_get_object(fs, url, whole)
        return data, len(data), _mtime_ns({"LastModified": modified})
    info = fs.info(url)
    data = fs.cat_file(url)
    return data, len(data), _mtime_ns(info)


def _s3_get_object(fs, url: str, consume):
    """One GET of an S3 object, its answer (headers and body stream) handed to the coroutine
    `consume`, with s3fs's retries (a retry asks and consumes again) and its translation of
    S3's errors (a missing key: FileNotFoundError)."""
    from fsspec.asyn import sync
    from s3fs.core import _error_wrapper

    bucket, key, version = fs.split_path(url)
    extra = {"VersionId": version} if version else {}

    async def get():
        answer = await fs._call_s3("get_object", Bucket=bucket, Key=key, **extra)
        try:
            return await consume(answer)
        finally:
            answer["Body"].close()

    return sync(fs.loop, _error_wrapper, get, retries=fs.retries)


@clear_errors
def read_head_tail(url: str, head: int, tail: int) -> tuple[bytes, bytes]:
    fs = filesystem(url)
    size = int(fs.info(url)["size"])
    if size <= head + tail:
        return fs.cat_file(url), b""
    return fs.cat_file(url, start=0, end=head), fs.cat_file(url, start=size - tail, end=size)


@clear_errors
def stat(url: str) -> tuple[int, int] | None:
    try:
        info = filesystem(url).info(url)
    except FileNotFoundError as exc:
        if _no_bucket(exc):
            raise
        return None
    if info.get("type") != "file":
        return None
    return int(info["size"]), _mtime_ns(info)


STAT_ONE_BY_ONE = 64  # fewer files than this are asked one by one, more through one listing


@clear_errors
def stat_many(root: str, rels) -> dict[str, tuple[int, int] | None]:
    """`stat` of many objects under `root`: one recursive listing rather than a request each."""
    rels = list(rels)
    if len(rels) < STAT_ONE_BY_ONE:
        return {rel: stat(f"{root.rstrip('/')}/{rel}") for rel in rels}
    fs = filesystem(root)
    top = fs._strip_protocol(root).rstrip("/") + "/"
    try:
        listing = fs.find(root, detail=True)
    except FileNotFoundError:
        listing = {}
    found = {
        name[len(top) :]: (int(info["size"]), _mtime_ns(info))
        for name, info in listing.items()
        if name.startswith(top) and info.get("type") == "file"
    }
    return {rel: found.get(rel) for rel in rels}


def free_space(url: str) -> int | None:
    """Object stores have no free space to check."""
    return None


@clear_errors
def exists(url: str) -> bool:
    return filesystem(url).exists(url)


@clear_errors
def is_file(url: str) -> bool:
    return _kind(url) == "file"


@clear_errors
def is_dir(url: str) -> bool:
    return _kind(url) == "directory"


def _kind(url: str) -> str | None:
    """ "file", "directory" or None (absent). Not fsspec's isfile/isdir: they answer False for
    any error, a missing credential included."""
    try:
        return filesystem(url).info(url)["type"]
    except FileNotFoundError as exc:
        if _no_bucket(exc):
            raise
        return None


def _no_bucket(exc: BaseException) -> bool:
    text = str(exc)
    return "bucket does not exist" in text.lower() or "NoSuchBucket" in text


@clear_errors
def file_size(url: str) -> int:
    return int(filesystem(url).info(url)["size"])


@clear_errors
def list_dir(url: str) -> list[str]:
    """Names under a prefix (not recursive), sorted; an empty list where nothing is."""
    return sorted(name for name, _ in scan_dir(url))


@clear_errors
def scan_dir(url: str) -> list[tuple[str, bool]]:
    """(name, is_folder) of each entry under a prefix; empty where nothing is (a bucket that
    does not exist is an error)."""
    fs = filesystem(url)
    try:
        entries = fs.ls(url, detail=True)
    except FileNotFoundError:
        if not fs.exists(f"{url.split('://', 1)[0]}://{_bucket(url)}"):
            raise FileNotFoundError(f"NoSuchBucket: {_bucket(url)}") from None
        return []
    own = fs._strip_protocol(url).rstrip("/")
    found = []
    for entry in entries:
        name = entry["name"].rstrip("/")
        if name == own:
            continue
        found.append((name.rsplit("/", 1)[-1], entry["type"] == "directory"))
    return found


def make_dirs(url: str) -> None:
    """Object stores have no folders: a key's prefix exists once an object is under it."""


@clear_errors
def remove(url: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        filesystem(url).rm_file(url)


@clear_errors
def remove_tree(url: str) -> None:
    fs = filesystem(url)
    with contextlib.suppress(FileNotFoundError):
        if fs.exists(url):
            fs.rm(url, recursive=True)


@clear_errors
def sha256_file(url: str) -> tuple[int, str]:
    """Size and SHA-256 of an object, streamed in large blocks."""
    digest = hashlib.sha256()
    size = 0
    with filesystem(url).open(url, "rb", block_size=COPY_BLOCK, cache_type="none") as f:
        while block := f.read(COPY_BLOCK):
            digest.update(block)
            size += len(block)
    return size, digest.hexdigest()


@clear_errors
def walk_files(url: str, prefix: str) -> Iterator[str]:
    """URLs of objects under `url` whose name starts with `prefix`."""
    fs = filesystem(url)
    try:
        found = fs.find(url)
    except FileNotFoundError:
        return iter(())
    return iter([fs.unstrip_protocol(p) for p in found if p.rsplit("/", 1)[-1].startswith(prefix)])


def relative(url: str, root: str) -> str:
    """`url` relative to `root`, POSIX separators."""
    root = root.rstrip("/") + "/"
    if not url.startswith(root):
        raise ValueError(f"{url} is not under {root}")
    return url[len(root) :]


@clear_errors
def write_atomic(url: str, root: str, head: bytes, parts: Iterable[Path | bytes]) -> FileInfo:
    """Write `head` then each part to a local temporary file, hashing, then upload it whole."""
    with tempfile.NamedTemporaryFile(prefix="packer-upload-", delete=False) as tmp:
        try:
            size, sha256 = write_hashed(tmp, head, parts)
            tmp.close()
            upload(Path(tmp.name), url)
        finally:
            with contextlib.suppress(OSError):
                os.unlink(tmp.name)
    return FileInfo(relative(url, root), size, sha256)


@clear_errors
def upload(local: Path, url: str) -> None:
    """Send a finished local file as one object (multipart when large); the object appears
    only when the whole upload completes. Checks the stored size."""
    fs = filesystem(url)
    fs.put_file(os.fspath(local), url)
    stored = int(fs.info(url)["size"])
    expected = os.path.getsize(local)
    if stored != expected:
        raise StorageError(f"{url}: uploaded {expected} bytes but the store holds {stored}")


@clear_errors
def download(url: str, local: Path) -> tuple[int, str]:
    """Copy an object to a local file (the caller writes under a temporary name), hashing it
    as it passes. S3: one streamed GET (s3fs's get_file asks a HEAD first, and its cat_file
    splits a large object into ranged GETs: 0.3-0.5x this rate from a local server)."""
    fs = filesystem(url)
    with open_in_place(local) as out:
        if hasattr(fs, "_call_s3"):

            async def to_file(answer: dict) -> tuple[int, str]:
                out.seek(0)
                writer = HashingWriter(out)
                while block := await answer["Body"].read(STREAM_BLOCK):
                    writer.write(block)
                return writer.result()

            found = _s3_get_object(fs, url, to_file)
        else:
            with fs.open(url, "rb", block_size=COPY_BLOCK, cache_type="none") as f:
                found = write_hashed(out, b"", iter(lambda: f.read(COPY_BLOCK), b""))
        out.truncate()
    return found


@clear_errors
def write_text_atomic(url: str, text: str) -> None:
    """Replace a small object in one PUT (complete or absent)."""
    filesystem(url).pipe_file(url, text.encode("utf-8"))


# --- the lock object (its protocol: storage.lock_object) -----------------------------------


@contextlib.contextmanager
def lock(url: str, holder: str, remove: bool = True, force: bool = False) -> Iterator[None]:
    """Hold a lock object at `url` while the context runs (see storage.lock_object): refused
    while another process holds it, taken over when its owner provably died on this machine,
    broken with `force` once stale. The object is always removed on release (`remove` is for
    the local backend's lock files)."""
    fs = filesystem(url)
    owner = _acquire(url, fs, holder, force)
    beat = lock_object.Heartbeat(fs, url, owner)
    beat.start()
    try:
        yield
    finally:
        beat.stop()
        lock_object.release(fs, url, owner)


@clear_errors
def _acquire(url: str, fs, holder: str, force: bool) -> dict:
    return lock_object.acquire(fs, url, holder, force)
