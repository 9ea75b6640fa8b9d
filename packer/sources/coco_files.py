"""What COCO's instances and panoptic layouts share: finding the JSON files, naming splits,
reading a JSON, the categories as a class table, and each image's file and size.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from .. import storage
from ..errors import SourceError
from ..labels import ClassInfo, ClassTable
from .model import Rejection, Tree, join

ANNOTATIONS = "annotations"
_JSON_PEEK = 1 << 16  # bytes read from each end of a JSON to tell whether it is COCO-like


@dataclass(frozen=True)
class JsonFile:
    """One annotation file of a split: where it is, as shown, and the split it names."""

    path: Path  # to read
    shown: str  # relative to SRC when inside it, else as given
    split: str
    stem: str  # `train2017` of `instances_train2017.json`: the images' folder


def split_name(stem: str) -> str:
    """`train2017` -> `train`; names without a year stay as they are."""
    return re.sub(r"(?<=[a-z])\d{4}$", "", stem) or stem


def found_files(tree: Tree, prefix: str) -> list[JsonFile]:
    """`annotations/<prefix>_<split>.json` files in the tree, by name (paths relative)."""
    node = tree.get(ANNOTATIONS)
    if node is None:
        return []
    files = []
    for name in node.files:
        if name.startswith(f"{prefix}_") and name.lower().endswith(".json"):
            stem = name[len(prefix) + 1 : -5]
            rel = join(ANNOTATIONS, name)
            files.append(JsonFile(Path(rel), rel, split_name(stem), stem))
    return files


def coco_like(root: Path, name: str) -> bool:
    """Whether the file `name` in root is a JSON that reads like COCO (an `images` list beside
    `annotations` or `categories`), from its first and last bytes only."""
    if not name.lower().endswith(".json"):
        return False
    head, tail = storage.read_head_tail(root / name, _JSON_PEEK, _JSON_PEEK)
    text = (head + tail).decode("utf-8", "replace")
    return '"images"' in text and ('"annotations"' in text or '"categories"' in text)


def read_json(root: Path, file: JsonFile) -> dict:
    """A COCO JSON's content; a SourceError naming it when it is unreadable or no COCO file."""
    path = file.path if file.path.is_absolute() or storage.is_url(file.path) else root / file.path
    try:
        data = json.loads(storage.read_bytes(path))
    except (OSError, ValueError) as exc:
        raise SourceError(f"cannot read {file.shown}: {exc}") from None
    if not isinstance(data, dict) or not isinstance(data.get("images"), list):
        raise SourceError(f"{file.shown} is no COCO annotation file (no 'images' list)")
    if not isinstance(data.get("categories"), list):
        raise SourceError(f"{file.shown} has no 'categories' list")
    return data


def class_table(
    per_file: list[tuple[JsonFile, list]], background: bool
) -> tuple[ClassTable, dict[int, int]]:
    """The categories sorted by id as classes (after a `background` class 0 when asked), and
    category id -> class id. Every file must list the same categories."""
    first_file, first = per_file[0]
    wanted = _categories(first_file, first)
    for file, categories in per_file[1:]:
        if _categories(file, categories) != wanted:
            raise SourceError(
                f"{file.shown} and {first_file.shown} list different categories; pack them "
                "separately or make their categories agree"
            )
    names = ["background"] * background + [name for _, name in wanted]
    index = {cid: i + background for i, (cid, _) in enumerate(wanted)}
    source = f"{first_file.path.name} categories"
    return ClassTable(tuple(ClassInfo(i, n) for i, n in enumerate(names)), source), index


def _categories(file: JsonFile, categories: list) -> list[tuple[int, str]]:
    try:
        return sorted((int(c["id"]), str(c["name"])) for c in categories)
    except (KeyError, TypeError, ValueError):
        raise SourceError(f"{file.shown}: every category needs an 'id' and a 'name'") from None


def image_files(
    root: Path, data: dict, file: JsonFile, tree: Tree, folder: str, rejected: list[Rejection]
) -> dict[int, tuple[str, int, int]]:
    """image id -> (path relative to SRC, height, width) of every listed image that exists;
    the others are rejected with the reason. An image that is not under SRC is looked for
    beside its JSON (a JSON named with --coco outside SRC), and then given by its full path."""
    found = {}
    beside = _json_folder(file)
    for image in data["images"]:
        try:
            image_id, name = int(image["id"]), str(image["file_name"])
            height, width = int(image["height"]), int(image["width"])
        except (KeyError, TypeError, ValueError):
            where = f"{file.shown}#image {image.get('id') if isinstance(image, dict) else '?'}"
            rejected.append(Rejection(where, "needs id, file_name, height and width"))
            continue
        rel = join(folder, name)
        if not _listed(tree, rel) and beside is not None:
            rel = _beside(root, tree, beside, name) or rel
        if not _listed(tree, rel) and not Path(rel).is_absolute():
            rejected.append(Rejection(rel, f"no such image file (listed in {file.shown})"))
            continue
        found[image_id] = (rel, height, width)
    return found


def _listed(tree: Tree, rel: str) -> bool:
    parent, _, base = rel.rpartition("/")
    node = tree.get(parent)
    return node is not None and base in node.files


def _json_folder(file: JsonFile) -> Path | None:
    """The folder of a JSON named with --coco (its images may lie beside it), else None."""
    if not file.path.is_absolute() or storage.is_url(file.path):
        return None
    return file.path.parent


def _beside(root: Path, tree: Tree, beside: Path, name: str) -> str | None:
    """An image beside its JSON: its path relative to SRC when it is inside, else its full
    path when that file exists; None when it is in neither place."""
    path = beside / name
    if path.is_relative_to(root):
        rel = path.relative_to(root).as_posix()
        return rel if _listed(tree, rel) else None
    return str(path) if storage.is_file(path) else None


ROBOFLOW_JSON = "_annotations.coco.json"  # Roboflow's COCO export: one beside each split's images
PLACEHOLDER = "none"  # Roboflow's supercategory of the category named after the dataset


def drop_placeholder(data: dict) -> None:
    """Leave out Roboflow's placeholder category (supercategory "none", used by no
    annotation), which would otherwise become a class."""
    used = {a.get("category_id") for a in data.get("annotations", []) if isinstance(a, dict)}
    data["categories"] = [
        c
        for c in data["categories"]
        if not (
            isinstance(c, dict)
            and c.get("supercategory") == PLACEHOLDER
            and c.get("id") not in used
        )
    ]


def annotations_by_image(data: dict, file: JsonFile, rejected: list[Rejection]) -> dict:
    """image id -> its annotations in the file's order; those of unlisted images reported."""
    listed = {image.get("id") for image in data["images"] if isinstance(image, dict)}
    found: dict = {}
    for a in data.get("annotations", []):
        image_id = a.get("image_id") if isinstance(a, dict) else None
        if image_id not in listed:
            where = f"{file.shown}#annotation {a.get('id') if isinstance(a, dict) else '?'}"
            rejected.append(Rejection(where, f"image_id {image_id} is not in images"))
            continue
        found.setdefault(image_id, []).append(a)
    return found
