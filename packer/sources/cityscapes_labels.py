"""The official Cityscapes label table (cityscapesScripts' `helpers/labels.py`), as data.

Masks (`*_labelIds.png`) hold the label `id`; training uses the 19 `train_id`s, every other
label (train id 255, and -1 for the license plate, which never appears in a mask) is ignored.
The rows are copied exactly, in the official order, so names and colours match the scripts
every Cityscapes user already trusts.
"""

from __future__ import annotations

from typing import NamedTuple

from ..labels import IGNORED, ClassInfo, ClassTable


class Label(NamedTuple):
    """One row of the official table (the same fields, in snake case)."""

    name: str
    id: int
    train_id: int
    category: str
    category_id: int
    has_instances: bool
    ignore_in_eval: bool
    color: tuple[int, int, int]


# fmt: off
LABELS = (
    #      name                    id  trainId  category        catId  hasInst  ignore  color
    Label("unlabeled",             0,   255,  "void",          0,  False,  True,  (0, 0, 0)),
    Label("ego vehicle",           1,   255,  "void",          0,  False,  True,  (0, 0, 0)),
    Label("rectification border",  2,   255,  "void",          0,  False,  True,  (0, 0, 0)),
    Label("out of roi",            3,   255,  "void",          0,  False,  True,  (0, 0, 0)),
    Label("static",                4,   255,  "void",          0,  False,  True,  (0, 0, 0)),
    Label("dynamic",               5,   255,  "void",          0,  False,  True,  (111, 74, 0)),
    Label("ground",                6,   255,  "void",          0,  False,  True,  (81, 0, 81)),
    Label("road",                  7,     0,  "flat",          1,  False,  False, (128, 64, 128)),
    Label("sidewalk",              8,     1,  "flat",          1,  False,  False, (244, 35, 232)),
    Label("parking",               9,   255,  "flat",          1,  False,  True,  (250, 170, 160)),
    Label("rail track",           10,   255,  "flat",          1,  False,  True,  (230, 150, 140)),
    Label("building",             11,     2,  "construction",  2,  False,  False, (70, 70, 70)),
    Label("wall",                 12,     3,  "construction",  2,  False,  False, (102, 102, 156)),
    Label("fence",                13,     4,  "construction",  2,  False,  False, (190, 153, 153)),
    Label("guard rail",           14,   255,  "construction",  2,  False,  True,  (180, 165, 180)),
    Label("bridge",               15,   255,  "construction",  2,  False,  True,  (150, 100, 100)),
    Label("tunnel",               16,   255,  "construction",  2,  False,  True,  (150, 120, 90)),
    Label("pole",                 17,     5,  "object",        3,  False,  False, (153, 153, 153)),
    Label("polegroup",            18,   255,  "object",        3,  False,  True,  (153, 153, 153)),
    Label("traffic light",        19,     6,  "object",        3,  False,  False, (250, 170, 30)),
    Label("traffic sign",         20,     7,  "object",        3,  False,  False, (220, 220, 0)),
    Label("vegetation",           21,     8,  "nature",        4,  False,  False, (107, 142, 35)),
    Label("terrain",              22,     9,  "nature",        4,  False,  False, (152, 251, 152)),
    Label("sky",                  23,    10,  "sky",           5,  False,  False, (70, 130, 180)),
    Label("person",               24,    11,  "human",         6,  True,   False, (220, 20, 60)),
    Label("rider",                25,    12,  "human",         6,  True,   False, (255, 0, 0)),
    Label("car",                  26,    13,  "vehicle",       7,  True,   False, (0, 0, 142)),
    Label("truck",                27,    14,  "vehicle",       7,  True,   False, (0, 0, 70)),
    Label("bus",                  28,    15,  "vehicle",       7,  True,   False, (0, 60, 100)),
    Label("caravan",              29,   255,  "vehicle",       7,  True,   True,  (0, 0, 90)),
    Label("trailer",              30,   255,  "vehicle",       7,  True,   True,  (0, 0, 110)),
    Label("train",                31,    16,  "vehicle",       7,  True,   False, (0, 80, 100)),
    Label("motorcycle",           32,    17,  "vehicle",       7,  True,   False, (0, 0, 230)),
    Label("bicycle",              33,    18,  "vehicle",       7,  True,   False, (119, 11, 32)),
    Label("license plate",        -1,    -1,  "vehicle",       7,  False,  True,  (0, 0, 142)),
)
# fmt: on

IGNORED_TRAIN_IDS = (255, -1)  # train ids that mean "not a training class"


def train_table() -> ClassTable:
    """The 19 train classes (name and colour of the first label with each train id, as the
    scripts' inverse mapping takes them) and every label id's train id or IGNORED."""
    first: dict[int, Label] = {}
    for label in LABELS:
        if label.train_id not in IGNORED_TRAIN_IDS:
            first.setdefault(label.train_id, label)
    classes = tuple(ClassInfo(t, first[t].name, first[t].color) for t in sorted(first))
    value_map = tuple(
        (label.id, IGNORED if label.train_id in IGNORED_TRAIN_IDS else label.train_id)
        for label in LABELS
        if label.id >= 0  # the license plate has no id: it never appears in a mask
    )
    return ClassTable(classes, "cityscapesScripts labels.py (train ids)", value_map=value_map)
