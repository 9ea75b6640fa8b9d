"""A YOLO `data.yaml` read as Ultralytics' `check_det_dataset` reads it (its `names` and `nc`
in `packer.yaml_names`, which `--classes data.yaml` shares), `kpt_shape`, `flip_idx` and
`kpt_names` of pose datasets, and the `train`/`val`/`test` entries (a folder, a .txt list of
images, or a list of those) relative to `path` or to the yaml's own folder, with Roboflow's
`../train/images` read as `train/images` when the former is not there.
"""

from __future__ import annotations

import contextlib
import posixpath
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from ..errors import SourceError
from ..fields.keypoints import Skeleton, check_flip_order, flip_order_of
from .model import Found, Rejection, Tree, is_image, join
from .walk import read_text

YAML_FILES = ("data.yaml", "data.yml")
NAMES_FILES = ("classes.txt", "obj.names")  # names files of YOLO tools (LabelImg, darknet)
SPLIT_KEYS = ("train", "val", "test")


@dataclass(frozen=True)
class ImageSource:
    """Where a split's images are: a folder (every image below it), or the images a .txt list
    names (`images`, None for a folder); `split` "" means "from the image's folders"."""

    split: str
    folder: str
    shown: str
    images: tuple[str, ...] | None = None


def read_config(root: Path, name: str) -> dict:
    """data.yaml as a mapping; a SourceError naming it when it is no YAML mapping."""
    import yaml  # only YOLO sources need it

    try:
        data = yaml.safe_load(read_text(root / name, name))
    except yaml.YAMLError as exc:
        raise SourceError(f"cannot read {name}: {' '.join(str(exc).split())}") from None
    if not isinstance(data, dict):
        raise SourceError(f"{name}: expected a mapping with names and train/val folders")
    return data


def keypoint_fields(config: dict, name: str) -> int:
    """The fields a pose line adds after its box: K x D of `kpt_shape: [K, D]`, else 0."""
    shape = config.get("kpt_shape")
    if shape is None:
        return 0
    if not (isinstance(shape, list) and len(shape) == 2 and shape[0] > 0 and shape[1] in (2, 3)):
        raise SourceError(f"{name}: kpt_shape must be [keypoints, 2 or 3], not {shape!r}")
    return int(shape[0]) * int(shape[1])


def skeleton(config: dict, name: str) -> Skeleton:
    """The K points of pose labels: their names (`kpt_names`, a list or Ultralytics' mapping
    of a class to its list; else their numbers) and flip order (`flip_idx`, else the one
    `left_*`/`right_*` names imply); a flip_idx that is no permutation stops the pack."""
    count = int(config["kpt_shape"][0])
    given = config.get("kpt_names")
    if isinstance(given, dict) and given:
        given = next(iter(given.values()))
    names = tuple(str(n) for n in given) if isinstance(given, list) else ()
    if len(names) != count:
        names = tuple(str(k) for k in range(count))
    order = config.get("flip_idx")
    if order is None:
        return Skeleton(names, (), flip_order_of(names))
    try:
        flips = check_flip_order(order, count, name)
    except ValueError as exc:
        raise SourceError(str(exc)) from None
    return Skeleton(names, (), () if flips == tuple(range(count)) else flips)


def split_sources(
    root: Path, tree: Tree, config: dict, name: str, found: Found
) -> list[ImageSource]:
    """The image folders (or lists) of each split data.yaml names; entries not found under SRC
    are noted, and a yaml none of whose entries is there is an error."""
    bases = _bases(root, config.get("path"))
    sources, missing = [], []
    for split in SPLIT_KEYS:
        entries = config.get(split)
        for entry in [entries] if isinstance(entries, str) else entries or []:
            rel = _find(root, tree, bases, str(entry))
            if rel is None:
                missing.append(f"{split}: {entry}")
            elif rel in tree:
                sources.append(ImageSource(split, rel, f"{split} {rel or '.'}/"))
            else:
                listed = _listed(root, tree, rel, found)
                sources.append(ImageSource(split, "", f"{split} {rel}", listed))
    if missing:
        found.notes.append(f"{name}: not under SRC, not packed: {'; '.join(missing)}")
    if not sources:
        raise SourceError(
            f"{name} names no image folder that is under {root} ({'; '.join(missing)}); "
            "its train/val entries are read relative to its path: or its own folder"
        )
    return sources


def _bases(root: Path, path: object) -> list[str]:
    """Folders (relative to SRC) that entries may start from: `path`, then the yaml's own."""
    bases = []
    if isinstance(path, str) and path:
        given = PurePosixPath(path.replace("\\", "/"))
        if given.is_absolute():
            with contextlib.suppress(ValueError):
                bases.append(Path(path).resolve().relative_to(root).as_posix())
        else:
            bases.append(posixpath.normpath(given.as_posix()))
    return [("" if b == "." else b) for b in [*bases, ""] if not b.startswith("..")]


def _find(root: Path, tree: Tree, bases: list[str], entry: str) -> str | None:
    """An entry as a folder or file relative to SRC, or None when it is not under SRC."""
    text = entry.replace("\\", "/")
    if PurePosixPath(text).is_absolute():
        try:
            text = Path(text).resolve().relative_to(root).as_posix()
        except ValueError:
            return None
    tries = [text, text[3:]] if text.startswith("../") else [text]
    for base in bases:
        for attempt in tries:
            rel = posixpath.normpath(join(base, attempt))
            rel = "" if rel == "." else rel
            if rel.startswith(".."):
                continue
            parent, _, file = rel.rpartition("/")
            if rel in tree or (parent in tree and file in tree[parent].files):
                return rel
    return None


def _listed(root: Path, tree: Tree, rel: str, found: Found) -> tuple[str, ...]:
    """The images a .txt list names (`./x` relative to the list's folder, as Ultralytics
    reads it); missing ones rejected."""
    folder = rel.rpartition("/")[0]
    images = []
    for number, line in enumerate(read_text(root / rel, rel).splitlines(), 1):
        text = line.strip().replace("\\", "/")
        if not text:
            continue
        path = posixpath.normpath(join(folder, text.removeprefix("./")))
        parent, _, file = path.rpartition("/")
        if path.startswith("..") or not is_image(file):
            found.rejected.append(
                Rejection(f"{rel} line {number}", f"not an image under SRC: {text}")
            )
        elif parent not in tree or file not in tree[parent].files:
            found.rejected.append(Rejection(path, f"listed in {rel} line {number} but missing"))
        else:
            images.append(path)
    return tuple(images)
