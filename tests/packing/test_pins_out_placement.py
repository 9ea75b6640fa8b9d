"""Where a pack may go: OUT refused when it is blank, a URL naming no bucket, a file, or a
source folder (SRC, a list file's folder, the root, the masks folder) or a folder holding one;
accepted beside them, below SRC, or remote."""

from __future__ import annotations

import pytest

import packer
from packer.errors import PackError
from packer.packing.placement import check_out


@pytest.fixture()
def tree(tmp_path):
    for folder in ("data/images", "data/masks", "elsewhere"):
        (tmp_path / folder).mkdir(parents=True)
    (tmp_path / "data/list.txt").write_text("images/a.png\n")
    (tmp_path / "file.txt").write_text("x")
    return tmp_path


@pytest.mark.parametrize("out", ["", " ", "\t \n"])
def test_a_blank_out_is_refused(tree, out):
    with pytest.raises(PackError, match="is empty; name a folder"):
        check_out(tree / "data", out)


@pytest.mark.parametrize("out", ["s3://", "s3:///", "gs:////", "S3://"])
def test_a_url_naming_no_bucket_is_refused_with_its_scheme(tree, out):
    with pytest.raises(PackError, match=r"names no bucket; give one, e\.g\. s3://BUCKET|gs://"):
        check_out(tree / "data", out)


@pytest.mark.parametrize("out", ["s3://b", "s3://bucket/packed/", "gs://b/x"])
def test_a_url_with_a_bucket_is_accepted_beside_local_sources(tree, out):
    check_out(tree / "data", out, masks=tree / "data/masks")


def test_a_file_is_refused(tree):
    with pytest.raises(PackError, match="is a file"):
        check_out(tree / "data", tree / "file.txt")


@pytest.mark.parametrize(
    ("out", "what", "folder"),
    [
        ("data", "is", "data"),
        ("data/", "is", "data"),
        (".", "holds", "data"),
        ("data/masks", "is", "data/masks"),
        ("data/images", "is", "data/images"),
    ],
)
def test_a_source_folder_or_one_holding_it_is_refused(tree, out, what, folder):
    with pytest.raises(PackError, match=f" {what} the source folder {tree / folder}; a pack is"):
        check_out(tree / "data", tree / out, root=tree / "data/images", masks=tree / "data/masks")


def test_the_masks_folder_outside_src_is_a_source_folder_too(tree):
    for out in (tree / "elsewhere", tree / "elsewhere/../elsewhere"):
        with pytest.raises(PackError, match="is the source folder"):
            check_out(tree / "data/images", out, masks=tree / "elsewhere")
    check_out(tree / "data/images", tree / "packed", masks=tree / "elsewhere")


def test_a_list_file_makes_its_own_folder_the_source(tree):
    with pytest.raises(PackError, match=f"is the source folder {tree / 'data'};"):
        check_out(tree / "data/list.txt", tree / "data")
    check_out(tree / "data/list.txt", tree / "data/packed")  # below it: beside the images


def test_out_beside_or_below_the_sources_is_accepted(tree):
    for out in ("packed", "data-npy", "data/packed", "data/images-packed", "elsewhere"):
        check_out(tree / "data", tree / out, masks=tree / "data/masks")


def test_remote_sources_are_compared_by_url(tree):
    check_out("s3://b/data", "s3://b/data-npy")
    check_out("s3://b/data", "gs://b")  # another scheme never holds it
    check_out("s3://b/data", tree / "b")  # a local OUT never holds a URL
    for out, what in (("s3://b/data/", "is"), ("s3://b", "holds"), ("s3://b/", "holds")):
        with pytest.raises(PackError, match=f"{what} the source folder s3://b/data; a pack"):
            check_out("s3://b/data", out)


def test_a_remote_source_folder_is_named_by_its_url():
    with pytest.raises(PackError, match="is the source folder s3://b/data;"):
        check_out("s3://b/data", "s3://b/data")


def test_pack_refuses_out_before_reading_anything(tree):
    with pytest.raises(PackError, match="is the source folder"):
        packer.pack(tree / "data", out=tree / "data")
