"""The COCO panoptic layout: `annotations/panoptic_<split>.json` with its PNGs in
`annotations/panoptic_<split>/`, beside `<split>/` images.

A PNG's segment id is R + 256 G + 256^2 B; each segment's category becomes its class
(categories sorted by id: COCO's 133, no background class). VOID (id 0), ids the JSON does
not list and crowd segments become the ignore index (`crowd="class"` keeps crowds' class).
A sample's mask is a `CocoPanoptic` recipe: its PNG (hashed like any source file) and its
segments' classes (hashed into the shard fingerprint).
"""

from __future__ import annotations

from pathlib import Path

from ..errors import SourceError
from ..flags import flag
from ..labels import IGNORED
from .coco_files import ANNOTATIONS, JsonFile, class_table, found_files, image_files, read_json
from .coco_masks import CocoPanoptic
from .model import AnnotationOptions, Found, Rejection, Tree, join
from .recipes import digest_of

NAME = "coco-panoptic"
LOOKED_FOR = (
    "annotations/panoptic_<split>.json and annotations/panoptic_<split>/*.png beside <split>/ "
    "image folders"
)


def detect(tree: Tree, annotations: AnnotationOptions) -> str | None:
    """Why the source is COCO panoptic (JSON, PNG folder and image folder), or None."""
    files = _files(tree)
    return "COCO panoptic: " + ", ".join(f.shown for f in files) if files else None


def scan(root: Path, tree: Tree, annotations: AnnotationOptions) -> Found:
    """Every image with a panoptic PNG, its segments mapped to classes."""
    if annotations.task not in ("auto", "segmentation"):
        raise SourceError(
            f"{flag('task', annotations.task)}: COCO panoptic PNGs give segmentation; for "
            f"objects pack the instances JSON ({flag('layout', 'coco')})"
        )
    files = _files(tree)
    if not files:
        raise SourceError(
            f"{flag('layout', NAME)}: {root} has no COCO panoptic layout (looked for {LOOKED_FOR})"
        )
    found = Found(NAME, "segmentation", LOOKED_FOR, split_origin="COCO annotation files")
    loaded = [(file, read_json(root, file)) for file in files]
    found.table, classes = class_table([(f, d["categories"]) for f, d in loaded], background=False)
    counts = []
    for file, data in loaded:
        images = image_files(root, data, file, tree, file.stem, found.rejected)
        pngs = join(ANNOTATIONS, f"panoptic_{file.stem}")
        segments = 0
        entries = data.get("annotations", [])
        _note_unsegmented(images, entries, file, found.rejected)
        listed = {i.get("id") for i in data["images"] if isinstance(i, dict)}
        for entry in entries:
            entry = entry if isinstance(entry, dict) else {}
            image = images.get(entry.get("image_id"))
            png = join(pngs, str(entry.get("file_name")))
            if image is None:  # a listed image without its file is rejected already
                if entry.get("image_id") not in listed:
                    where = f"{file.shown}#image {entry.get('image_id')}"
                    found.rejected.append(Rejection(where, "image_id is not in images"))
                continue
            if entry.get("file_name") not in tree[pngs].files:
                found.rejected.append(Rejection(image[0], f"no panoptic PNG {png}"))
                continue
            try:
                mapped = _segments(entry.get("segments_info", []), classes, annotations.crowd)
            except ValueError as exc:
                found.rejected.append(Rejection(image[0], str(exc)))
                continue
            segments += len(mapped)
            recipe = CocoPanoptic(
                file.shown, int(entry["image_id"]), mapped, digest_of(mapped), (png,)
            )
            found.items.append((image[0], file.split, recipe, None))
        counts.append(f"{file.shown}, {len(images):,} images, {segments:,} segments")
    found.why = "COCO panoptic: " + "; ".join(counts)
    return found


def _files(tree: Tree) -> list[JsonFile]:
    """Panoptic JSONs with their PNG folder and their image folder."""
    pngs = tree.get(ANNOTATIONS, None)
    return [
        f
        for f in found_files(tree, "panoptic")
        if pngs is not None and f"panoptic_{f.stem}" in pngs.dirs and f.stem in tree[""].dirs
    ]


def _note_unsegmented(
    images: dict, entries: list, file: JsonFile, rejected: list[Rejection]
) -> None:
    """Listed images that no annotations entry segments are rejected, not lost unseen."""
    segmented = {entry.get("image_id") for entry in entries}
    for image_id, (rel, _, _) in images.items():
        if image_id not in segmented:
            rejected.append(Rejection(rel, f"no segments for it in {file.shown}"))


def _segments(info: list, classes: dict[int, int], crowd: str) -> tuple[tuple[int, int], ...]:
    """(segment id, class id or IGNORED) sorted by id; ValueError for an unknown category."""
    mapped = []
    for segment in info:
        segment = segment if isinstance(segment, dict) else {}
        category, sid = segment.get("category_id"), segment.get("id")
        if not isinstance(sid, int) or sid < 1:
            raise ValueError(f"segment {sid}: needs an id from 1 to 256^3 - 1")
        if category not in classes:
            raise ValueError(f"segment {sid}: category {category} is not in categories")
        ignored = segment.get("iscrowd", 0) and crowd == "ignore"
        mapped.append((sid, IGNORED if ignored else classes[category]))
    return tuple(sorted(mapped))
