"""The Cityscapes layout: `leftImg8bit/<split>/<city>/*_leftImg8bit.png` with the label-id masks
of `gtFine/` (or `gtCoarse/`), mapped to the 19 train ids of the official table.

Per split, the fine annotations are taken when `gtFine/<split>/` exists, else the coarse ones
(`train_extra` exists only in gtCoarse). Only `*_labelIds.png` is ever a mask: the `_color`,
`_instanceIds`, `_labelTrainIds` and `_polygons.json` files beside it are not read. The mask
stays a file path; the table's value map turns label ids into train ids in the converter.
"""

from __future__ import annotations

from pathlib import Path

from ..errors import SourceError
from ..flags import flag
from .cityscapes_labels import train_table
from .model import AnnotationOptions, Found, Rejection, Tree, folders, is_image, join, not_image

NAME = "cityscapes"
IMAGES = "leftImg8bit"
IMAGE_SUFFIX = "_leftImg8bit.png"
GROUND_TRUTHS = ("gtFine", "gtCoarse")  # in order of preference, chosen per split
SPLIT_ORDER = ("train", "val", "test", "train_extra")
DESCRIPTION = "Cityscapes: leftImg8bit/ + gtFine/ (or gtCoarse/) labelIds, as the 19 train ids"
LOOKED_FOR = (
    "leftImg8bit/<split>/<city>/*_leftImg8bit.png beside "
    "gtFine/<split>/<city>/*_gtFine_labelIds.png (or gtCoarse/ ... _gtCoarse_labelIds.png)"
)


def detect(tree: Tree, annotations: AnnotationOptions) -> str | None:
    """Why the source is Cityscapes (leftImg8bit/ beside gtFine/ or gtCoarse/), or None."""
    chosen = _ground_truths(tree)
    if not any(chosen.values()):
        return None
    counts = [(split, _count_images(tree, split)) for split in _ordered(chosen) if chosen[split]]
    shown = " + ".join(f"{count:,} {split}" for split, count in counts)
    return f"Cityscapes: leftImg8bit/ + {_which(chosen)} (labelIds), {shown} images"


def scan(root: Path, tree: Tree, annotations: AnnotationOptions) -> Found:
    """Pair every leftImg8bit image with its labelIds mask; reject what does not pair."""
    chosen = _ground_truths(tree)
    if not any(chosen.values()):
        raise SourceError(
            f"{flag('layout', NAME)}: {root} has no Cityscapes layout (looked for {LOOKED_FOR})"
        )
    found = Found(
        NAME,
        "segmentation",
        LOOKED_FOR,
        split_origin="Cityscapes split folders",
        table=train_table(),
    )
    found.notes.append(f"Cityscapes masks: {_which(chosen)}; label ids -> the 19 train ids")
    reason = "not inside a split folder (leftImg8bit/<split>/<city>/)"
    found.rejected.extend(Rejection(join(IMAGES, n), reason) for n in tree[IMAGES].files)
    masks = _label_masks(tree, chosen, found.notes)
    used: set[str] = set()
    for split in _ordered(chosen):
        gt = chosen[split]
        top = join(IMAGES, split)
        for folder, names in folders(tree, top):
            sub = folder[len(top) + 1 :]
            for name in names:
                rel = join(folder, name)
                if not name.endswith(IMAGE_SUFFIX):
                    reason = "not a Cityscapes image name (<city>_<seq>_<frame>_leftImg8bit.png)"
                    found.rejected.append(
                        Rejection(rel, reason) if is_image(name) else not_image(rel, name)
                    )
                    continue
                if gt is None:
                    found.rejected.append(
                        Rejection(rel, f"no gtFine/{split}/ or gtCoarse/{split}/")
                    )
                    continue
                base = name[: -len(IMAGE_SUFFIX)]
                mask = join(join(gt, split), join(sub, f"{base}_{gt}_labelIds.png"))
                if mask in masks:
                    used.add(mask)
                    found.items.append((rel, split, mask, None))
                else:
                    found.rejected.append(Rejection(rel, f"no mask {mask}"))
    orphans = sorted(set(masks) - used)
    found.rejected.extend(Rejection(m, f"no image {_image_of(m)} for this mask") for m in orphans)
    _note_unread(tree, found.notes)
    return found


def _ground_truths(tree: Tree) -> dict[str, str | None]:
    """Each split folder of leftImg8bit/ and the annotation folder it takes (None: none)."""
    node = tree.get("")
    if node is None or IMAGES not in node.dirs:
        return {}
    have = [gt for gt in GROUND_TRUTHS if gt in node.dirs]
    return {
        split: next((gt for gt in have if join(gt, split) in tree), None)
        for split in tree[IMAGES].dirs
    }


def _label_masks(tree: Tree, chosen: dict[str, str | None], notes: list[str]) -> set[str]:
    """Every `*_<gt>_labelIds.png` in the annotation folder each split takes (and those of
    annotation split folders without images, so that they are reported)."""
    masks: set[str] = set()
    root = tree[""]
    for gt in GROUND_TRUTHS:
        if gt not in root.dirs:
            continue
        suffix = f"_{gt}_labelIds.png"
        for split in tree[gt].dirs:
            if split in chosen and chosen[split] != gt:
                notes.append(f"not read: {gt}/{split}/ ({chosen[split]}/{split}/ is preferred)")
                continue
            for folder, names in folders(tree, join(gt, split)):
                masks.update(join(folder, n) for n in names if n.endswith(suffix))
    return masks


def _image_of(mask: str) -> str:
    """The leftImg8bit image a labelIds mask belongs to."""
    gt, _, rest = mask.partition("/")
    return f"{IMAGES}/{rest[: -len(f'_{gt}_labelIds.png')]}{IMAGE_SUFFIX}"


def _count_images(tree: Tree, split: str) -> int:
    """How many Cityscapes images a split folder holds."""
    return sum(
        n.endswith(IMAGE_SUFFIX) for _, names in folders(tree, join(IMAGES, split)) for n in names
    )


def _ordered(chosen: dict[str, str | None]) -> list[str]:
    """Split names in the dataset's own order (train, val, test, train_extra), others after."""
    known = [s for s in SPLIT_ORDER if s in chosen]
    return known + sorted(s for s in chosen if s not in SPLIT_ORDER)


def _which(chosen: dict[str, str | None]) -> str:
    """The annotation folders in use: "gtFine/", or "gtFine/, gtCoarse/ for train_extra"."""
    used = [gt for gt in GROUND_TRUTHS if gt in chosen.values()]
    if len(used) < 2:
        return "".join(f"{gt}/" for gt in used)
    coarse = [s for s in _ordered(chosen) if chosen[s] == GROUND_TRUTHS[1]]
    return f"{GROUND_TRUTHS[0]}/, {GROUND_TRUTHS[1]}/ for {', '.join(coarse)}"


def _note_unread(tree: Tree, notes: list[str]) -> None:
    """Name the top-level folders the layout does not read (rightImg8bit/, disparity/, ...)."""
    others = [d for d in tree[""].dirs if d not in (IMAGES, *GROUND_TRUTHS)]
    if others:
        notes.append(f"not read by the Cityscapes layout: {', '.join(d + '/' for d in others)}")
