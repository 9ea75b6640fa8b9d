"""The Pascal VOC detection layout: `Annotations/<id>.xml` beside `JPEGImages/<id>.jpg`, splits
from `ImageSets/Main/<name>.txt` (any name; `voc_splits`), which `--split` may re-split.

Boxes are converted as Detectron2's `pascal_voc.py` does: VOC's 1-based inclusive pixel
indices become continuous coordinates x1 = xmin - 1, y1 = ymin - 1, x2 = xmax, y2 = ymax;
`difficult` is kept as a flag. Classes come from `--classes FILE` when given, else are the
object names found, sorted. A folder that also holds `SegmentationClass/` stays the
mask-folder (segmentation) layout unless `--task detection` asks for the boxes.
"""

from __future__ import annotations

from pathlib import Path

from ..errors import SourceError
from ..flags import flag
from ..labels import ClassTable
from .model import AnnotationOptions, Found, Rejection, Tree, ext, is_image, join, stem
from .object_layouts import chosen_task, given_names
from .voc_splits import split_lists
from .voc_xml import VocObjects, XmlObject, read_xml

NAME = "voc"
DESCRIPTION = "Pascal VOC detection: Annotations/*.xml + JPEGImages/ (+ ImageSets/Main/)"
LOOKED_FOR = "Annotations/<id>.xml beside JPEGImages/<id>.jpg (splits: ImageSets/Main/<split>.txt)"
TASKS = ("detection",)
SEGMENTATION_FOLDERS = ("SegmentationClass", "SegmentationClassAug")


def detect(tree: Tree, annotations: AnnotationOptions) -> str | None:
    """Why the source is VOC detection (Annotations/*.xml beside JPEGImages/), or None; a VOC
    folder with segmentation masks is left to the mask folders unless detection is asked."""
    bases = _bases(tree)
    if annotations.coco or not bases:
        return None
    if annotations.task in ("auto", "segmentation") and any(_has_masks(tree, b) for b in bases):
        return None
    counts = [sum(ext(n) == ".xml" for n in tree[join(b, "Annotations")].files) for b in bases]
    shown = ", ".join(
        f"{join(b, 'Annotations')}/ ({n:,} XML)" for b, n in zip(bases, counts, strict=True)
    )
    return f"Pascal VOC: {shown} beside JPEGImages/"


def scan(root: Path, tree: Tree, annotations: AnnotationOptions) -> Found:
    """Every annotated image, its objects as a recipe; unreadable XML and lone files rejected."""
    bases = _bases(tree)
    if not bases:
        raise SourceError(
            f"{flag('layout', NAME)}: {root} has no Pascal VOC layout (looked for {LOOKED_FOR})"
        )
    why = "Annotations/ XML hold boxes only (VOC's SegmentationObject/ masks are not read)"
    task = chosen_task("Pascal VOC", annotations.task, "detection", TASKS, why)
    found = Found(NAME, task, LOOKED_FOR, split_origin="ImageSets/Main/ lists", resplit=True)
    found.task_why = f"{'auto: ' * (annotations.task == 'auto')}{why}"
    parsed: list[tuple[str, str, str, list[XmlObject]]] = []  # image, split, xml, objects
    for base in bases:
        parsed += _read_base(root, tree, base, found)
    given = given_names(annotations)
    if given is not None:
        names, names_from = given
    else:
        names = sorted({o.name for *_, objects in parsed for o in objects if o.name})
        names_from = "object names in Annotations/, sorted"
    index = {name: i for i, name in enumerate(names)}
    problems = []
    for image, split, xml, objects in parsed:
        recipe = VocObjects.made(xml, objects, index, names_from)
        found.items.append((image, split, recipe, None))
        problems += recipe.problems
    if problems:
        found.notes.append(
            f"{len(problems)} object{'s' * (len(problems) != 1)} will be left out (the rest "
            "of their images kept), "
            f"e.g. {problems[0]}"
        )
    found.table = ClassTable.from_names(names, names_from)
    found.class_names = names
    found.why = f"{detect(tree, AnnotationOptions(task='detection'))}; {len(names)} classes"
    return found


def _bases(tree: Tree) -> list[str]:
    """Folders holding Annotations/ (with XML files) and JPEGImages/ (VOC2007/, VOC2012/ ...)."""
    return sorted(
        rel
        for rel, node in tree.items()
        if "Annotations" in node.dirs
        and "JPEGImages" in node.dirs
        and any(ext(n) == ".xml" for n in tree[join(rel, "Annotations")].files)
    )


def _has_masks(tree: Tree, base: str) -> bool:
    return any(d in tree[base].dirs for d in SEGMENTATION_FOLDERS)


def _read_base(root: Path, tree: Tree, base: str, found: Found) -> list:
    """One VOC folder: (image, split, xml, objects) per image of each split list (an image in
    two lists is in both splits; every image with an XML when there are no lists); the rest
    rejected or noted."""
    images_dir, xml_dir = join(base, "JPEGImages"), join(base, "Annotations")
    images = {stem(n): join(images_dir, n) for n in tree[images_dir].files if is_image(n)}
    xmls = {stem(n): join(xml_dir, n) for n in tree[xml_dir].files if ext(n) == ".xml"}
    splits = split_lists(root, tree, base, found)
    wanted = splits if splits is not None else [(key, "") for key in sorted(xmls)]
    parsed, read = [], {}
    for key, split in wanted:
        image, xml = images.get(key), xmls.get(key)
        if image is None:
            where = xml or f"{base}/ImageSets/Main/{split}.txt".lstrip("/")
            found.rejected.append(
                Rejection(where, f"no image for it (looked for {images_dir}/{key}.*)")
            )
            continue
        if xml is None:
            found.rejected.append(
                Rejection(image, f"no annotation (looked for {xml_dir}/{key}.xml)")
            )
            continue
        if key not in read:
            read[key] = read_xml(root, xml, image, found.rejected)
        if read[key] is not None:
            parsed.append((image, split, xml, read[key]))
    listed = {key for key, _ in wanted}
    unused = [k for k in images if k not in listed]
    if unused and splits is not None:
        found.notes.append(f"{len(unused)} images in {images_dir}/ are in no ImageSets/Main split")
    elif unused:
        found.rejected += [
            Rejection(images[k], f"no annotation (looked for {xml_dir}/{k}.xml)") for k in unused
        ]
    if splits is None:
        return parsed
    lone = [k for k in xmls if k not in listed]
    if lone:
        found.notes.append(f"{len(lone)} XML in {xml_dir}/ are in no ImageSets/Main split")
    return parsed
