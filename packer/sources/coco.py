"""The COCO instances layout: `annotations/instances_<split>.json` beside `<split>/` images,
or JSON files named with `--coco` for the images in SRC.

Categories sorted by id become classes 1..K after `background` (0), as in torchvision's
segmentation reference. Each image becomes a sample whose mask is a `CocoInstances` recipe
holding that image's annotations only, so a worker never holds the index. Annotations that
cannot be drawn reject their image with the annotation's id; an annotation of an image that
is not listed is reported on its own. `annotations/person_keypoints_<split>.json` files are
read where there is no instances file (or with --task keypoints); JSONs whose categories name
keypoints pack as keypoints under auto (`coco_objects`).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from .. import storage
from ..errors import LabelError, SourceError
from ..flags import flag
from . import coco_objects
from .coco_files import (
    ROBOFLOW_JSON,
    JsonFile,
    annotations_by_image,
    class_table,
    drop_placeholder,
    found_files,
    image_files,
    read_json,
    split_name,
)
from .coco_masks import CocoInstances, shape_of
from .model import AnnotationOptions, Found, Rejection, Tree
from .objects import TASKS
from .recipes import digest_of

NAME = "coco"
LOOKED_FOR = (
    "annotations/instances_<split>.json (or person_keypoints_<split>.json) beside <split>/ "
    "image folders, or --coco FILE"
)


def _beside(tree: Tree, task: str) -> list[JsonFile]:
    """The layout's JSONs with their image folder: instances files, or the person_keypoints
    files when the task is keypoints or there is no instances file."""
    instances = [f for f in found_files(tree, "instances") if f.stem in tree[""].dirs]
    if instances and task != "keypoints":
        return instances
    return [f for f in found_files(tree, "person_keypoints") if f.stem in tree[""].dirs]


def detect(tree: Tree, annotations: AnnotationOptions) -> str | None:
    """Why the source is COCO instances (their JSON files, or --coco given), or None."""
    if annotations.coco:
        return "COCO instances: " + ", ".join(path for _, path in annotations.coco)
    files = _beside(tree, annotations.task)
    return "COCO instances: " + ", ".join(f.shown for f in files) if files else None


def scan(root: Path, tree: Tree, annotations: AnnotationOptions) -> Found:
    """Every image of every instances JSON, with its annotations as a mask recipe."""
    files = (
        _given_files(annotations)
        if annotations.coco
        else _layout_files(root, tree, annotations.task)
    )
    loaded = [(f, read_json(root, f), "" if annotations.coco else f.stem) for f in files]
    found = scan_files(root, loaded, tree, annotations, NAME)
    if not annotations.coco:
        found.notes += [
            f"{f.shown}: no {f.stem}/ image folder beside annotations/, not packed"
            for f in found_files(tree, "instances")
            if f.stem not in tree[""].dirs
        ]
    return found


def scan_files(
    root: Path,
    loaded: list[tuple[JsonFile, dict, str]],
    tree: Tree,
    annotations: AnnotationOptions,
    layout: str,
) -> Found:
    """The samples of COCO JSONs, each with the folder (under SRC) its images' `file_name`s
    start from: semantic masks (segmentation) or objects (detection, instances) as asked."""
    for file, data, _ in loaded:
        if file.path.name == ROBOFLOW_JSON:
            drop_placeholder(data)
    named = any(coco_objects.has_keypoints(d.get("categories")) for _, d, _ in loaded)
    if annotations.task == "auto" and named:
        found = coco_objects.scan_objects(
            root, loaded, tree, replace(annotations, task="keypoints")
        )
        found.layout = layout
        found.task_why = (
            "auto: the categories name keypoints (person keypoints): each object's box, class "
            f"and keypoints; {flag('task', 'detection')} packs their boxes only"
        )
        return found
    if annotations.task in TASKS:
        found = coco_objects.scan_objects(root, loaded, tree, annotations)
        found.layout = layout
        _note_panoptic(tree, found)
        return found
    if annotations.task not in ("auto", "segmentation"):
        raise SourceError(
            f"{flag('task', annotations.task)}: COCO instances give segmentation, detection "
            "or instances"
        )
    found = Found(layout, "segmentation", LOOKED_FOR, split_origin="COCO annotation files")
    found.table, classes = class_table(
        [(f, d["categories"]) for f, d, _ in loaded], background=True
    )
    counts = []
    for file, data, folder in loaded:
        images = image_files(root, data, file, tree, folder, found.rejected)
        per_image = annotations_by_image(data, file, found.rejected)
        for image_id, (rel, height, width) in images.items():
            mine = per_image.get(image_id, [])
            drawn = [a for a in mine if a.get("segmentation") != []]  # [] draws nothing
            try:
                shapes = tuple(shape_of(a, _class_of(a, classes), height, width) for a in drawn)
            except LabelError as exc:
                found.rejected.append(Rejection(rel, str(exc)))
                continue
            recipe = CocoInstances(
                file.shown,
                image_id,
                height,
                width,
                shapes,
                digest_of(
                    [height, width]
                    + [
                        [a.get(k) for k in ("id", "category_id", "iscrowd", "segmentation")]
                        for a in mine
                    ]
                ),
                annotations.overlap,
                annotations.crowd,
            )
            found.items.append((rel, file.split, recipe, None))
        listed = len(data.get("annotations", []))
        counts.append(f"{file.shown}, {len(images):,} images, {listed:,} annotations")
    found.why = "COCO instances: " + "; ".join(counts)
    found.notes += coco_objects.boxes_only_note([(f, d) for f, d, _ in loaded])
    if annotations.task == "auto":
        found.notes.append(
            "semantic masks by default; --task detection packs each object's box and label, "
            "--task instances a mask per object too"
        )
    _note_panoptic(tree, found)
    return found


def _layout_files(root: Path, tree: Tree, task: str) -> list[JsonFile]:
    """The instances JSONs whose image folder is there; an error when there is none."""
    files = _beside(tree, task)
    if not files:
        raise SourceError(
            f"{flag('layout', NAME)}: {root} has no COCO instances layout (looked for {LOOKED_FOR})"
        )
    return files


def _given_files(annotations: AnnotationOptions) -> list[JsonFile]:
    """--coco files: split as given, else from the file name (instances_val2017 -> val)."""
    files, splits = [], set()
    for split, path in annotations.coco:
        location = storage.as_path(path).expanduser()
        location = location if storage.is_url(location) else location.resolve()
        stem = location.stem.removeprefix("instances_").removeprefix("person_keypoints_")
        name = split or (split_name(stem) if stem != location.stem else "train")
        if name in splits:
            raise SourceError(f"two {flag('coco')} files for split {name!r}: name each split")
        splits.add(name)
        files.append(JsonFile(location, str(path), name, stem))
    return files


def _class_of(annotation: dict, classes: dict[int, int]) -> int:
    category = annotation.get("category_id")
    if category not in classes:
        raise LabelError(
            f"annotation {annotation.get('id')}: category {category} is not in categories"
        )
    return classes[category]


def _note_panoptic(tree: Tree, found: Found) -> None:
    if found_files(tree, "panoptic"):
        found.why += " (panoptic JSONs too: --layout coco-panoptic packs those)"
