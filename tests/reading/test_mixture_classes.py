"""Packs that must agree to be mixed: the same task and image size, and classes identical or
reconciled by name through a class map given at read time (a lookup on masks and labels as they
are read, never a re-pack); anything else is refused in one line."""

from __future__ import annotations

import numpy as np
import pytest

import packer
from packer.errors import MixtureError
from packer.reading.loader import Loader
from tests.fixtures.mixture import cls_pack, seg_pack

IGNORE = 255


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    return tmp_path_factory.mktemp("mixcls")


@pytest.fixture(scope="module")
def seg(root):
    """The same scenes packed twice: as they are, and with disc -> circle, box -> square."""
    plain = seg_pack(root, 6, seed=0)
    renames = root / "renames.csv"
    renames.write_text("source,target\ndisc,circle\nbox,square\n")
    return plain, seg_pack(root, 6, seed=0, class_map=renames)


def rows_by_pack(loader: Loader, batch: int) -> tuple[np.ndarray, np.ndarray, dict]:
    """(pack, sample) of each row of a batch, and the batch's arrays."""
    ids = np.sort(loader.indices(batch))
    pack, sample = loader.split.locate(ids)
    return pack, sample, loader.read(batch)


def test_identical_tables_mix_as_they_are_and_the_classes_are_reported(seg):
    plain, _ = seg
    mix = packer.Mixture([packer.Stream(plain), packer.Stream(plain, split="val")])
    part = mix.open("train")
    assert part.dataset.class_names == ["background", "disc", "box", "bar"]
    assert part.classes.tables == [None, None]
    assert "classes (4): background, disc, box, bar" in mix.describe()


def test_masks_are_reconciled_by_name_through_a_read_time_class_map(seg):
    plain, renamed = seg
    assert packer.open(renamed).class_names == ["background", "circle", "square", "bar"]
    mix = packer.Mixture(
        [packer.Stream(plain), packer.Stream(renamed, class_map={"circle": "disc", "bar": None})]
    )
    loader = Loader(mix, "train", 12, seed=0)
    assert loader.dataset.class_names == ["background", "disc", "box", "bar", "square"]
    truth = packer.open(plain)["train"].reader.read(np.arange(6))["masks"].copy()
    pack, sample, arrays = rows_by_pack(loader, 0)
    lookup = np.array([0, 1, 4, IGNORE])  # renamed's ids -> the mixture's, bar ignored
    for row, (k, s) in enumerate(zip(pack, sample, strict=True)):
        stored = truth[s] if k == 0 else np.where(truth[s] == 255, 255, lookup[truth[s]])
        assert np.array_equal(arrays["masks"][row], stored)
    assert set(pack.tolist()) == {0, 1}
    assert (arrays["masks"][pack == 1] == 4).any() and not (arrays["masks"][pack == 1] == 3).any()
    one_hot = Loader(mix, "train", 12, seed=0, one_hot=True).batch(0)[1]
    assert one_hot.shape[-1] == 5  # one-hot over the mixture's classes


def test_labels_are_reconciled_by_name_and_unmapped_names_join_the_classes(root):
    animals = cls_pack(root, {"cats": 3, "dogs": 3, "owls": 2}, seed=0)
    others = cls_pack(root, {"dogs": 2, "foxes": 3}, seed=1)
    with pytest.raises(MixtureError, match=r"classes differ.*cats, foxes, owls.*class_map") as e:
        packer.Mixture([packer.Stream(animals), packer.Stream(others)]).open()
    assert "\n" not in str(e.value)
    mix = packer.Mixture([packer.Stream(animals), packer.Stream(others, class_map={})])
    loader = Loader(mix, "train", 13, seed=0)
    assert loader.dataset.class_names == ["cats", "dogs", "owls", "foxes"]
    truth = packer.open(others)["train"].reader.read(np.arange(5))["labels"].copy()
    pack, sample, arrays = rows_by_pack(loader, 0)
    own = packer.open(animals)["train"].reader.read(np.arange(8))["labels"].copy()
    for row, (k, s) in enumerate(zip(pack, sample, strict=True)):
        expected = own[s] if k == 0 else [1, 3][truth[s]]  # dogs -> 1, foxes -> 3
        assert arrays["labels"][row] == expected
    merged = packer.Mixture(
        [packer.Stream(animals), packer.Stream(others, class_map={"foxes": "cats"})]
    )
    assert merged.open().dataset.class_names == ["cats", "dogs", "owls"]
    with pytest.raises(MixtureError, match="only masks have"):
        packer.Mixture(
            [packer.Stream(animals), packer.Stream(others, class_map={"foxes": None})]
        ).open()


def test_a_class_map_naming_a_class_the_pack_has_not_is_refused(seg):
    plain, renamed = seg
    mix = packer.Mixture([packer.Stream(plain), packer.Stream(renamed, class_map={"disc": "x"})])
    with pytest.raises(MixtureError, match="class_map names 'disc', which this pack has not"):
        mix.open()


def test_a_class_map_file_works_as_a_mapping(seg, tmp_path):
    plain, renamed = seg
    csv = tmp_path / "back.csv"
    csv.write_text("circle,disc\nsquare,box\n")
    part = packer.Mixture([packer.Stream(plain), packer.Stream(renamed, class_map=csv)]).open()
    assert part.dataset.class_names == ["background", "disc", "box", "bar"]
    assert part.classes.tables[1] is None  # the names line up again: nothing to look up


def test_packs_of_other_tasks_or_sizes_are_refused_naming_both(root, seg):
    plain, _ = seg
    animals = cls_pack(root, {"cats": 2, "dogs": 2}, seed=2)
    with pytest.raises(MixtureError, match=r"different tasks.*segmentation.*classification"):
        packer.Mixture([packer.Stream(plain), packer.Stream(animals)]).open()
    other_size = root / "other-size"
    src = packer.open(plain).manifest["source"]["root"]
    packer.pack(src, out=other_size, size=(16, 12))
    with pytest.raises(MixtureError, match=r"image sizes differ: .* is 32x24, .* is 16x12") as e:
        packer.Mixture([packer.Stream(plain), packer.Stream(other_size)]).open()
    assert "\n" not in str(e.value)


def test_a_pack_read_only_in_file_order_is_refused_and_the_cli_says_so_in_one_line(
    root, seg, tmp_path
):
    from click.testing import CliRunner

    from packer.cli import main

    plain, _ = seg
    src = packer.open(plain).manifest["source"]["root"]
    gzip = packer.pack(src, out=root / "gzip", format="tfrecord", size=(32, 24), compression="gzip")
    mix = packer.Mixture([packer.Stream(plain), packer.Stream(gzip.root)])
    with pytest.raises(MixtureError, match="gzip tfrecord pack is read only in file order"):
        mix.open()
    saved = tmp_path / "mix.json"
    mix.save(saved)
    result = CliRunner().invoke(main, ["preview", str(saved), "--out", str(tmp_path / "g.png")])
    lines = result.output.strip().splitlines()
    assert result.exit_code == 1 and len(lines) == 1 and lines[0].startswith("Error:")
