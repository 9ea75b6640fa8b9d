"""How mask folders are named beside their image folders: the suffixes and fixed sibling names
the mask-folder layout pairs by, and the way back from a mask folder to its image folder."""

from __future__ import annotations

from .model import join

# X/ + X<suffix>/ mask folders (CamVid "trainannot", Carvana "train_masks", ...).
MASK_DIR_SUFFIXES = ("annot", "_labels", "_label", "labels", "_masks", "_mask")
# Fixed sibling names: image folder -> mask folders in order of preference.
NAMED_PAIRS = {
    "jpegimages": ("SegmentationClass", "SegmentationClassAug"),
    "images": ("masks", "annotations"),
    "image": ("mask", "masks"),
    "imgs": ("masks",),
}
PAIR_HELP = (
    "X/ + Xannot/ (or X_labels/, X_label/, Xlabels/, X_masks/, X_mask/), "
    "JPEGImages/ + SegmentationClass/, images/ + masks/ at any depth"
)


def image_folder_of(mask_dir: str) -> str | None:
    """The image folder a folder named like a mask folder pairs with (`train_labels` ->
    `train`, `masks` -> `images`), or None when the name is no mask folder's."""
    parent, _, name = mask_dir.rpartition("/")
    low = name.lower()
    for image, mask_names in NAMED_PAIRS.items():
        if low in (m.lower() for m in mask_names):
            return join(parent, "JPEGImages" if image == "jpegimages" else image)
    for suffix in MASK_DIR_SUFFIXES:
        if low.endswith(suffix) and len(low) > len(suffix):
            return join(parent, name[: -len(suffix)])
    return None
