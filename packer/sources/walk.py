"""Every filesystem access of a source scan: what a path is, folder listings, small text files.

The layouts work on the in-memory tree this module builds, so serving sources from elsewhere
means changing this module alone. A walk lists each folder once (os.scandir, one stat per
folder, none per file) and never opens an image, so a million files scan in seconds. Sources
at a URL (s3://, gs://, ...) are listed through the storage seam, one listing per folder.
"""

from __future__ import annotations

import os
from operator import attrgetter
from pathlib import Path
from typing import Literal

from .. import storage
from ..errors import SourceError
from .model import PACK_MARKERS, Folder, Rejection, Skips, Tree, join


def locate(src: str | os.PathLike) -> Path:
    """The path a user named (SRC, --masks), with ~ expanded."""
    return storage.as_path(src).expanduser()


def kind(path: Path) -> Literal["file", "folder"] | None:
    """Whether path is a file or a folder; None when it is neither or cannot be seen."""
    if storage.is_url(path):
        return "file" if storage.is_file(path) else "folder" if storage.is_dir(path) else None
    if path.is_file():
        return "file"
    if path.is_dir():
        return "folder"
    return None


def resolve(path: Path) -> Path:
    """The absolute form of path with its links resolved, to use as a scan's root."""
    return path.resolve()


def read_text(path: Path, shown: str, *, encoding: str = "utf-8") -> str:
    """The whole text of a small file (a list, a split file); SourceError naming it as shown."""
    try:
        if storage.is_url(path):
            return storage.read_bytes(path).decode(encoding).replace("\r\n", "\n")
        return path.read_text(encoding=encoding)
    except (OSError, UnicodeDecodeError) as exc:
        raise SourceError(f"cannot read {shown}: {exc}") from None


def folder_key(path: Path) -> tuple[int, int] | None:
    """(device, inode) of a folder, to recognise it under any path; None if it is not one."""
    try:
        info = os.stat(path)
    except OSError:
        return None
    return (info.st_dev, info.st_ino) if os.path.isdir(path) else None


def is_pack(path: Path) -> bool:
    """Whether a folder holds packer output (a manifest or an unfinished pack's work folder)."""
    return any(os.path.lexists(path / marker) for marker in PACK_MARKERS)


def existing_files(top: Path, rels: list[str]) -> set[str]:
    """The given paths under top that are files, reading each folder once, not a stat per file."""
    present: set[str] = set()
    if storage.is_url(top):
        for folder in {rel.rpartition("/")[0] for rel in rels if rel}:
            try:
                entries = storage.scan_dir(top / folder if folder else top)
            except OSError:
                continue
            present.update(join(folder, name) for name, is_dir in entries if not is_dir)
        return present
    for folder in {rel.rpartition("/")[0] for rel in rels if rel}:
        try:
            with os.scandir(top / folder) as entries:
                present.update(join(folder, e.name) for e in entries if e.is_file())
        except OSError:
            continue
    return present


def walk(
    top: Path, starts: list[str], rejected: list[Rejection], skips: Skips | None = None
) -> Tree:
    """Map each folder under top/start to its visible children; each real folder is read once.

    Hidden entries are skipped; unreadable folders, odd entries and folders reached twice
    (symlink loops) are appended to rejected and not followed. Folders in `skips.exclude` and
    packer output folders are not entered, and are named in `skips.skipped`.
    """
    skips = skips or Skips()
    if storage.is_url(top):
        return _walk_url(top, starts, rejected, skips)
    tree: Tree = {}
    seen = set()
    for start in starts:
        info = os.stat(top / start)
        seen.add((info.st_dev, info.st_ino))
    stack = list(starts)
    while stack:
        rel = stack.pop()
        node = tree[rel] = Folder()
        try:
            with os.scandir(top / rel) as entries:
                subdirs = _sort_entries(entries, rel, node, rejected)
        except OSError as exc:
            rejected.append(Rejection(rel or ".", f"cannot read this folder ({exc.strerror})"))
            continue
        for entry in subdirs:
            child = join(rel, entry.name)
            if _first_visit(entry, seen, child, rejected) and not _skipped(top, child, skips):
                node.dirs.append(entry.name)
                stack.append(child)
    return tree


def _sort_entries(entries, rel: str, node: Folder, rejected: list[Rejection]) -> list[os.DirEntry]:
    """File names into node.files (sorted), folder entries returned sorted, hidden ones skipped."""
    subdirs = []
    for entry in entries:
        name = entry.name
        if name.startswith("."):
            continue
        try:
            if entry.is_file():
                node.files.append(name)
                continue
            if entry.is_dir():
                subdirs.append(entry)
                continue
        except OSError:
            pass
        rejected.append(Rejection(join(rel, name), _odd_entry_reason(entry)))
    node.files.sort()
    subdirs.sort(key=attrgetter("name"))
    return subdirs


def _skipped(top: Path, child: str, skips: Skips) -> bool:
    """Whether a folder is left out: the pack's own output folder, or another pack."""
    if skips.exclude and folder_key(top / child) in skips.exclude:
        skips.skipped.append(f"{child}/ (the output folder of this pack)")
        return True
    if is_pack(top / child):
        skips.skipped.append(
            f"{child}/ (a pack made by packer: it holds {' or '.join(PACK_MARKERS)})"
        )
        return True
    return False


def _first_visit(entry: os.DirEntry, seen: set, child: str, rejected: list[Rejection]) -> bool:
    """Record a folder's identity; False (and a rejection) when it was reached before."""
    try:
        info = entry.stat()
    except OSError as exc:
        rejected.append(Rejection(child, f"cannot read this folder ({exc.strerror})"))
        return False
    key = (info.st_dev, info.st_ino)
    if key in seen:
        reason = "folder already scanned under another path (symlink loop or duplicate link)"
        rejected.append(Rejection(child, f"{reason}; not followed"))
        return False
    seen.add(key)
    return True


def _odd_entry_reason(entry: os.DirEntry) -> str:
    """Why an entry is neither a file nor a folder (a broken or looping link, a device...)."""
    if entry.is_symlink():
        return "broken or looping symbolic link"
    return "not a regular file or folder"


def _walk_url(top: Path, starts: list[str], rejected: list[Rejection], skips: Skips) -> Tree:
    """`walk` for sources at a URL: one listing per folder (object stores have no links);
    folders holding a pack are left out, as on disk."""
    tree: Tree = {}
    stack = list(starts)
    while stack:
        rel = stack.pop()
        try:
            entries = storage.scan_dir(top / rel if rel else top)
        except OSError as exc:
            tree[rel] = Folder()
            rejected.append(Rejection(rel or ".", f"cannot read this folder ({exc})"))
            continue
        if rel not in starts and any(name in PACK_MARKERS for name, _ in entries):
            parent, _, name = rel.rpartition("/")
            tree[parent].dirs.remove(name)
            skips.skipped.append(
                f"{rel}/ (a pack made by packer: it holds {' or '.join(PACK_MARKERS)})"
            )
            continue
        node = tree[rel] = Folder()
        for name, is_dir in entries:
            if name.startswith("."):
                continue
            if is_dir:
                node.dirs.append(name)
            else:
                node.files.append(name)
        node.files.sort()
        node.dirs.sort()
        stack.extend(join(rel, name) for name in node.dirs)
    return tree
