"""Find the samples of an image dataset from file names alone: class folders, mask folders, lists.

`scan` detects the layout, pairs masks with images, assigns splits and explains every input it
leaves out. It only lists folders (os.scandir, one stat per folder, none per file) and never
opens an image, so a million files scan in seconds; decoding is the packer's job.
"""

from __future__ import annotations

import csv
import hashlib
import math
import os
import re
import unicodedata
from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from operator import attrgetter, itemgetter
from pathlib import Path, PurePosixPath

from ..errors import SourceError

IMAGE_EXTENSIONS = frozenset({".jpg", ".jpeg", ".png", ".bmp", ".gif", ".webp", ".tif", ".tiff"})
LAYOUTS = ("auto", "class-folders", "mask-folders", "list")
SPLIT_NAMES = frozenset({"train", "training", "val", "valid", "validation", "test", "testing"})

# X/ + X<suffix>/ mask folders (CamVid "trainannot", Carvana "train_masks", ...).
_MASK_DIR_SUFFIXES = ("annot", "_labels", "_label", "labels", "_masks", "_mask")
# Fixed sibling names: image folder -> mask folders in order of preference.
_NAMED_PAIRS = {
    "jpegimages": ("SegmentationClass", "SegmentationClassAug"),
    "images": ("masks", "annotations"),
    "image": ("mask", "masks"),
    "imgs": ("masks",),
}
_PAIR_HELP = (
    "X/ + Xannot/ (or X_labels/, X_label/, Xlabels/, X_masks/, X_mask/), "
    "JPEGImages/ + SegmentationClass/, images/ + masks/ at any depth"
)
_CLASS_HELP = "class folders SRC/<class>/* or SRC/<split>/<class>/*"
_MASK_WORDS = ("mask", "label", "ann", "gt", "seg", "target")
_SUFFIX_START = re.compile(r"[_\-. ]")
_LIST_EXTENSIONS = (".lst", ".csv")
_PATH_COLUMNS = ("path", "image", "filename", "file", "filepath", "image_path", "img")
_LABEL_COLUMNS = ("label", "class", "class_name", "category", "target", "mask", "y")


@dataclass(frozen=True, slots=True)
class Sample:
    """One input to pack: an image and its mask (segmentation) or class index (classification)."""

    image: str
    split: str
    mask: str | None = None
    label: int | None = None


@dataclass(frozen=True, slots=True)
class Rejection:
    """An input that will not be packed, and why, so a dry run can tell the user."""

    path: str
    reason: str


@dataclass
class SourceScan:
    """Everything the packer needs to know about a source before decoding anything."""

    root: Path
    layout: str
    task: str
    samples: list[Sample]
    class_names: list[str] | None
    rejected: list[Rejection]
    split_source: str
    notes: list[str]


@dataclass
class _Dir:
    """The visible children of one folder, names sorted."""

    dirs: list[str] = field(default_factory=list)
    files: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class _Pair:
    """An image folder and its mask folder, both relative to the root."""

    image_dir: str
    mask_dir: str
    kind: str
    voc: bool = False
    parent: str = ""


# (image, split, mask, label) before the split policy, split "" meaning "not in a split
# folder"; plain tuples keep a million samples cheap until _finish builds the Samples.
_Item = tuple[str, str, str | None, int | None]


@dataclass
class _Found:
    """What a layout found: its samples as _Items, plus everything a dry run reports."""

    layout: str
    task: str
    looked_for: str
    items: list[_Item] = field(default_factory=list)
    class_names: list[str] | None = None
    rejected: list[Rejection] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    split_origin: str = "split folders"
    class_dirs: list[list[str]] = field(default_factory=list)  # per split, sibling class folders


def parse_split_spec(text: str) -> dict[str, float]:
    """Parse "train=0.9,val=0.1" into fractions, so a CLI flag becomes a validated mapping."""
    fractions: dict[str, float] = {}
    for item in text.split(","):
        name, sep, value = (part.strip() for part in item.partition("="))
        if not sep or not name:
            raise ValueError(f"split spec {text!r}: expected name=fraction pairs like train=0.9")
        if name in fractions:
            raise ValueError(f"split spec {text!r}: {name!r} appears twice")
        try:
            fractions[name] = float(value)
        except ValueError:
            raise ValueError(f"split spec {text!r}: {value!r} is not a number") from None
    return _check_fractions(fractions)


def _check_fractions(fractions: Mapping[str, float]) -> dict[str, float]:
    """Validate split fractions: identifier names, positive finite values summing to 1."""
    if not fractions:
        raise ValueError("split fractions are empty; expected e.g. train=0.9,val=0.1")
    for name, value in fractions.items():
        if not str(name).isidentifier():
            raise ValueError(f"split name {name!r} must be an identifier like train or val")
        if not (math.isfinite(value) and value > 0):
            raise ValueError(f"split {name}={value}: fractions must be positive")
    total = math.fsum(fractions.values())
    if abs(total - 1) > 1e-6:
        raise ValueError(f"split fractions sum to {total:g}, not 1")
    return dict(fractions)


def assign_split(relative_path: str, fractions: Mapping[str, float]) -> str:
    """Pick a split from a hash of the path, so adding files never moves existing samples."""
    text = unicodedata.normalize("NFC", relative_path).encode("utf-8", "surrogateescape")
    point = int.from_bytes(hashlib.sha256(text).digest()[:8], "big") / 2**64
    bound, name = 0.0, ""
    for name, fraction in fractions.items():
        bound += fraction
        if point < bound:
            return name
    if not name:
        raise ValueError("assign_split needs at least one split fraction")
    return name  # the fractions summed a hair under 1


def scan(
    src: str | os.PathLike,
    *,
    layout: str = "auto",
    masks: str | os.PathLike | None = None,
    mask_suffix: str | None = None,
    split: Mapping[str, float] | None = None,
) -> SourceScan:
    """Detect the layout of src (folder or .lst/.csv list); list its samples, splits, rejects."""
    if layout not in LAYOUTS:
        raise SourceError(f"unknown layout {layout!r}; choose one of {', '.join(LAYOUTS)}")
    try:
        fractions = None if split is None else _check_fractions(split)
    except ValueError as exc:
        raise SourceError(str(exc)) from None
    path = Path(src).expanduser()
    if path.is_file():
        root, found = _scan_list_file(path, layout, masks, mask_suffix)
    elif path.is_dir():
        root, found = _scan_folder(path.resolve(), layout, masks, mask_suffix)
    else:
        raise SourceError(f"{src}: no such file or folder")
    return _finish(root, found, fractions)


def _scan_folder(
    root: Path, layout: str, masks: str | os.PathLike | None, mask_suffix: str | None
) -> tuple[Path, _Found]:
    """Scan a folder source with the layout asked for, or detect it."""
    if layout == "list":
        raise SourceError(f"--layout list needs the .lst or .csv file itself as SRC, not {root}")
    if layout == "class-folders" and (masks is not None or mask_suffix is not None):
        raise SourceError("--masks/--mask-suffix contradict --layout class-folders")
    if masks is not None:
        return _scan_explicit_masks(root, Path(masks).expanduser(), mask_suffix)
    rejected: list[Rejection] = []
    tree = _walk(root, [""], rejected)
    if layout == "class-folders":
        found = _class_scan(tree, set())
    else:
        found = _detect(root, tree, layout, mask_suffix)
    found.rejected.extend(rejected)
    found.notes.extend(_list_file_note(tree))
    return root, found


def _detect(root: Path, tree: dict[str, _Dir], layout: str, mask_suffix: str | None) -> _Found:
    """Choose between mask folders and class folders; refuse to guess when both fit."""
    pairs = _find_pairs(tree)
    if pairs:
        claimed = _claimed_dirs(tree, pairs)
        leftover = _class_scan(tree, claimed).class_dirs
        direct = [d + "/" for ds in leftover for d in ds if any(map(_is_image, tree[d].files))]
        if direct and layout == "auto":
            raise SourceError(
                f"{root} holds image/mask folders ({_pair_kinds(pairs)}) and also folders that "
                f"look like class folders ({', '.join(direct[:5])}); pass --layout mask-folders "
                "or --layout class-folders"
            )
        found = _pair_scan(root, tree, pairs, mask_suffix)
        _reject_unpaired_images(tree, pairs, found)
        return found
    if layout == "mask-folders" or mask_suffix is not None:
        raise SourceError(
            f"no image/mask folder pairs found in {root} (looked for {_PAIR_HELP}); "
            "pass --masks DIR to name the mask folder"
        )
    found = _class_scan(tree, set())
    _refuse_twin_folders(tree, found)
    if not found.items:
        raise _unrecognised(root, tree)
    return found


def _unrecognised(root: Path, tree: dict[str, _Dir]) -> SourceError:
    """The error for a folder that matches no layout, saying what it does hold."""
    node = tree[""]
    images = sum(_is_image(name) for name in node.files)
    return SourceError(
        f"cannot recognise the layout of {root}: it holds {len(node.dirs)} folders and "
        f"{images} images directly, but no {_CLASS_HELP} with images and no image/mask folders "
        f"({_PAIR_HELP}); pass --layout, --masks DIR, or a .lst/.csv list as SRC"
    )


def _list_file_note(tree: dict[str, _Dir]) -> list[str]:
    """Point out list files next to the folders, which a user may have meant to pack from."""
    lists = [
        name
        for name in tree[""].files
        if _ext(name) in _LIST_EXTENSIONS and name.lower() != "class_dict.csv"
    ]
    if not lists:
        return []
    return [f"SRC also holds {', '.join(lists)}; pass a list file as SRC to pack from it instead"]


# ---------------------------------------------------------------- walking


def _walk(top: Path, starts: list[str], rejected: list[Rejection]) -> dict[str, _Dir]:
    """Map each folder under top/start to its visible children; each real folder is read once."""
    tree: dict[str, _Dir] = {}
    seen = set()
    for start in starts:
        info = os.stat(top / start)
        seen.add((info.st_dev, info.st_ino))
    stack = list(starts)
    while stack:
        rel = stack.pop()
        node = tree[rel] = _Dir()
        try:
            with os.scandir(top / rel) as entries:
                subdirs = _sort_entries(entries, rel, node, rejected)
        except OSError as exc:
            rejected.append(Rejection(rel or ".", f"cannot read this folder ({exc.strerror})"))
            continue
        for entry in subdirs:
            child = _join(rel, entry.name)
            if _first_visit(entry, seen, child, rejected):
                node.dirs.append(entry.name)
                stack.append(child)
    return tree


def _sort_entries(entries, rel: str, node: _Dir, rejected: list[Rejection]) -> list[os.DirEntry]:
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
        rejected.append(Rejection(_join(rel, name), _odd_entry_reason(entry)))
    node.files.sort()
    subdirs.sort(key=attrgetter("name"))
    return subdirs


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


def _folders(
    tree: dict[str, _Dir], top: str, prune: set[str] | frozenset[str] = frozenset()
) -> Iterator[tuple[str, list[str]]]:
    """Yield (folder, file names) for top and every folder below it, skipping pruned ones."""
    stack = [top]
    while stack:
        rel = stack.pop()
        node = tree.get(rel)
        if node is None:
            continue
        yield rel, node.files
        children = (_join(rel, name) for name in reversed(node.dirs))
        stack.extend(child for child in children if child not in prune)


def _join(folder: str, name: str) -> str:
    """Join relative POSIX paths where "" is the root."""
    return f"{folder}/{name}" if folder and name else folder or name


def _ext(name: str) -> str:
    """Lower-case extension with its dot, "" when there is none."""
    dot = name.rfind(".")
    return name[dot:].lower() if dot > 0 else ""


def _stem(name: str) -> str:
    """File name without its last extension."""
    dot = name.rfind(".")
    return name[:dot] if dot > 0 else name


def _is_image(name: str) -> bool:
    """Whether a file name has an image extension (any case); inlined for speed."""
    return name[name.rfind(".") :].lower() in IMAGE_EXTENSIONS


def _not_image(rel: str, name: str) -> Rejection:
    """The rejection of a non-image file found where images belong."""
    ext = _ext(name) or "no extension"
    return Rejection(rel, f"not an image file type ({ext})")


def _folder_split(rel: str) -> str:
    """The innermost folder of rel named like a split (train, val, ...), or ""."""
    for part in reversed(rel.split("/")[:-1]):
        if part.lower() in SPLIT_NAMES:
            return part
    return ""


# ---------------------------------------------------------------- class folders


def _class_scan(tree: dict[str, _Dir], excluded: set[str]) -> _Found:
    """Classification samples from SRC/<class>/** or SRC/<split>/<class>/**, Keras-style."""
    found = _Found("class-folders", "classification", _CLASS_HELP)
    top = [name for name in tree[""].dirs if name not in excluded]
    splits = [name for name in top if name.lower() in SPLIT_NAMES]
    groups = {
        container: [c for c in tree[container].dirs if _join(container, c) not in excluded]
        for container in splits or [""]
    }
    names = sorted({name for classes in groups.values() for name in classes})
    index = {name: i for i, name in enumerate(names)}
    for container in dict.fromkeys(["", *groups]):
        for name in tree[container].files:
            if _is_image(name):
                rel = _join(container, name)
                found.rejected.append(Rejection(rel, "image outside any class folder"))
    for container, classes in groups.items():
        for cls in classes:
            label = index[cls]
            for folder, files in _folders(tree, _join(container, cls), excluded):
                prefix = folder + "/"
                for name in files:
                    if _is_image(name):
                        found.items.append((prefix + name, container, None, label))
                    else:
                        found.rejected.append(_not_image(prefix + name, name))
    if splits:
        _reject_outside_splits(tree, [d for d in top if d not in splits], splits, excluded, found)
    found.class_names = names
    found.class_dirs = [[_join(c, d) for d in classes] for c, classes in groups.items()]
    found.notes.extend(_class_notes(names, groups, found.items))
    return found


def _reject_outside_splits(
    tree: dict[str, _Dir], others: list[str], splits: list[str], excluded: set[str], found: _Found
) -> None:
    """Reject the images of top-level folders that are not split folders."""
    reason = f"outside the split folders ({', '.join(s + '/' for s in splits)})"
    for other in others:
        for folder, names in _folders(tree, other, excluded):
            found.rejected.extend(Rejection(f"{folder}/{n}", reason) for n in names if _is_image(n))


def _class_notes(names: list[str], groups: dict[str, list[str]], items: list[_Item]) -> list[str]:
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


def _refuse_twin_folders(tree: dict[str, _Dir], found: _Found) -> None:
    """Refuse class folders whose files share names: they look like image/mask folders."""
    for folders in found.class_dirs:
        twins = _twins(tree, folders)
        if twins:
            raise SourceError(
                f"{twins[0]}/ and {twins[1]}/ hold files with the same names, like an image "
                f"folder and its mask folder; pass --masks {twins[1]} for segmentation, or "
                "--layout class-folders if they really are classes"
            )


def _twins(tree: dict[str, _Dir], folders: list[str]) -> tuple[str, str] | None:
    """(image, mask): a mask-named folder sharing 90% of its file stems with a sibling folder."""
    if len(folders) > 50:
        return None
    stems = {f: {_stem(n) for n in tree[f].files if _is_image(n)} for f in folders}
    for mask in folders:
        if not any(word in mask.rsplit("/", 1)[-1].lower() for word in _MASK_WORDS):
            continue
        for image in folders:
            shared = len(stems[mask] & stems[image]) if image != mask else 0
            if shared >= 2 and shared >= 0.9 * max(len(stems[mask]), len(stems[image])):
                return image, mask
    return None


# ---------------------------------------------------------------- mask folders


def _find_pairs(tree: dict[str, _Dir]) -> list[_Pair]:
    """Find image/mask sibling folders at any depth, not descending into the pairs found."""
    pairs: list[_Pair] = []
    stack = [""]
    while stack:
        rel = stack.pop()
        found = _pairs_in(rel, tree[rel].dirs)
        pairs.extend(found)
        taken = {d for p in found for d in (p.image_dir, p.mask_dir)}
        if any(p.voc for p in found):
            taken.update(_join(rel, d) for d in tree[rel].dirs)
        stack.extend(c for c in (_join(rel, d) for d in reversed(tree[rel].dirs)) if c not in taken)
    return pairs


def _pairs_in(parent: str, names: list[str]) -> list[_Pair]:
    """The image/mask pairs among the subfolders of one folder."""
    by_lower = {name.lower(): name for name in names}
    pairs = []
    for name in names:
        low = name.lower()
        named = [by_lower[m.lower()] for m in _NAMED_PAIRS.get(low, ()) if m.lower() in by_lower]
        if named:  # the first in order of preference: SegmentationClass/ before ...Aug/
            pairs.append(_named_pair(parent, name, named[0]))
            continue
        masks = [by_lower[low + s] for s in _MASK_DIR_SUFFIXES if low + s in by_lower]
        if len(masks) > 1:
            raise SourceError(
                f"{_join(parent, name)}/ has several candidate mask folders "
                f"({', '.join(m + '/' for m in masks)}); pass --masks to choose one"
            )
        if masks:
            suffix = masks[0][len(name) :]
            pairs.append(_Pair(_join(parent, name), _join(parent, masks[0]), f"X/ + X{suffix}/"))
    return pairs


def _named_pair(parent: str, image: str, mask: str) -> _Pair:
    """A pair from the fixed folder names (VOC, images/masks)."""
    voc = image.lower() == "jpegimages"
    kind = f"JPEGImages/ + {mask}/" if voc else f"{image.lower()}/ + {mask.lower()}/"
    return _Pair(_join(parent, image), _join(parent, mask), kind, voc, parent)


def _pair_kinds(pairs: list[_Pair]) -> str:
    """The distinct pair kinds, in order of discovery."""
    return ", ".join(dict.fromkeys(p.kind for p in pairs))


def _claimed_dirs(tree: dict[str, _Dir], pairs: list[_Pair]) -> set[str]:
    """Folders that belong to the pairs: theirs, plus every sibling of a VOC pair."""
    claimed = {d for p in pairs for d in (p.image_dir, p.mask_dir)}
    for pair in pairs:
        if pair.voc:
            claimed.update(_join(pair.parent, d) for d in tree[pair.parent].dirs)
    return claimed


def _scan_explicit_masks(src: Path, masks: Path, mask_suffix: str | None) -> tuple[Path, _Found]:
    """Pair the images under src with the masks in an explicit folder, mirroring subfolders."""
    mask_root = _resolve_masks(src, masks)
    if mask_root == src or src.is_relative_to(mask_root):
        raise SourceError(f"--masks {masks} must be a folder inside or beside SRC, not SRC itself")
    root = src if mask_root.is_relative_to(src) else Path(os.path.commonpath([src, mask_root]))
    image_dir = "" if src == root else src.relative_to(root).as_posix()
    mask_dir = mask_root.relative_to(root).as_posix()
    rejected: list[Rejection] = []
    starts = [image_dir] if image_dir == "" else [image_dir, mask_dir]
    tree = _walk(root, starts, rejected)
    pair = _Pair(image_dir, mask_dir, "--masks")
    found = _pair_scan(root, tree, [pair], mask_suffix)
    found.layout = "mask-folders (--masks)"
    found.rejected.extend(rejected)
    return root, found


def _resolve_masks(src: Path, masks: Path) -> Path:
    """Find the --masks folder: as given (absolute or from the working folder), else inside SRC."""
    for candidate in (masks, src / masks):
        if candidate.is_dir():
            return candidate.resolve()
    raise SourceError(f"--masks {masks}: no such folder (looked in the working folder and {src})")


def _pair_scan(root: Path, tree: dict[str, _Dir], pairs: list[_Pair], suffix: str | None) -> _Found:
    """Segmentation samples: images paired with masks by subfolder and file stem."""
    kinds = _pair_kinds(pairs)
    found = _Found(f"mask-folders ({kinds})", "segmentation", f"image/mask pairs in {kinds}")
    sides = []
    for pair in pairs:
        masks = _index_side(tree, pair.mask_dir, set(), found.rejected)
        explicit = pair.kind == "--masks"
        flat = explicit and not any(sub for sub, _ in masks)
        prune = {pair.mask_dir}
        images = _index_side(
            tree, pair.image_dir, prune, found.rejected, is_src=explicit, flat=flat
        )
        sides.append((images, masks))
    if suffix is None:
        suffix = _detect_suffix(sides, found.notes)
    mask_names = [rel for _, masks in sides for rel in masks.values()]
    ext = {_ext(rel) for rel in mask_names}
    looked_ext = ext.pop() if len(ext) == 1 else ".*"
    for pair, (images, masks) in zip(pairs, sides, strict=True):
        _match(root, tree, pair, images, masks, suffix, looked_ext, found)
    return found


def _index_side(
    tree: dict[str, _Dir],
    top: str,
    prune: set[str],
    rejected: list[Rejection],
    *,
    is_src: bool = False,
    flat: bool = False,
) -> dict[tuple[str, str], str]:
    """Index the images under top by (subfolder, stem); reject other files and stem clashes.

    is_src: top is SRC itself (--masks), whose own non-image files are metadata, not rejects.
    flat: the mask folder has no subfolders, so images pair by stem alone, wherever they lie.
    """
    index: dict[tuple[str, str], str] = {}
    cut = len(top) + 1 if top else 0
    for folder, names in _folders(tree, top, prune):
        sub = "" if flat else folder[cut:]
        for name in names:
            rel = _join(folder, name)
            if not _is_image(name):
                if not (is_src and folder == top):
                    rejected.append(_not_image(rel, name))
                continue
            key = (sub, _stem(name))
            if key in index:
                reason = f"same name stem as {index[key]}; masks pair by stem, so it is ambiguous"
                rejected.append(Rejection(rel, reason))
            else:
                index[key] = rel
    return index


def _detect_suffix(sides: list[tuple[dict, dict]], notes: list[str]) -> str:
    """What mask names add after the image stem: "" when some names match, else the commonest."""
    images = {(i, *key) for i, (side, _) in enumerate(sides) for key in side}
    masks = [(i, *key) for i, (_, side) in enumerate(sides) for key in side]
    if not masks or any(key in images for key in masks):
        return ""
    counts: Counter[str] = Counter()
    for i, sub, stem in masks:
        for match in _SUFFIX_START.finditer(stem):
            if match.start() and (i, sub, stem[: match.start()]) in images:
                counts[stem[match.start() :]] += 1
    if not counts:
        return ""
    (best, n), *rest = counts.most_common(2)
    if rest and rest[0][1] == n:
        raise SourceError(
            f"mask names carry different suffixes ({best!r}, {rest[0][0]!r}) equally often; "
            "pass --mask-suffix"
        )
    notes.append(f"detected mask suffix {best!r}: masks are named <image stem>{best} ({n} masks)")
    return best


def _match(
    root: Path,
    tree: dict[str, _Dir],
    pair: _Pair,
    images: dict[tuple[str, str], str],
    masks: dict[tuple[str, str], str],
    suffix: str,
    ext: str,
    found: _Found,
) -> None:
    """Pair the images of one pair of folders with their masks; reject or count the rest."""
    splits, listing = _voc_splits(root, tree, pair, found) if pair.voc else (None, "")
    used = set()
    maskless = 0
    for (sub, stem), image in images.items():
        key = (sub, stem + suffix)
        if key not in masks:
            if pair.voc:
                maskless += 1
            else:
                looked = _join(_join(pair.mask_dir, sub), stem + suffix) + ext
                found.rejected.append(
                    Rejection(image, f"no mask found for this image (looked for {looked})")
                )
            continue
        used.add(key)
        split = _folder_split(image) if splits is None else splits.get(stem)
        if split is None:
            found.rejected.append(Rejection(image, f"not listed in {listing}"))
            continue
        found.items.append((image, split, masks[key], None))
    for key, mask in masks.items():
        if key not in used:
            found.rejected.append(Rejection(mask, _orphan_reason(pair, *key, suffix)))
    if maskless:
        found.notes.append(
            f"{maskless} images in {pair.image_dir}/ have no mask and are not part of the "
            "segmentation set"
        )
    if pair.voc:
        found.notes.extend(_voc_ignored(tree, pair))


def _orphan_reason(pair: _Pair, sub: str, stem: str, suffix: str) -> str:
    """Why a mask has no image: wrong suffix, or no image of that name."""
    if not stem.endswith(suffix):
        return f"mask name does not end with the mask suffix {suffix!r}"
    base = stem[: len(stem) - len(suffix)]
    return f"no image found for this mask (looked for {_join(_join(pair.image_dir, sub), base)}.*)"


def _voc_splits(
    root: Path, tree: dict[str, _Dir], pair: _Pair, found: _Found
) -> tuple[dict[str, str] | None, str]:
    """Read VOC's ImageSets/Segmentation/<split>.txt into stem -> split; None when absent."""
    folder = _join(pair.parent, "ImageSets/Segmentation")
    node = tree.get(folder)
    lists = [n for n in node.files if _ext(n) == ".txt"] if node else []
    used = [n for n in lists if _stem(n).lower() in SPLIT_NAMES]
    if not used:
        return None, ""
    splits: dict[str, str] = {}
    for name in used:  # sorted names: a stem listed twice stays in the first split file
        try:
            text = (root / folder / name).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise SourceError(f"cannot read {folder}/{name}: {exc}") from None
        for line in text.splitlines():
            if line.strip():
                splits.setdefault(line.split()[0], _stem(name))
    ignored = [n for n in lists if n not in used]
    found.split_origin = f"{folder}/"
    found.notes.append(f"splits from {folder}/: {', '.join(used)}")
    if ignored:
        found.notes.append(f"ignored {', '.join(ignored)} in {folder}/ (not split names)")
    return splits, f"{folder}/{' or '.join(used)}"


def _voc_ignored(tree: dict[str, _Dir], pair: _Pair) -> list[str]:
    """Name the folders beside a VOC pair that hold images but are not read."""
    notes = []
    for name in tree[pair.parent].dirs:
        rel = _join(pair.parent, name)
        if rel in (pair.image_dir, pair.mask_dir):
            continue
        count = sum(_is_image(n) for _, names in _folders(tree, rel) for n in names)
        if count:
            notes.append(f"ignored {rel}/ ({count} images): only {pair.kind} are read")
    return notes


def _reject_unpaired_images(tree: dict[str, _Dir], pairs: list[_Pair], found: _Found) -> None:
    """Reject images that lie outside every image/mask folder pair."""
    reason = f"not inside an image/mask folder pair ({_pair_kinds(pairs)})"
    for folder, names in _folders(tree, "", _claimed_dirs(tree, pairs)):
        found.rejected.extend(Rejection(_join(folder, n), reason) for n in names if _is_image(n))


# ---------------------------------------------------------------- list files


def _scan_list_file(
    path: Path, layout: str, masks: str | os.PathLike | None, mask_suffix: str | None
) -> tuple[Path, _Found]:
    """Read an im2rec .lst or a CSV list; the paths inside are relative to the list's folder."""
    kind = _ext(path.name)
    if kind not in _LIST_EXTENSIONS:
        raise SourceError(f"{path}: SRC must be a folder or a .lst/.csv list file")
    if layout not in ("auto", "list"):
        raise SourceError(f"--layout {layout} needs a folder as SRC, not the list file {path.name}")
    if masks is not None or mask_suffix is not None:
        raise SourceError("--masks/--mask-suffix do not apply to a list file")
    try:
        text = path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        raise SourceError(f"cannot read {path}: {exc}") from None
    rows = _lst_rows(text, path.name) if kind == ".lst" else _csv_rows(text, path.name)
    root = path.parent.resolve()
    found = _Found(f"list ({kind})", "classification", f"the files listed in {path.name}")
    _list_samples(root, path.name, rows, found)
    return root, found


def _lst_rows(text: str, name: str) -> list[tuple[int, str, str]]:
    """Parse im2rec lines index<TAB>label<TAB>path into (line, path, label)."""
    rows = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        columns = line.split("\t")
        if len(columns) < 3:
            raise SourceError(
                f"{name} line {number}: expected index<TAB>label<TAB>path (im2rec), "
                f"found {len(columns)} tab-separated columns"
            )
        if len(columns) > 3:
            raise SourceError(
                f"{name} line {number}: {len(columns) - 2} label columns; multi-label lists "
                "are not supported (one class index per image)"
            )
        rows.append((number, columns[2].strip(), _lst_label(columns[1], name, number)))
    return rows


def _lst_label(text: str, name: str, number: int) -> str:
    """An im2rec label ("1.000000") as an integer string, or an error if it is no class index."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (value.is_integer() and value >= 0):
        raise SourceError(f"{name} line {number}: label {text!r} is not a class index")
    return str(int(value))


def _csv_rows(text: str, name: str) -> list[tuple[int, str, str]]:
    """Parse path,label CSV rows (header optional) into (line, path, label)."""
    reader = csv.reader(text.splitlines())
    rows = [(reader.line_num, row) for row in reader if any(cell.strip() for cell in row)]
    path_col, label_col = 0, 1
    if rows and not _is_image(rows[0][1][0].strip()):  # the first row is a header
        header = [cell.strip().lower() for cell in rows.pop(0)[1]]
        path_col = next((header.index(c) for c in _PATH_COLUMNS if c in header), 0)
        label_col = next((header.index(c) for c in _LABEL_COLUMNS if c in header), 1)
    result = []
    for number, row in rows:
        if len(row) <= max(path_col, label_col) or not row[label_col].strip():
            raise SourceError(f"{name} line {number}: expected path,label columns")
        result.append((number, row[path_col].strip(), row[label_col].strip()))
    return result


def _list_samples(root: Path, name: str, rows: list[tuple[int, str, str]], found: _Found) -> None:
    """Turn list rows into samples; labels that are image paths make an image,mask list."""
    labels = [label for _, _, label in rows]
    segmentation = bool(labels) and all(_is_image(label) for label in labels)
    index = {} if segmentation else _label_index(labels, found)
    if segmentation:
        found.task = "segmentation"
    listed = [raw for _, raw, label in rows for raw in ((raw, label) if segmentation else (raw,))]
    present = _existing(root, [_list_path(raw)[0] for raw in listed])
    seen: dict[str, int] = {}
    for number, raw, label in rows:
        where = f"{name} line {number}"
        rel, problem = _list_path(raw)
        problem = f"{problem} ({where})" if problem else _listed_problem(rel, seen, present, where)
        if problem:
            found.rejected.append(Rejection(rel or raw, problem))
            continue
        seen[rel] = number
        if not segmentation:
            found.items.append((rel, "", None, index[label]))
            continue
        mask = _list_path(label)[0]
        if mask not in present:
            found.rejected.append(Rejection(rel, f"its mask {label} ({where}) is missing"))
            continue
        found.items.append((rel, "", mask, None))


def _listed_problem(rel: str, seen: dict[str, int], present: set[str], where: str) -> str | None:
    """Why a listed path is not packed (listed twice, not an image, missing), or None."""
    if rel in seen:
        return f"listed again ({where}); first listed on line {seen[rel]}"
    if not _is_image(rel):
        return f"not an image file type ({_ext(rel) or 'no extension'}; {where})"
    if rel not in present:
        return f"listed in {where} but missing"
    return None


def _label_index(labels: list[str], found: _Found) -> dict[str, int]:
    """Map labels to class indices: integers as given, names by sorted position."""
    if all(label.isascii() and label.isdigit() for label in labels):
        top = max((int(label) for label in labels), default=-1)
        found.class_names = [str(i) for i in range(top + 1)]
        return {label: int(label) for label in labels}
    found.class_names = sorted(set(labels))
    return {label: i for i, label in enumerate(found.class_names)}


def _list_path(text: str) -> tuple[str, str | None]:
    """A listed path in POSIX form relative to the list's folder, or why it cannot be one."""
    if not text:
        return "", "empty path"
    posix = PurePosixPath(text.replace("\\", "/"))
    if posix.is_absolute() or ".." in posix.parts:
        return "", "path leaves the list file's folder; paths must be relative to it"
    return posix.as_posix(), None


def _existing(root: Path, rels: list[str]) -> set[str]:
    """The given paths that are files, reading each folder once rather than a stat per file."""
    present: set[str] = set()
    for folder in {rel.rpartition("/")[0] for rel in rels if rel}:
        try:
            with os.scandir(root / folder) as entries:
                present.update(_join(folder, e.name) for e in entries if e.is_file())
        except OSError:
            continue
    return present


# ---------------------------------------------------------------- splits and result


def _finish(root: Path, found: _Found, fractions: dict[str, float] | None) -> SourceScan:
    """Apply the split policy, refuse an empty result and sort everything deterministically."""
    items, rejected = found.items, found.rejected
    folder_splits = sorted({split for _, split, _, _ in items if split})
    if folder_splits:
        if fractions is not None:
            raise SourceError(
                f"the source already has splits ({', '.join(folder_splits)}) from its "
                f"{found.split_origin}; drop --split"
            )
        reason = f"not inside a split folder, unlike the other samples ({', '.join(folder_splits)})"
        rejected.extend(Rejection(item[0], reason) for item in items if not item[1])
        items = [item for item in items if item[1]]
        split_source = "folders"
    elif fractions is not None:
        items = [(i, assign_split(i, fractions), m, label) for i, _, m, label in items]
        split_source = "hash"
    else:
        items = [(i, "train", m, label) for i, _, m, label in items]
        split_source = "single"
    rejected.sort(key=lambda r: (r.path, r.reason))
    if not items:
        raise _empty_error(root, found, rejected)
    items.sort(key=itemgetter(1, 0))
    samples = [Sample(*item) for item in items]
    return SourceScan(
        root,
        found.layout,
        found.task,
        samples,
        found.class_names,
        rejected,
        split_source,
        found.notes,
    )


def _empty_error(root: Path, found: _Found, rejected: list[Rejection]) -> SourceError:
    """The error for a layout that yields no sample, with what was looked for and why."""
    if rejected:
        first = rejected[0]
        detail = f"{len(rejected)} inputs rejected, e.g. {first.path}: {first.reason}"
    else:
        detail = "no image files there"
    return SourceError(
        f"no samples in {root} ({found.layout}; looked for {found.looked_for}): {detail}"
    )
