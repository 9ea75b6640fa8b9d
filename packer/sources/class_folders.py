"""The class-folder layout: SRC/<class>/** or SRC/<split>/<class>/**, Keras-style.

Besides collecting the samples, it refuses sibling folders that look like an image folder and
its mask folder, so a segmentation set is never packed as two classes by mistake.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from ..errors import SourceError
from ..flags import flag
from .coco_files import coco_like
from .mask_names import image_folder_of
from .model import (
    AnnotationOptions,
    Found,
    Item,
    Rejection,
    Tree,
    folders,
    is_image,
    join,
    not_image,
    stem,
)
from .splits import SPLIT_NAMES

CLASS_HELP = "class folders SRC/<class>/* or SRC/<split>/<class>/*"
NAME = "class-folders"
DESCRIPTION = "SRC/<class>/* or SRC/<split>/<class>/* (classification)"
LOOKED_FOR = CLASS_HELP
_MASK_WORDS = ("mask", "label", "ann", "gt", "seg", "target")
# Folders that mark annotations a layout must read: never class folders.
ANNOTATION_FOLDERS = ("annotations", "gtFine", "gtCoarse")


def detect(tree: Tree, annotations: AnnotationOptions) -> str | None:
    """Why the source is class folders (one of them holds an image), or None."""
    for container, classes in _groups(tree, set()).items():
        for cls in classes:
            top = join(container, cls)
            if any(is_image(n) for _, names in folders(tree, top) for n in names):
                shown = ", ".join(f"{c}/" for c in classes[:5])
                where = f" in {container}/" if container else ""
                return f"class folders{where}: {shown}{' ...' * (len(classes) > 5)}"
    return None


def scan(root: Path, tree: Tree, annotations: AnnotationOptions) -> Found:
    """Classification samples; under auto, folders that look like annotations, or like image
    and mask folders, are a guess refused."""
    if annotations.layout == "auto":
        refuse_unread_annotations(root, tree)
        _refuse_coco_like_json(root, tree)
    found = class_scan(tree, set())
    if annotations.layout == "auto":
        refuse_twin_folders(tree, found)
        _refuse_masks_without_images(root, tree, found)
    return found


def class_scan(tree: Tree, excluded: set[str]) -> Found:
    """Classification samples from SRC/<class>/** or SRC/<split>/<class>/**, Keras-style."""
    found = Found(NAME, "classification", CLASS_HELP)
    top = [name for name in tree[""].dirs if name not in excluded]
    splits = [name for name in top if name.lower() in SPLIT_NAMES]
    groups = _groups(tree, excluded)
    names = sorted({name for classes in groups.values() for name in classes})
    index = {name: i for i, name in enumerate(names)}
    for container in dict.fromkeys(["", *groups]):
        for name in tree[container].files:
            if is_image(name):
                rel = join(container, name)
                found.rejected.append(Rejection(rel, "image outside any class folder"))
    for container, classes in groups.items():
        for cls in classes:
            label = index[cls]
            for folder, files in folders(tree, join(container, cls), excluded):
                prefix = folder + "/"
                for name in files:
                    if is_image(name):
                        found.items.append((prefix + name, container, None, label))
                    else:
                        found.rejected.append(not_image(prefix + name, name))
    if splits:
        _reject_outside_splits(tree, [d for d in top if d not in splits], splits, excluded, found)
    found.class_names = names
    found.class_dirs = [[join(c, d) for d in classes] for c, classes in groups.items()]
    found.notes.extend(_class_notes(names, groups, found.items))
    return found


def _groups(tree: Tree, excluded: set[str]) -> dict[str, list[str]]:
    """Split folder ("" without splits) -> the class folders in it."""
    top = [name for name in tree[""].dirs if name not in excluded]
    splits = [name for name in top if name.lower() in SPLIT_NAMES]
    return {
        container: [c for c in tree[container].dirs if join(container, c) not in excluded]
        for container in splits or [""]
    }


def refuse_unread_annotations(root: Path, tree: Tree) -> None:
    """Annotation folders that no layout recognised: say so rather than pack them as classes."""
    held = [d for d in ANNOTATION_FOLDERS if d in tree[""].dirs]
    if held:
        raise SourceError(
            f"{root} holds {', '.join(f'{d}/' for d in held)} but matches no annotation layout "
            f"(COCO: annotations/instances_<split>.json beside <split>/ image folders; "
            f"Cityscapes: leftImg8bit/ + gtFine/; ADE20K: images/ + annotations/); pass "
            f"{flag('layout')} or {flag('coco')}, or {flag('layout', 'class-folders')} if "
            "these really are classes"
        )


def _refuse_coco_like_json(root: Path, tree: Tree) -> None:
    """A COCO-style JSON beside the folders that no export layout recognised (another tool's
    export): the folders are its images, not classes, so say how to pack it instead."""
    for name in sorted(tree[""].files):
        if coco_like(root, name):
            raise SourceError(
                f"{root} holds {name}, a COCO-style annotations file (images, annotations, "
                f"categories), beside its image folders: pack it with {flag('coco', name)} and "
                f"{flag('task', 'detection')} (or instances), or pass "
                f"{flag('layout', 'class-folders')} if the folders really are the classes"
            )


def _refuse_masks_without_images(root: Path, tree: Tree, found: Found) -> None:
    """Folders named like mask folders, beside a class_dict.csv, and no image folders: masks
    without their images, not a classification set."""
    if "class_dict.csv" not in {name.lower() for name in tree[""].files}:
        return
    with_images = [d for ds in found.class_dirs for d in ds if any(map(is_image, tree[d].files))]
    missing = {d: image_folder_of(d) for d in with_images}
    if not with_images or not all(missing.values()):
        return
    names = ", ".join(f"{d}/" for d in with_images[:5])
    wanted = ", ".join(f"{m}/" for m in list(missing.values())[:5])
    raise SourceError(
        f"{root} holds only mask folders ({names}) and class_dict.csv, but no images: the image "
        f"folders ({wanted}) that pair with them are missing. Put the images beside their masks, "
        f"or pass {flag('masks')} if they are elsewhere"
    )


def refuse_twin_folders(tree: Tree, found: Found) -> None:
    """Refuse class folders whose files share names: they look like image/mask folders."""
    for siblings in found.class_dirs:
        twins = _twins(tree, siblings)
        if twins:
            raise SourceError(
                f"{twins[0]}/ and {twins[1]}/ hold files with the same names, like an image "
                f"folder and its mask folder; pass {flag('masks', twins[1])} for segmentation, "
                f"or {flag('layout', 'class-folders')} if they really are classes"
            )


def _reject_outside_splits(
    tree: Tree, others: list[str], splits: list[str], excluded: set[str], found: Found
) -> None:
    """Reject the images of top-level folders that are not split folders."""
    reason = f"outside the split folders ({', '.join(s + '/' for s in splits)})"
    for other in others:
        for folder, names in folders(tree, other, excluded):
            found.rejected.extend(Rejection(f"{folder}/{n}", reason) for n in names if is_image(n))


def _class_notes(names: list[str], groups: dict[str, list[str]], items: list[Item]) -> list[str]:
    """Warn about empty classes, a lone class and splits that lack some classes."""
    counts = Counter((split, label) for _, split, _, label in items)
    notes = []
    empty = [n for i, n in enumerate(names) if not any(counts[(c, i)] for c in groups)]
    if empty:
        notes.append(f"class folders without images (indices stay reserved): {_few(empty)}")
    if len(names) == 1:
        notes.append(f"only one class folder ({names[0]}/): every sample gets label 0")
    if len(groups) > 1:
        for container in groups:
            lacking = [n for i, n in enumerate(names) if not counts[(container, i)]]
            if lacking and len(lacking) < len(names):
                notes.append(f"{container}/ has no images of classes {_few(lacking)}")
    return notes


def _few(names: list[str], limit: int = 10) -> str:
    """A readable list of names, cut after limit so a note stays one line."""
    more = f" and {len(names) - limit} more" if len(names) > limit else ""
    return ", ".join(names[:limit]) + more


def _twins(tree: Tree, siblings: list[str]) -> tuple[str, str] | None:
    """(image, mask): a mask-named folder sharing 90% of its file stems with a sibling folder."""
    if len(siblings) > 50:
        return None
    stems = {f: {stem(n) for n in tree[f].files if is_image(n)} for f in siblings}
    for mask in siblings:
        if not any(word in mask.rsplit("/", 1)[-1].lower() for word in _MASK_WORDS):
            continue
        for image in siblings:
            shared = len(stems[mask] & stems[image]) if image != mask else 0
            if shared >= 2 and shared >= 0.9 * max(len(stems[mask]), len(stems[image])):
                return image, mask
    return None
