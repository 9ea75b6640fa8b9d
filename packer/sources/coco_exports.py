"""COCO as the annotation tools export it: CVAT (`images/` + `annotations/instances_<subset>
.json`) and Roboflow (`<split>/_annotations.coco.json` beside each split's images, `valid/` for
val, a placeholder category named after the project that no annotation uses). Both read as the
COCO layout does (`coco.scan_files`): semantic masks by default, objects with --task. Label
Studio (`result.json` beside `images/`) packs its objects by default: its annotations are boxes
and polygons drawn for detection."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from ..errors import SourceError
from ..flags import flag
from .coco import scan_files
from .coco_files import ANNOTATIONS, ROBOFLOW_JSON, JsonFile, found_files, read_json, split_name
from .model import AnnotationOptions, Found, Tree, join

ROBOFLOW_SPLITS = {"train": "train", "valid": "val", "val": "val", "test": "test"}


class Cvat:
    """CVAT's "COCO 1.0" export: every subset's JSON lists images under `images/`."""

    NAME = "coco-cvat"
    LOOKED_FOR = "images/ + annotations/instances_<subset>.json (CVAT's COCO export)"

    @staticmethod
    def files(tree: Tree) -> list[JsonFile]:
        if "images" not in tree[""].dirs:
            return []
        return [
            JsonFile(
                f.path, f.shown, "train" if f.stem == "default" else split_name(f.stem), f.stem
            )
            for f in found_files(tree, "instances")
            if f.stem not in tree[""].dirs
        ]

    @classmethod
    def detect(cls, tree: Tree, annotations: AnnotationOptions) -> str | None:
        files = [] if annotations.coco else cls.files(tree)
        if not files:
            return None
        shown = ", ".join(f.shown for f in files)
        return f"CVAT's COCO export: images/ + {shown} (subset default read as train)"

    @classmethod
    def scan(cls, root: Path, tree: Tree, annotations: AnnotationOptions) -> Found:
        loaded = [(f, read_json(root, f), "images") for f in cls.files(tree)]
        found = scan_files(root, loaded, tree, annotations, cls.NAME)
        found.why = f"{cls.detect(tree, annotations)}; {found.why}"
        return found


class Roboflow:
    """Roboflow's COCO export: a `_annotations.coco.json` in each split folder, beside its
    images (`file_name`s relative to that folder)."""

    NAME = "coco-roboflow"
    LOOKED_FOR = "<split>/_annotations.coco.json beside the images (Roboflow's COCO export)"

    @staticmethod
    def files(tree: Tree) -> list[JsonFile]:
        return [
            JsonFile(Path(join(d, ROBOFLOW_JSON)), join(d, ROBOFLOW_JSON), ROBOFLOW_SPLITS[d], d)
            for d in tree[""].dirs
            if d in ROBOFLOW_SPLITS and ROBOFLOW_JSON in tree.get(d, tree[""]).files
            and d != ANNOTATIONS
        ]  # fmt: skip

    @classmethod
    def detect(cls, tree: Tree, annotations: AnnotationOptions) -> str | None:
        files = [] if annotations.coco else cls.files(tree)
        if not files:
            return None
        valid = " (valid/ read as val)" if any(f.stem == "valid" for f in files) else ""
        return "Roboflow's COCO export: " + ", ".join(f.shown for f in files) + valid

    @classmethod
    def scan(cls, root: Path, tree: Tree, annotations: AnnotationOptions) -> Found:
        loaded = [(f, read_json(root, f), f.stem) for f in cls.files(tree)]
        found = scan_files(root, loaded, tree, annotations, cls.NAME)
        found.why = f"{cls.detect(tree, annotations)}; {found.why}"
        return found


class LabelStudio:
    """Label Studio's COCO export: `result.json` beside `images/`, its `file_name`s relative
    to the JSON's folder (`images/<name>.jpg`). Its annotations are mostly boxes (rectangle
    labels) and polygons, so auto packs its objects (detection, or instances when any
    annotation has a segmentation) rather than semantic masks."""

    NAME = "coco-labelstudio"
    LOOKED_FOR = "result.json (COCO) beside images/ (Label Studio's COCO export)"
    JSON = "result.json"

    @classmethod
    def files(cls, tree: Tree) -> list[JsonFile]:
        """Its JSON, split "" (the export has none: train, or --split's fractions)."""
        if "images" not in tree[""].dirs or cls.JSON not in tree[""].files:
            return []
        return [JsonFile(Path(cls.JSON), cls.JSON, "", "")]

    @classmethod
    def detect(cls, tree: Tree, annotations: AnnotationOptions) -> str | None:
        if annotations.coco or not cls.files(tree):
            return None
        return f"Label Studio's COCO export: {cls.JSON} beside images/"

    @classmethod
    def scan(cls, root: Path, tree: Tree, annotations: AnnotationOptions) -> Found:
        files = cls.files(tree)
        if not files:
            raise SourceError(
                f"{flag('layout', cls.NAME)}: {root} has no Label Studio export "
                f"(looked for {cls.LOOKED_FOR})"
            )
        loaded = [(f, read_json(root, f), "") for f in files]
        task, task_why = _objects_task(loaded, annotations.task)
        found = scan_files(root, loaded, tree, replace(annotations, task=task), cls.NAME)
        found.why = f"{cls.detect(tree, annotations)}; {found.why}"
        found.task_why = found.task_why or task_why
        return found


def _objects_task(loaded: list[tuple[JsonFile, dict, str]], asked: str) -> tuple[str, str]:
    """Under auto, the objects an export's annotations hold: instances when any has a
    segmentation, else detection; any other task as asked. The task and why."""
    if asked != "auto":
        return asked, ""
    drawn = sum(
        isinstance(a, dict) and a.get("segmentation") not in ([], None, {})
        for _, data, _ in loaded
        for a in data.get("annotations", [])
    )
    if drawn:
        return "instances", (
            f"auto: {drawn:,} annotations have a segmentation: instances; "
            f"{flag('task', 'detection')} packs the boxes only, "
            f"{flag('task', 'segmentation')} semantic masks"
        )
    return "detection", (
        f"auto: boxes only (no segmentation): detection; {flag('task', 'instances')} needs "
        "segmentations"
    )
