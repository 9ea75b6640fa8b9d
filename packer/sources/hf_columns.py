"""Which columns of a Hugging Face dataset hold what: the image, a label image, class labels,
objects; from the Arrow schema and the `datasets` features (`ClassLabel` names).

The features come from the file's schema metadata (key `huggingface`, as `datasets` writes
Parquet and Arrow files) or from `dataset_info.json`; without them an image is still known by
its storage type, a `{bytes, path}` struct. Anything that cannot be used is one line naming the
column and what would make it work.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from ..errors import SourceError
from ..flags import flag

# Names that say an image column holds a label image (segmentation), not the input.
MASK_NAMES = ("mask", "label", "annotation", "segmentation", "seg", "gt", "semantic")
LABEL_NAMES = ("label", "labels", "class", "category", "target", "fine_label", "coarse_label")
WRAPPERS = ("Sequence", "List", "LargeList")  # list features: their "feature" is the item


@dataclass
class Columns:
    """The columns taken, each for one job, and one line per column left unused."""

    image: str
    mask: str | None = None
    label: str | None = None
    objects: str | None = None
    class_names: list[str] | None = None  # ClassLabel names of `label` or objects' category
    unused: list[str] = field(default_factory=list)

    def described(self) -> str:
        """The columns as a dry run names them: `image -> images, label -> class (...)`."""
        taken = [f"{self.image} -> images"]
        if self.mask:
            taken.append(f"{self.mask} -> masks (label image)")
        names = f"ClassLabel, {len(self.class_names or [])} names"
        if self.label:
            taken.append(f"{self.label} -> class ({names})")
        if self.objects:
            taken.append(
                f"{self.objects}.bbox -> boxes (COCO x, y, w, h), "
                f"{self.objects}.category -> object classes ({names})"
            )
        return ", ".join(taken)


def features_of(metadata: dict | None) -> dict:
    """The `datasets` features of a file's schema metadata ({} when it holds none)."""
    raw = (metadata or {}).get(b"huggingface")
    if not raw:
        return {}
    try:
        return json.loads(raw).get("info", {}).get("features") or {}
    except (ValueError, AttributeError):
        return {}


def choose(schema, features: dict, task: str, shown: str) -> Columns:
    """The columns of a dataset for the task asked ("auto": objects give detection, a label
    image segmentation, class labels classification); SourceError in one line otherwise."""
    images, objects, labels, strings, unknown = [], [], [], [], []
    for column in schema:
        name, feature = column.name, features.get(column.name)
        if _is_image(column.type, feature):
            images.append(name)
        elif _is_objects(column.type):
            objects.append(name)
        elif _type(feature) == "ClassLabel":
            labels.append(name)
        elif _is_struct(column.type):
            unknown.append(column)
        elif _is_string(column.type) and name.lower() in LABEL_NAMES:
            strings.append(name)
    if not images:
        raise SourceError(_no_image(shown, unknown, schema))
    masks = [n for n in images if any(part in n.lower() for part in MASK_NAMES)]
    inputs = [n for n in images if n not in masks] or images[:1]
    found = Columns(inputs[0])
    masks = [n for n in masks if n != found.image]
    want = _task(task, objects, masks, labels, shown)
    if want == "detection":
        found.objects = objects[0]
        found.class_names = _category_names(features.get(found.objects), found.objects, shown)
    elif want == "segmentation":
        found.mask = masks[0]
    else:
        if not labels:
            raise SourceError(_no_label(shown, strings))
        found.label = labels[0]
        found.class_names = list(features[found.label]["names"])
    taken = {found.image, found.mask, found.label, found.objects}
    found.unused = [f"column {c.name!r} ({c.type}) not used" for c in schema if c.name not in taken]
    return found


def _task(asked: str, objects: list, masks: list, labels: list, shown: str) -> str:
    """The task the columns give: the one asked when they can give it, else one line."""
    offered = [
        task
        for task, columns in (
            ("detection", objects),
            ("segmentation", masks),
            ("classification", labels),
        )
        if columns
    ]
    if asked == "auto":
        return offered[0] if offered else "classification"
    if asked in offered:
        return asked
    gives = " or ".join(offered) or "no task (no label column)"
    raise SourceError(
        f"{flag('task', asked)}: {shown} gives {gives}, not {asked} (detection needs an objects "
        "column with bbox and category, segmentation a second image column named like "
        "mask/label/annotation, classification a ClassLabel column)"
    )


def _no_image(shown: str, unknown: list, schema) -> str:
    """The one line for a file without an image column (naming an unknown struct if any)."""
    if unknown:
        column = unknown[0]
        parts = ", ".join(column.type[i].name for i in range(column.type.num_fields))
        return (
            f"{shown}: column {column.name!r} is a struct of ({parts}) packer does not know: an "
            "image column is a {bytes, path} struct (datasets' Image feature); cast it with "
            "datasets' cast_column(..., Image()) or store the encoded image in a 'bytes' field"
        )
    names = ", ".join(f"{c.name} ({c.type})" for c in schema)
    return (
        f"{shown}: no image column (it holds {names}): packer packs images stored as "
        "{bytes, path} structs (datasets' Image feature); cast the column with "
        "cast_column(..., Image())"
    )


def _no_label(shown: str, strings: list[str]) -> str:
    """The one line for a classification dataset without ClassLabel names."""
    if strings:
        return (
            f"{shown}: column {strings[0]!r} holds strings but the features give no ClassLabel "
            f"names: encode it with datasets' class_encode_column({strings[0]!r}) (or give it "
            "a ClassLabel feature) so each string has a class index"
        )
    return (
        f"{shown}: no label column: classification needs a ClassLabel column, segmentation a "
        "second image column (mask/label/annotation), detection an objects column with bbox "
        "and category"
    )


def _category_names(feature, column: str, shown: str) -> list[str]:
    """The ClassLabel names of an objects column's `category`."""
    inner = _unwrap(feature)
    category = _unwrap(inner.get("category")) if isinstance(inner, dict) else None
    if _type(category) != "ClassLabel":
        raise SourceError(
            f"{shown}: {column}.category has no ClassLabel names in the features: give it a "
            "ClassLabel feature (datasets' Sequence({'bbox': ..., 'category': ClassLabel(names="
            "[...])})) so each category has a name"
        )
    return list(category["names"])


def _unwrap(feature):
    """A list feature's item (Sequence, List, or the [item] shorthand), repeatedly."""
    while True:
        if isinstance(feature, list) and len(feature) == 1:
            feature = feature[0]
        elif _type(feature) in WRAPPERS:
            feature = feature.get("feature")
        else:
            return feature


def _type(feature) -> str | None:
    return feature.get("_type") if isinstance(feature, dict) else None


def _is_struct(arrow_type) -> bool:
    return getattr(arrow_type, "num_fields", 0) > 0 and str(arrow_type).startswith("struct")


def _is_string(arrow_type) -> bool:
    return str(arrow_type) in ("string", "large_string")


def _is_image(arrow_type, feature) -> bool:
    """datasets' Image feature, or its storage: a struct with binary `bytes` and `path`."""
    if _type(feature) == "Image":
        return True
    if not _is_struct(arrow_type):
        return False
    children = {arrow_type[i].name: str(arrow_type[i].type) for i in range(arrow_type.num_fields)}
    return children.get("bytes") in ("binary", "large_binary") and "path" in children


def _is_objects(arrow_type) -> bool:
    """A struct of lists with bbox and category, or a list of such structs."""
    item = getattr(arrow_type, "value_type", None)
    inner = item if item is not None and _is_struct(item) else arrow_type
    if not _is_struct(inner):
        return False
    names = {inner[i].name for i in range(inner.num_fields)}
    return {"bbox", "category"} <= names
