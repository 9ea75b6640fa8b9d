"""The scratch folder the README's blocks run in: the sample set-up of `make sample` (small),
the published layouts the blocks name (built when a block names their folder), and an S3
bucket (moto's server on 127.0.0.1) holding the sample as `s3://bucket/raw`.

A new README section that packs a folder of its own adds a builder to FOLDERS.
"""

from __future__ import annotations

import json
import logging
import os
import re
import subprocess
import threading
from collections.abc import Callable
from pathlib import Path

import numpy as np
from PIL import Image

from packer.synthetic import make_classification, make_segmentation, shapes_scene
from tests import coco_fixtures, detection_fixtures
from tests import test_sources_voc as voc_fixtures
from tests import test_sources_yolo as yolo_fixtures

SAMPLE_COUNTS = {"train": 12, "val": 4}  # make sample writes 48 + 16 at 320x240
SAMPLE_SIZE = (64, 48)


def sample(root: Path, bin_dir: Path, makefile: Path) -> list[str]:
    """`make sample` at a small size: the synthetic set, then the recipe's other lines (the
    pack and `packer info`) as the Makefile writes them; returns the lines run."""
    make_segmentation(root / "data" / "sample", SAMPLE_COUNTS, SAMPLE_SIZE)
    recipe = re.search(r"^sample:.*\n((?:\t.*\n)+)", makefile.read_text(), re.M)[1]
    lines = [line.strip() for line in recipe.splitlines()]
    assert "packer.synthetic data/sample" in lines[0], lines[0]
    run = [line.replace("$(BIN)/", f"{bin_dir}/") for line in lines[1:]]
    for line in run:
        subprocess.run(["bash", "-c", line], cwd=root, check=True, capture_output=True)
    return lines


def _coco(root: Path) -> None:
    coco_fixtures.make_coco(root / "coco")
    coco_fixtures.make_panoptic(root / "coco")


def _my_images(root: Path) -> None:
    """Images, and COCO exports of them in the current folder: export.json, train.json and
    val.json."""
    names = coco_fixtures.write_images(root / "my_images", 6)
    per_image = coco_fixtures.instance_annotations()
    data = coco_fixtures.instances_json(names, per_image[:6])
    (root / "export.json").write_text(json.dumps(data))
    for split, part in (("train", slice(0, 4)), ("val", slice(4, 6))):
        chosen = coco_fixtures.instances_json(names[part], per_image[part])
        (root / f"{split}.json").write_text(json.dumps(chosen))


def _label_image(rng: np.random.Generator, values: tuple[int, ...]) -> np.ndarray:
    return np.repeat(rng.choice(values, 32)[None, :], 24, axis=0).astype(np.uint8)


def _cityscapes(root: Path) -> None:
    rng = np.random.default_rng(1)
    used = (0, 7, 8, 9, 11, 21, 23, 24, 26, 27, 33)
    for split, city in (("train", "aachen"), ("val", "lindau")):
        images = root / "cityscapes" / "leftImg8bit" / split / city
        masks = root / "cityscapes" / "gtFine" / split / city
        images.mkdir(parents=True)
        masks.mkdir(parents=True)
        for frame in range(2):
            base = f"{city}_000000_{frame:06d}"
            picture = rng.integers(0, 255, (24, 32, 3), np.uint8)
            Image.fromarray(picture).save(images / f"{base}_leftImg8bit.png")
            Image.fromarray(_label_image(rng, used)).save(masks / f"{base}_gtFine_labelIds.png")


def _ade20k(root: Path) -> None:
    rng = np.random.default_rng(2)
    for folder, prefix in (("training", "ADE_train"), ("validation", "ADE_val")):
        for kind in ("images", "annotations"):
            (root / "ADEChallengeData2016" / kind / folder).mkdir(parents=True)
        for i in range(2):
            name = f"{prefix}_{i + 1:08d}"
            base = root / "ADEChallengeData2016"
            picture = rng.integers(0, 255, (24, 32, 3), np.uint8)
            Image.fromarray(picture).save(base / "images" / folder / f"{name}.jpg")
            mask = _label_image(rng, (0, 1, 2, 13, 150))
            Image.fromarray(mask).save(base / "annotations" / folder / f"{name}.png")


CAMVID_CLASSES = (
    "Sky", "Building", "Pole", "Road", "Pavement", "Tree", "SignSymbol", "Fence", "Car",
    "Pedestrian", "Bicyclist", "Unlabelled",
)  # fmt: skip


def _camvid(root: Path) -> None:
    """CamVid as SegNet publishes it: train/ + trainannot/ grey class ids, with a names file."""
    rng = np.random.default_rng(3)
    for split in ("train", "val"):
        (root / "camvid" / split).mkdir(parents=True)
        (root / "camvid" / f"{split}annot").mkdir()
        for i in range(3):
            picture, _ = shapes_scene(rng, 32, 24)
            Image.fromarray(picture).save(root / "camvid" / split / f"f{i}.png")
            ids = _label_image(rng, tuple(range(12)))
            Image.fromarray(ids).save(root / "camvid" / f"{split}annot" / f"f{i}.png")
    (root / "camvid" / "class_names.txt").write_text("\n".join(CAMVID_CLASSES) + "\n")


def _voc(root: Path) -> None:
    """VOC: JPEGImages/ + SegmentationClass/ palette PNGs (255 = void), no names file."""
    rng = np.random.default_rng(4)
    palette = np.zeros((256, 3), np.uint8)
    palette[:21] = rng.integers(0, 255, (21, 3))
    (root / "voc" / "JPEGImages").mkdir(parents=True)
    (root / "voc" / "SegmentationClass").mkdir()
    for i in range(4):
        picture, _ = shapes_scene(rng, 32, 24)
        Image.fromarray(picture).save(root / "voc" / "JPEGImages" / f"2007_{i:06d}.jpg")
        ids = _label_image(rng, (0, 1, 15, 20, 255))
        mask = Image.fromarray(ids, "P")
        mask.putpalette(palette.flatten().tolist())
        mask.save(root / "voc" / "SegmentationClass" / f"2007_{i:06d}.png")


def _cvat(root: Path) -> None:
    detection_fixtures.make_cvat(root / "cvat_export")


def _roboflow(root: Path) -> None:
    detection_fixtures.make_roboflow(root / "roboflow_export")


def _yolo(root: Path) -> None:
    yolo_fixtures.write(root / "yolo_dataset", yolo_fixtures.DETECT)


def _yolo_seg(root: Path) -> None:
    yolo_fixtures.write(root / "yolo_seg", yolo_fixtures.SEGMENT)


def _voc_detection(root: Path) -> None:
    voc_fixtures.voc(root / "VOCdevkit" / "VOC2012")


def _photos(root: Path) -> None:
    """Class folders of JPEGs, as flow_from_directory reads them."""
    make_classification(root / "photos", {"cats": 10, "dogs": 10}, (80, 60))


FOLDERS: dict[str, Callable[[Path], None]] = {
    "photos": _photos,
    "coco": _coco,
    "my_images": _my_images,
    "cityscapes": _cityscapes,
    "ADEChallengeData2016": _ade20k,
    "camvid": _camvid,
    "voc": _voc,
    "cvat_export": _cvat,
    "roboflow_export": _roboflow,
    "yolo_dataset": _yolo,
    "yolo_seg": _yolo_seg,
    "VOCdevkit": _voc_detection,
}


def build_named(root: Path, code: str, built: set[str]) -> None:
    """Build every FOLDERS folder that `code` names as a path and that is not there yet."""
    for name, build in FOLDERS.items():
        if name not in built and re.search(rf"(?<![\w./-]){re.escape(name)}/", code):
            build(root)
            built.add(name)


def start_s3(root: Path, env: dict[str, str]) -> Callable[[], None]:
    """moto's S3 server on a free local port, `env` pointed at it, and `s3://bucket/raw`
    holding the sample; returns what stops the server."""
    from moto.moto_server.werkzeug_app import (
        DomainDispatcherApplication,
        MotoRequestHandler,
        create_backend_app,
    )
    from werkzeug.serving import make_server

    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    app = DomainDispatcherApplication(create_backend_app)
    server = make_server("127.0.0.1", 0, app, threaded=True, request_handler=MotoRequestHandler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    nowhere = str(root / ".aws-absent")
    env.update(
        AWS_ACCESS_KEY_ID="readme-test",
        AWS_SECRET_ACCESS_KEY="readme-test-secret",
        AWS_DEFAULT_REGION="us-east-1",
        AWS_ENDPOINT_URL=f"http://127.0.0.1:{server.port}",
        AWS_EC2_METADATA_DISABLED="true",
        AWS_SHARED_CREDENTIALS_FILE=nowhere,
        AWS_CONFIG_FILE=nowhere,
    )
    os.environ.update(env)
    import fsspec

    fs = fsspec.filesystem("s3", use_listings_cache=False, skip_instance_cache=True)
    fs.mkdir("bucket")
    fs.put(str(root / "data" / "sample") + "/", "bucket/raw/", recursive=True)
    return server.shutdown
