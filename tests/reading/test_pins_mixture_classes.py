"""Class reconciliation at its edges, on manifests alone: packs that list the same classes in
another order, a pack's own ignore index, the last class of a reconciled table, the case of
"ignore" in a class map, colours, limits; and the lookup applied to a batch in place."""

from __future__ import annotations

import numpy as np
import pytest

from packer.errors import MixtureError
from packer.fields.presets import fields_for
from packer.reading.mixture_classes import (
    class_id_fields,
    class_map_of,
    reconcile,
    relabel,
)


def manifest(names, ignore=255, colors=None, mask_dtype="|u1") -> dict:
    colors = colors or [[i, 2 * i, 3 * i] for i in range(len(names))]
    return {
        "classes": [
            {"index": i, "name": n, "color": c}
            for i, (n, c) in enumerate(zip(names, colors, strict=True))
        ],
        "ignore_index": ignore,
        "fields": [{"name": "images", "dtype": "|u1"}, {"name": "masks", "dtype": mask_dtype}],
    }


def labels_of(count: int) -> list[str]:
    return [f"pack{k}" for k in range(count)]


def test_packs_listing_the_same_classes_in_another_order_are_reconciled_by_name():
    packs = [manifest(["cat", "dog", "eel"]), manifest(["eel", "cat", "dog"])]
    for task in ("classification", "detection"):
        r = reconcile(task, packs, labels_of(2), [None, None])
        assert [c["name"] for c in r.classes] == ["cat", "dog", "eel"]
        assert [c["index"] for c in r.classes] == [0, 1, 2]
        assert r.tables[0] is None and r.ignore_index is None
        assert r.tables[1].dtype == np.int32 and r.tables[1].tolist() == [2, 0, 1]
        # each class keeps the first pack's colour, not the later pack's
        assert [c["color"] for c in r.classes] == [[0, 0, 0], [1, 2, 3], [2, 4, 6]]
    # a batch of the second pack: eel, cat, dog, and the last class (dog, id 2) too
    labels = {"labels": np.array([0, 1, 2, 2, -1], np.int32)}
    relabel(
        labels, r.tables[1], class_id_fields(fields_for("detection", (1, 1), np.dtype(np.uint8)))
    )
    assert labels["labels"].tolist() == [2, 0, 1, 1, -1]  # padding (-1) left as it is


def test_masks_of_a_reordered_pack_map_every_id_and_their_ignore_index():
    packs = [manifest(["bg", "road", "car"]), manifest(["car", "bg", "road"])]
    r = reconcile("segmentation", packs, labels_of(2), [None, None])
    assert r.ignore_index == 255 and r.tables[0] is None
    table = r.tables[1]
    assert table.dtype == np.uint8 and len(table) == 256
    assert table[:3].tolist() == [2, 0, 1] and (table[3:] == 255).all()
    masks = np.array([[0, 1, 2], [255, 2, 0]], np.uint8)
    arrays = {"masks": masks}
    relabel(arrays, table, class_id_fields(fields_for("segmentation", (1, 1), np.dtype(np.uint8))))
    assert arrays["masks"] is masks  # in place
    assert masks.tolist() == [[2, 0, 1], [255, 1, 2]]


def test_a_pack_whose_own_ignore_index_differs_maps_it_to_the_mixtures():
    """With a class map the pack's ids get a table, and its ignore value (254) becomes the
    mixture's (the first pack's, 255), even though its class ids stay the same."""
    packs = [manifest(["bg", "road"]), manifest(["bg", "road"], ignore=254)]
    r = reconcile("segmentation", packs, labels_of(2), [None, {"road": "road"}])
    assert r.ignore_index == 255 and r.tables[0] is None
    table = r.tables[1]
    assert table[:2].tolist() == [0, 1] and table[254] == 255 and table[255] == 255


def test_identical_classes_with_another_ignore_index_still_map_the_ignore_pixels():
    packs = [manifest(["bg", "road"]), manifest(["bg", "road"], ignore=254)]
    r = reconcile("segmentation", packs, labels_of(2), [None, None])
    assert r.ignore_index == 255
    assert r.tables[1] is not None and r.tables[1][254] == 255


def test_identical_tables_need_no_lookup():
    packs = [manifest(["a", "b"]), manifest(["a", "b"])]
    for task in ("segmentation", "detection"):
        r = reconcile(task, packs, labels_of(2), [None, None])
        assert r.tables == [None, None]
        assert r.classes == [
            {"index": 0, "name": "a", "color": [0, 0, 0]},
            {"index": 1, "name": "b", "color": [1, 2, 3]},
        ]
        assert r.ignore_index == (255 if task == "segmentation" else None)
    # an identity class map changes nothing either
    r = reconcile("segmentation", packs, labels_of(2), [None, {"a": "a"}])
    assert r.tables == [None, None]


def test_the_last_class_of_a_reconciled_table_is_mapped():
    """Pack 1's last class (`z`, id 3) is new to the mixture: it becomes the mixture's last."""
    packs = [manifest(["a", "b", "c"]), manifest(["c", "b", "a2", "z"])]
    r = reconcile("segmentation", packs, labels_of(2), [None, {"a2": "a"}])
    assert [c["name"] for c in r.classes] == ["a", "b", "c", "z"]
    assert r.tables[1][:4].tolist() == [2, 1, 0, 3] and r.tables[1][4] == 255
    masks = np.array([3, 2, 1, 0, 255, 4], np.uint8)
    relabel({"masks": masks}, r.tables[1], ("masks",))
    assert masks.tolist() == [3, 0, 1, 2, 255, 255]
    assert r.classes[3] == {"index": 3, "name": "z", "color": [3, 6, 9]}  # its own colour


def test_wide_masks_get_a_table_of_every_uint16_value():
    packs = [manifest(["a", "b"], ignore=65535, mask_dtype="<u2"),
             manifest(["b", "a"], ignore=65535, mask_dtype="<u2")]  # fmt: skip
    r = reconcile("segmentation", packs, labels_of(2), [None, None])
    table = r.tables[1]
    assert table.dtype == np.uint16 and len(table) == 65536
    assert table[:2].tolist() == [1, 0] and table[2] == table[65535] == 65535
    masks = np.array([0, 1, 65535, 7], np.uint16)
    relabel({"masks": masks}, table, ("masks",))
    assert masks.tolist() == [1, 0, 65535, 65535]


@pytest.mark.parametrize("word", ["ignore", "IGNORE", "Ignore", None])
def test_ignore_in_a_class_map_in_any_case_is_the_ignore_index(word, tmp_path):
    assert class_map_of({"bar": word, "x": "Kept"}) == {"bar": None, "x": "Kept"}
    if word is not None:
        path = tmp_path / "map.csv"
        path.write_text(f"source,target\nbar,{word}\nx,Kept\n")
        assert class_map_of(path) == {"bar": None, "x": "Kept"}
    packs = [manifest(["bg", "disc", "bar"]), manifest(["bg", "disc", "bar"])]
    r = reconcile("segmentation", packs, labels_of(2), [None, {"bar": word}])
    assert [c["name"] for c in r.classes] == ["bg", "disc", "bar"]
    assert r.tables[1][:3].tolist() == [0, 1, 255]


def test_no_class_map_is_none():
    assert class_map_of(None) is None


def test_a_colour_comes_from_the_first_pack_that_gives_one():
    packs = [manifest(["a", "b"], colors=[[1, 1, 1], None]), manifest(["b", "c"])]
    r = reconcile("segmentation", packs, labels_of(2), [None, {"c": "c"}])
    assert [c["color"] for c in r.classes] == [[1, 1, 1], [0, 0, 0], [1, 2, 3]]


def test_packs_with_other_classes_and_no_class_map_are_refused_naming_the_difference():
    packs = [manifest(["a", "b"]), manifest(["a", "b"]), manifest(["a", "c"])]
    with pytest.raises(MixtureError, match=r"pack0 and pack2 do not share b, c: give a Stream"):
        reconcile("detection", packs, labels_of(3), [None, None, None])


def test_a_class_map_naming_a_class_the_pack_has_not_is_refused():
    with pytest.raises(MixtureError, match=r"pack1: class_map names 'x', 'y', which"):
        reconcile("detection", [manifest(["a"]), manifest(["a"])], labels_of(2),
                  [None, {"y": "a", "x": "a", "a": "a"}])  # fmt: skip


def test_only_masks_have_an_ignore_index_to_map_to():
    with pytest.raises(MixtureError, match="only masks have"):
        reconcile("detection", [manifest(["a", "b"])] * 2, labels_of(2), [None, {"b": None}])


def test_the_mixtures_classes_may_reach_but_not_pass_the_ignore_index():
    packs = [manifest(["a", "b"], ignore=3), manifest(["c", "a"], ignore=3)]
    r = reconcile("segmentation", packs, labels_of(2), [None, {"c": "c"}])
    assert [c["name"] for c in r.classes] == ["a", "b", "c"]  # ids 0..2, ignore 3
    assert r.tables[1][:3].tolist() == [2, 0, 3]
    packs.append(manifest(["d"], ignore=3))
    with pytest.raises(MixtureError, match=r"has 4 classes, so its class ids would reach"):
        reconcile("segmentation", packs, labels_of(3), [None, {"c": "c"}, None])


def test_identical_class_names_keep_the_first_packs_colours():
    packs = [manifest(["a", "b"], colors=[[9, 9, 9], [8, 8, 8]]), manifest(["a", "b"])]
    r = reconcile("segmentation", packs, labels_of(2), [None, None])
    assert [c["color"] for c in r.classes] == [[9, 9, 9], [8, 8, 8]]
    r = reconcile("segmentation", packs[::-1], labels_of(2), [None, None])
    assert [c["color"] for c in r.classes] == [[0, 0, 0], [1, 2, 3]]


def test_two_packs_with_other_classes_are_refused_naming_what_they_do_not_share():
    packs = [manifest(["a", "b", "x"]), manifest(["a", "c", "x"])]
    with pytest.raises(MixtureError, match=r"pack0 and pack1 do not share b, c: give"):
        reconcile("segmentation", packs, labels_of(2), [None, None])


def test_the_mixtures_ignore_index_is_the_first_packs():
    packs = [manifest(["a", "b"], ignore=255), manifest(["a", "b"], ignore=254)]
    assert reconcile("segmentation", packs, labels_of(2), [None, None]).ignore_index == 255
    assert reconcile("segmentation", packs[::-1], labels_of(2), [None, None]).ignore_index == 254


def test_ids_outside_a_short_table_stay_as_they_are():
    table = np.array([2, 0], np.int32)
    for dtype in (np.int32, np.uint8, np.int64):
        labels = np.array([0, 1, 2, 5, -1][: 4 if dtype == np.uint8 else 5], dtype)
        relabel({"labels": labels}, table, ("labels",))
        assert labels.tolist() == [2, 0, 2, 5, -1][: len(labels)]
    relabel({"other": np.array([0])}, table, ("labels",))  # a batch without the array: no-op
