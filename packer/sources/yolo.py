"""The YOLO layout (Ultralytics, and Roboflow's YOLO export): `data.yaml` naming the classes and
the image folders of each split, and a `.txt` label file per image.

Labels are found as Ultralytics' `img2label_paths` finds them: the image's path with its last
`images` folder replaced by `labels` and the extension by `.txt` (`images/train/a.jpg` ->
`labels/train/a.txt`; `train/images/a.jpg` -> `train/labels/a.txt`; beside the image when no
folder is called `images`). An image without a label file is a background image (no
objects); a label file without an image is rejected. Box labels (`cls cx cy w h`) give
detection, polygon labels (`cls x1 y1 x2 y2 ...`) instances; `--task` may ask for detection
from polygons (their hull boxes). Pose labels (`kpt_shape` in data.yaml) give keypoints, with
data.yaml's `flip_idx` as the points' flip order (refused when it is no permutation) and its
`kpt_names` as their names; `--task detection` packs their boxes and says the keypoints were
left out.
"""

from __future__ import annotations

from pathlib import Path

from ..errors import SourceError
from ..flags import flag
from ..labels import ClassTable
from ..yaml_names import yaml_names
from .model import (
    AnnotationOptions,
    Found,
    Rejection,
    Tree,
    ext,
    folders,
    is_image,
    join,
    not_image,
)
from .object_layouts import chosen_task, given_names
from .recipes import digest_of
from .splits import folder_split
from .walk import read_text
from .yolo_labels import YoloObjects, text_kinds
from .yolo_yaml import (
    NAMES_FILES,
    YAML_FILES,
    ImageSource,
    keypoint_fields,
    read_config,
    skeleton,
    split_sources,
)

NAME = "yolo"
DESCRIPTION = "YOLO (Ultralytics, Roboflow): data.yaml, images/<split>/ + labels/<split>/*.txt"
LOOKED_FOR = (
    "data.yaml with images/<split>/ + labels/<split>/*.txt (or <split>/images/ + <split>/labels/)"
)
TASKS = ("detection", "instances")
SAMPLED = 100  # label files read to choose the task under auto (spread over all of them)


def detect(tree: Tree, annotations: AnnotationOptions) -> str | None:
    """Why the source is YOLO (images/ beside labels/ holding .txt files, or a data.yaml with
    .txt files beside images of the same name), or None."""
    if annotations.coco:
        return None
    config = next((n for n in YAML_FILES if n in tree[""].files), None)
    pairs = [f"{i}/ + {label}/" for i, label in _label_pairs(tree)]
    if pairs:
        return "YOLO: " + ", ".join(([config] if config else []) + pairs[:4])
    if config is None:
        return None
    beside = next((rel for rel, node in tree.items() if _labels_beside(node)), None)
    if beside is None:
        return None
    return f"YOLO: {config}, .txt labels beside the images in {beside or '.'}/"


def _labels_beside(node) -> bool:
    """Whether a folder holds an image and a .txt file of the same stem."""
    texts = {n[:-4] for n in node.files if ext(n) == ".txt"}
    return bool(texts) and any(is_image(n) and n.rsplit(".", 1)[0] in texts for n in node.files)


def scan(root: Path, tree: Tree, annotations: AnnotationOptions) -> Found:
    """Every image of the splits data.yaml names (else of every images/ folder beside a
    labels/ one), with its label file as an objects recipe."""
    config_name = next((n for n in YAML_FILES if n in tree[""].files), None)
    config = read_config(root, config_name) if config_name else {}
    found = Found(NAME, "detection", LOOKED_FOR)
    if config_name and any(config.get(k) for k in ("train", "val", "test")):
        sources = split_sources(root, tree, config, config_name, found)
        found.split_origin = f"{config_name} splits"
    else:
        sources = _folder_sources(root, tree)
        found.split_origin = "YOLO split folders"
    names, names_from = _names(root, tree, config, config_name, annotations)
    found.table = ClassTable.from_names(names, names_from)
    found.class_names = names
    paired = _pair(tree, sources, found)
    labelled = [label for _, _, label in paired if label is not None]
    texts = _read_sample(root, labelled)
    keypoints = keypoint_fields(config, config_name) if config_name else 0
    found.task, found.task_why = _task(root, labelled, texts, keypoints, annotations)
    values = int(config["kpt_shape"][1]) if keypoints else 3
    if found.task == "keypoints":
        found.keypoints = skeleton(config, config_name)
    _note_bad_lines(texts, len(names), keypoints, values, found)
    if keypoints and found.task != "keypoints":
        found.left_out.append(
            f"keypoints: {config.get('kpt_shape')} per object (kpt_shape in {config_name}) "
            "are not packed, only each pose label's box and class"
        )
    for image, split, label in paired:
        digest = digest_of([len(names), found.task, label is not None, keypoints])
        if found.task == "keypoints":
            digest = digest_of([digest, values])
        files = (label,) if label is not None else ()
        shown = label or _label_of(image)
        recipe = YoloObjects(shown, len(names), found.task, digest, files, keypoints, values)
        found.items.append((image, split, recipe, None))
    backgrounds = len(paired) - len(labelled)
    if backgrounds:
        found.notes.append(
            f"{backgrounds} image{' has' if backgrounds == 1 else 's have'} no label file: "
            "background, no objects"
        )
    shown = ", ".join(s.shown for s in sources)
    found.why = (
        f"YOLO: {config_name or 'no data.yaml'}, {len(names)} classes ({names_from}); {shown}"
    )
    return found


def _label_pairs(tree: Tree) -> list[tuple[str, str]]:
    """(images folder, labels folder) siblings whose labels side holds .txt files."""
    pairs = []
    for rel, node in tree.items():
        if "images" in node.dirs and "labels" in node.dirs:
            labels = join(rel, "labels")
            if any(ext(n) == ".txt" for _, names in folders(tree, labels) for n in names):
                pairs.append((join(rel, "images"), labels))
    return sorted(pairs)


def _folder_sources(root: Path, tree: Tree) -> list[ImageSource]:
    """Without split names in data.yaml: every images/ folder that has a labels/ sibling,
    each image's split from its folders (`images/train/`, `train/images/`; `valid` is val)."""
    pairs = _label_pairs(tree)
    if not pairs:
        raise SourceError(
            f"{flag('layout', NAME)}: {root} has no YOLO layout (looked for {LOOKED_FOR})"
        )
    return [ImageSource("", images, f"{images}/ + {labels}/") for images, labels in pairs]


def _names(
    root: Path, tree: Tree, config: dict, config_name: str | None, annotations: AnnotationOptions
) -> tuple[list[str], str]:
    """The class names: --classes FILE, else data.yaml's, else a classes.txt / obj.names."""
    given = given_names(annotations)
    if given is not None:
        return given
    if config_name and ("names" in config or "nc" in config):
        return yaml_names(config, config_name), f"{config_name} names"
    for folder in ["", *(label for _, label in _label_pairs(tree))]:
        for name in NAMES_FILES:
            if name in tree[folder].files:
                rel = join(folder, name)
                names = [line.strip() for line in read_text(root / rel, rel).splitlines()]
                return [n for n in names if n], rel
    raise SourceError(
        f"YOLO labels in {root} but no class names: add a data.yaml with names (a list, or "
        f"{{0: name, ...}}), a classes.txt, or pass a names file as {flag('classes')}"
    )


def _label_of(image: str) -> str:
    """Ultralytics' `img2label_paths`: the last `/images/` becomes `/labels/`, the extension
    `.txt`."""
    head, sep, tail = ("/" + image).rpartition("/images/")
    path = head + "/labels/" + tail if sep else "/" + image
    return path[1:].rsplit(".", 1)[0] + ".txt"


def _pair(
    tree: Tree, sources: list[ImageSource], found: Found
) -> list[tuple[str, str, str | None]]:
    """Each image of the sources with its split and label file (None: a background image);
    label files without an image, other files and images outside the sources rejected."""
    images: dict[str, str] = {}  # image -> split
    for source in sources:
        listed = source.images
        if listed is None:
            listed = _images_below(tree, source.folder, found)
        for image in listed:
            split = source.split or _split_of(image)
            images.setdefault(image, split)
    labels = _label_files(tree, {_label_of(image).rpartition("/")[0] for image in images})
    paired = []
    for image, split in images.items():
        label = _label_of(image)
        paired.append((image, split, label if label in labels else None))
    for label in sorted(labels - {label for _, _, label in paired}):
        folder, _, name = label.rpartition("/")
        looked = "/images/".join(f"/{folder}/".rsplit("/labels/", 1))[1:]
        found.rejected.append(
            Rejection(label, f"label file without an image (looked for {looked}{name[:-4]}.*)")
        )
    _reject_outside(tree, set(images), found)
    return paired


def _images_below(tree: Tree, folder: str, found: Found) -> list[str]:
    """Every image under an image folder; its other files rejected, except label files that
    lie beside their images (no `images` folder on the way)."""
    images = []
    for rel, names in folders(tree, folder):
        for name in names:
            path = join(rel, name)
            if is_image(name):
                images.append(path)
            elif not (ext(name) == ".txt" and "/images/" not in f"/{path}"):
                found.rejected.append(not_image(path, name))
    return images


def _split_of(image: str) -> str:
    """The split an image's folders name; Roboflow's `valid` is `val`."""
    split = folder_split(image)
    return "val" if split.lower() == "valid" else split


def _label_files(tree: Tree, label_dirs: set[str]) -> set[str]:
    """The .txt files of the label folders (not a names file lying among them)."""
    found = set()
    for folder in label_dirs:
        node = tree.get(folder)
        if node is not None:
            found.update(
                join(folder, n) for n in node.files if ext(n) == ".txt" and n not in NAMES_FILES
            )
    return found


def _reject_outside(tree: Tree, images: set[str], found: Found) -> None:
    """Images that no split reads."""
    reason = "outside the YOLO image folders (not in any split of data.yaml or images/ folder)"
    for rel, names in folders(tree, ""):
        for name in names:
            path = join(rel, name)
            if is_image(name) and path not in images:
                found.rejected.append(Rejection(path, reason))


def _read_sample(root: Path, labels: list[str]) -> dict[str, str]:
    """The text of up to SAMPLED label files, spread evenly over all of them."""
    step = max(1, len(labels) // SAMPLED)
    return {rel: read_text(root / rel, rel) for rel in labels[::step][:SAMPLED]}


def _note_bad_lines(
    texts: dict[str, str], classes: int, keypoints: int, values: int, found: Found
) -> None:
    """Lines of the label files read that packing will leave out, counted in a note."""
    problems = []
    for rel, text in texts.items():
        recipe = YoloObjects(rel, classes, found.task, "", (rel,), keypoints, values)
        problems += recipe.objects(lambda _, text=text: text.encode(), (1, 1))[1]
    if problems:
        found.notes.append(
            f"{len(problems)} label line{'s' * (len(problems) != 1)} in the {len(texts)} label "
            f"files read will be left out (packing reads them all), e.g. {problems[0]}"
        )


def _task(
    root: Path,
    labels: list[str],
    texts: dict[str, str],
    keypoints: int,
    annotations: AnnotationOptions,
) -> tuple[str, str]:
    """The task and why: polygons in the label files read -> instances, else detection (pose
    labels give their boxes only)."""
    if keypoints:
        why = "pose labels (kpt_shape in data.yaml)"
        task = chosen_task("YOLO", annotations.task, "keypoints", ("keypoints", "detection"), why)
        if task == "detection":
            return task, f"{why}: their boxes; the keypoints are not packed"
        other = f"{flag('task', 'detection')} packs their boxes only"
        auto = "auto: " if annotations.task == "auto" else ""
        return task, f"{auto}{why}: each object's box, class and keypoints; {other}"
    kinds: set[str] = set()
    for text in texts.values():
        kinds |= text_kinds(text)
    read = len(texts)
    if annotations.task == "instances" and "polygon" not in kinds:
        for rel in (r for r in labels if r not in texts):
            read += 1
            if "polygon" in text_kinds(read_text(root / rel, rel)):
                kinds.add("polygon")
                break
    shown = f"all {read}" if read == len(labels) else f"{read} of {len(labels)}"
    if "polygon" in kinds:
        natural = "instances"
        why = f"polygon labels (cls x1 y1 x2 y2 ...) in the label files read ({shown})"
        other = f"{flag('task', 'detection')} packs their hull boxes only"
    else:
        natural = "detection"
        why = f"box labels (cls cx cy w h) only, in the label files read ({shown})"
        other = f"{flag('task', 'instances')} needs polygon labels"
    offered = TASKS if natural == "instances" else ("detection",)
    task = chosen_task("YOLO", annotations.task, natural, offered, why)
    return task, f"{'auto: ' if annotations.task == 'auto' else ''}{why}; {other}"
