"""Where a pack may go: checks on OUT made before anything is scanned or written.

A pack is written beside its sources, never among them: an OUT that is a source folder (or
holds one) would mix shards with images, and `--overwrite` would then delete pack-named files
there; SRC could not be packed again either, since it now holds a pack. An empty OUT, a URL
naming no bucket and an OUT that is a file are refused with what to do instead, before the
storage layer fails on them with a message about something else.
"""

from __future__ import annotations

import os
from pathlib import PurePath, PurePosixPath

from .. import storage
from ..errors import PackError
from ..flags import flag


def check_out(
    src: str | os.PathLike,
    out: str | os.PathLike,
    *,
    root: str | os.PathLike | None = None,
    masks: str | os.PathLike | None = None,
) -> None:
    """Refuse an OUT that is empty, a URL without a bucket, a file, or a source folder (SRC,
    the folder of a list file, `root`, `masks`) or a folder holding one. Only local paths are
    looked at on disk: a remote OUT is checked by its URL alone."""
    text = os.fspath(out)
    if not text.strip():
        raise PackError(
            f"{flag('out')} is empty; name a folder (without {flag('out')} the pack goes "
            "beside SRC)"
        )
    if storage.is_url(text) and not text.split("://", 1)[1].strip("/"):
        scheme = storage.scheme(text)
        raise PackError(
            f"{flag('out', text)}: the URL names no bucket; give one, e.g. {scheme}://BUCKET/FOLDER"
        )
    if not storage.is_url(text) and storage.is_file(text):
        raise PackError(
            f"{flag('out', text)} is a file; {flag('out')} names the folder a pack is written "
            "into: choose a folder"
        )
    target = _absolute(text)
    for folder in _source_folders(src, root, masks):
        if target == folder or _inside(folder, target):
            what = "is" if target == folder else "holds"
            raise PackError(
                f"{flag('out', text)} {what} the source folder {_shown(folder)}; a pack is written "
                f"beside its sources, never among them: choose another {flag('out')} (without "
                "it the pack goes beside SRC)"
            )


def _source_folders(src, root, masks) -> list[PurePath]:
    """The folders whose files the pack reads: SRC (a list file's own folder), root, masks."""
    src_text = os.fspath(src)
    folders = [_absolute(src_text)]
    if not storage.is_url(src_text) and storage.is_file(src_text):
        folders = [folders[0].parent]
    folders += [_absolute(os.fspath(p)) for p in (root, masks) if p is not None]
    return folders


def _absolute(text: str) -> PurePath:
    """A comparable form of a path or URL: links resolved for local paths."""
    if storage.is_url(text):
        return PurePosixPath(text.rstrip("/"))
    return storage.as_path(text).expanduser().resolve()


def _shown(folder: PurePath) -> str:
    """A folder as the user wrote it: a URL's `//` (which PurePosixPath collapses) put back."""
    if type(folder) is PurePosixPath:  # a URL's comparable form (local paths are Paths)
        scheme, _, rest = str(folder).partition(":/")
        return f"{scheme}://{rest}"
    return str(folder)


def _inside(path: PurePath, folder: PurePath) -> bool:
    """Whether `path` lies inside `folder` (a URL only ever inside a URL of its scheme)."""
    if type(path) is not type(folder):
        return False
    return folder in path.parents
