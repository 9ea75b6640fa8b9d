"""packer.Augment moves boxes, labels and per-object masks with the image, in all executors."""

from __future__ import annotations

import importlib.util
import re

import numpy as np
import pytest

from packer.augment import Augment, numpy_exec
from packer.augment.idg import from_idg
from tests.fixtures.packs import REPO

HW = (40, 56)
COLOURS = np.array([[200, 30, 30], [30, 200, 30], [30, 30, 200], [220, 220, 40], [40, 220, 220]])


def scene(n: int = 4, hw: tuple[int, int] = HW, seed: int = 0, objects=(0, 7)):
    """Grey images with coloured rectangles; their boxes (integer edges) and masks.

    Objects may poke out of the frame (their box and mask are cut at it); later objects
    paint over earlier ones in the image, never in their own masks."""
    rng = np.random.default_rng(seed)
    h, w = hw
    images = np.full((n, h, w, 3), 90, np.uint8)
    targets = []
    for image in images:
        count = int(rng.integers(*objects, endpoint=True))
        x1, y1 = rng.integers(-3, w - 4, count), rng.integers(-3, h - 4, count)
        x2, y2 = x1 + rng.integers(3, 18, count), y1 + rng.integers(3, 14, count)
        boxes = np.stack([x1, y1, x2, y2], 1).clip(0, [w, h, w, h]).astype(np.float32)
        masks = np.zeros((count, h, w), np.uint8)
        labels = rng.integers(0, len(COLOURS), count)
        for k, (a, b, c, d) in enumerate(boxes.astype(int)):
            masks[k, b:d, a:c] = 1
            image[b:d, a:c] = COLOURS[labels[k]]
        targets.append(
            {
                "boxes": boxes,
                "labels": labels.astype(np.int64),
                "masks": masks,
                "iscrowd": (rng.random(count) < 0.3).astype(np.uint8),
                "image_id": 1000 + len(targets),
            }
        )
    return images, targets


def to_torch(targets):
    import torch

    return [
        {k: torch.as_tensor(v) if isinstance(v, np.ndarray) else v for k, v in t.items()}
        for t in targets
    ]


def padded(targets, max_boxes: int, hw: tuple[int, int] = HW) -> dict:
    """KerasHub's padded batch: -1 boxes and labels, zero masks and flags."""
    b = len(targets)
    out = {
        "boxes": np.full((b, max_boxes, 4), -1, np.float32),
        "labels": np.full((b, max_boxes), -1, np.int32),
        "masks": np.zeros((b, max_boxes, *hw), np.uint8),
        "iscrowd": np.zeros((b, max_boxes), np.uint8),
    }
    out = {k: v for k, v in out.items() if k in targets[0]}
    for i, t in enumerate(targets):
        for key in out:
            out[key][i, : len(t["boxes"])] = t[key]
    return out


def unpadded(batch: dict) -> list[dict]:
    """The padded batch back as one dict per sample (slots with a label >= 0)."""
    arrays = {k: v.numpy() for k, v in batch.items()}
    return [
        {k: v[i][arrays["labels"][i] >= 0] for k, v in arrays.items()}
        for i in range(len(arrays["labels"]))
    ]


def run_numpy(images, params, targets):
    return numpy_exec.apply(images, None, params, targets=targets)[2]


def run_torch(images, params, targets):
    from packer.augment import torch_exec

    _, _, moved = torch_exec.apply(images, None, params, targets=to_torch(targets))
    return [{k: v.numpy() if hasattr(v, "numpy") else v for k, v in t.items()} for t in moved]


def run_tf(images, params, targets):
    from packer.augment import tf_exec

    max_boxes = max([len(t["boxes"]) for t in targets] + [1]) + 2  # padding to keep at the end
    _, _, moved = tf_exec.apply(images, None, params, targets=padded(targets, max_boxes))
    got = unpadded(moved)
    labels = moved["labels"].numpy()
    kept = (labels >= 0).sum(1)
    for row, count in zip(labels, kept, strict=True):  # padding stays after the objects
        assert (row[:count] >= 0).all() and (row[count:] == -1).all()
    assert (moved["boxes"].numpy()[labels < 0] == -1).all()
    if "masks" in moved:
        assert not moved["masks"].numpy()[labels < 0].any()
    return got


def executors():
    found = [("numpy", run_numpy)]
    if importlib.util.find_spec("torch"):
        found.append(("torch", run_torch))
    if importlib.util.find_spec("tensorflow"):
        found.append(("tf", run_tf))
    return found


EXECUTORS = executors()
CONFIGS = {
    "affine": dict(
        rotation_range=35, width_shift_range=0.2, height_shift_range=0.2, zoom_range=0.3,
        shear_range=10, horizontal_flip=True, vertical_flip=True,
    ),
    "crop": dict(random_crop=(28, 36), horizontal_flip=True, rotation_range=10),
    "resized_crop": dict(random_resized_crop=dict(size=(32, 32), scale=(0.3, 1.0))),
}  # fmt: skip


@pytest.mark.parametrize(
    ("transform", "want"),
    [
        ({"flip_horizontal": True}, [[56 - 20, 5, 56 - 4, 15], [56 - 56, 30, 56 - 50, 40]]),
        ({"flip_vertical": True}, [[4, 40 - 15, 20, 40 - 5], [50, 40 - 40, 56, 40 - 30]]),
        ({"tx": -3.0, "ty": 2.0}, [[7, 3, 23, 13], [53, 28, 56, 38]]),  # content moves +3, -2
        ({"tx": -10.0}, [[14, 5, 30, 15]]),  # the second box leaves the frame
        ({"zx": 0.5, "zy": 0.5}, [[-20, -10, 12, 10], [72, 40, 84, 60]]),  # 2x about the centre
    ],
)
@pytest.mark.parametrize("name", [name for name, _ in EXECUTORS])
def test_flips_and_shifts_give_exact_coordinates(transform, want, name):
    run = dict(EXECUTORS)[name]
    boxes = np.array([[4, 5, 20, 15], [50, 30, 56, 40]], np.float32)
    target = {"boxes": boxes, "labels": np.array([3, 1], np.int64)}
    params = from_idg(transform, HW)
    got = run(np.zeros((1, *HW, 3), np.uint8), params, [target])[0]
    want = np.array(want, np.float64).clip(0, [56, 40, 56, 40])
    want = want[(want[:, 2] > want[:, 0]) & (want[:, 3] > want[:, 1])]
    np.testing.assert_allclose(got["boxes"], want, atol=1e-4)
    assert len(got["labels"]) == len(want)


@pytest.mark.parametrize("name", [name for name, _ in EXECUTORS])
def test_random_crops_move_boxes_by_the_crop_offset_exactly(name):
    run = dict(EXECUTORS)[name]
    images, targets = scene(6, seed=13, objects=(2, 5))
    params = Augment(random_crop=(28, 36), seed=8).draw(0, np.arange(6), HW)
    offsets = params.matrix[:, :, 2]  # a pure crop maps output (x, y) to (x + x0, y + y0)
    assert np.array_equal(offsets, np.rint(offsets)) and len(np.unique(offsets, axis=0)) > 1
    for target, moved, (x0, y0) in zip(targets, run(images, params, targets), offsets, strict=True):
        want = (target["boxes"] - [x0, y0, x0, y0]).clip(0, [36, 28, 36, 28])
        inside = (want[:, 2] > want[:, 0]) & (want[:, 3] > want[:, 1])
        np.testing.assert_allclose(moved["boxes"], want[inside], atol=1e-4)
        np.testing.assert_array_equal(moved["labels"], target["labels"][inside])
        crop = target["masks"][inside][:, int(y0) : int(y0) + 28, int(x0) : int(x0) + 36]
        np.testing.assert_array_equal(moved["masks"], crop)


@pytest.mark.parametrize("config", sorted(CONFIGS))
def test_executors_agree_on_boxes_labels_masks_and_flags(config):
    if len(EXECUTORS) < 2:
        pytest.skip("only the NumPy executor is importable here")
    images, targets = scene(6, seed=3)
    aug = Augment(**CONFIGS[config], seed=9, min_visibility=0.25)
    params = aug.draw(2, np.arange(10, 16), HW)
    results = {name: run(images, params, targets) for name, run in EXECUTORS}
    reference = results["numpy"]
    assert sum(len(t["boxes"]) for t in reference) > 0
    assert sum(len(t["boxes"]) for t in reference) < sum(len(t["boxes"]) for t in targets)
    for name, moved in results.items():
        for want, got in zip(reference, moved, strict=True):
            np.testing.assert_allclose(got["boxes"], want["boxes"], atol=1e-3, err_msg=name)
            np.testing.assert_array_equal(got["labels"], want["labels"])
            np.testing.assert_array_equal(got["iscrowd"], want["iscrowd"])
            assert got["masks"].shape == want["masks"].shape
            if want["masks"].size:  # interpolation rules differ only on exact ties
                assert (got["masks"] == want["masks"]).mean() >= 0.9999, name


@pytest.mark.parametrize(
    "settings",
    [
        dict(width_shift_range=0.3, height_shift_range=0.3, horizontal_flip=True),
        dict(zoom_range=(0.6, 1.4), vertical_flip=True),
        dict(random_crop=(30, 30), horizontal_flip=True),
        dict(random_resized_crop=dict(size=(48, 48), scale=(0.4, 1.0), ratio=(0.8, 1.25))),
    ],
)
def test_axis_aligned_moves_keep_masks_and_image_inside_their_boxes(settings):
    """The box of each moved mask is the moved box within a pixel; the image's pixels under a
    moved mask still have its object's colour."""
    images, targets = scene(8, seed=4, objects=(1, 4))
    aug = Augment(**settings, seed=2)
    params = aug.draw(0, np.arange(8), HW)
    out_images, _, moved = numpy_exec.apply(images, None, params, targets=targets)
    checked = coloured = 0
    for image, target in zip(out_images, moved, strict=True):
        for box, mask, label in zip(
            target["boxes"], target["masks"], target["labels"], strict=True
        ):
            ys, xs = np.nonzero(mask)
            if len(xs) == 0:
                continue  # a sliver thinner than half a pixel samples no pixel centre
            extent = np.array([xs.min(), ys.min(), xs.max() + 1, ys.max() + 1])
            np.testing.assert_allclose(extent, box, atol=1.0)
            if len(target["boxes"]) == 1:  # no other object paints over it
                palette = np.concatenate([COLOURS, [[90, 90, 90]]])
                under = image[mask.astype(bool)].astype(int)
                nearest = ((under[:, None] - palette) ** 2).sum(-1).argmin(-1)
                assert (nearest == label).mean() >= 0.8
                coloured += 1
            checked += 1
    assert checked >= 8 and coloured >= 1


def test_rotated_masks_stay_inside_their_hull_boxes():
    images, targets = scene(6, seed=5, objects=(2, 5))
    aug = Augment(rotation_range=45, shear_range=15, zoom_range=0.2, seed=3)
    params = aug.draw(0, np.arange(6), HW)
    for name, run in EXECUTORS:
        for target in run(images, params, targets):
            for box, mask in zip(target["boxes"], target["masks"], strict=True):
                ys, xs = np.nonzero(mask)
                if len(xs):
                    assert xs.min() >= box[0] - 1 and xs.max() + 1 <= box[2] + 1, name
                    assert ys.min() >= box[1] - 1 and ys.max() + 1 <= box[3] + 1, name


@pytest.mark.parametrize("name", [name for name, _ in EXECUTORS])
def test_min_visibility_drops_the_label_mask_and_flags_with_the_box(name):
    """A shift of 6 px leaves 40% of box 0 in the frame, boxes 1 and 2 whole."""
    run = dict(EXECUTORS)[name]
    masks = np.zeros((3, *HW), np.uint8)
    masks[0, 10:20, 0:10] = 1
    masks[1, 20:30, 20:40] = 1
    masks[2, 0:4, 50:56] = 1
    target = {
        "boxes": np.array([[0, 10, 10, 20], [20, 20, 40, 30], [50, 0, 56, 4]], np.float32),
        "labels": np.array([2, 4, 1], np.int64),
        "masks": masks,
        "iscrowd": np.array([0, 1, 0], np.uint8),
    }
    image = np.zeros((1, *HW, 3), np.uint8)
    for minimum, kept in ((0.0, [0, 1, 2]), (0.3, [0, 1, 2]), (0.5, [1, 2])):
        params = from_idg({"tx": 6.0}, HW)
        params.min_visibility = minimum
        got = run(image, params, [target])[0]
        np.testing.assert_array_equal(got["labels"], target["labels"][kept])
        np.testing.assert_array_equal(got["iscrowd"], target["iscrowd"][kept])
        np.testing.assert_array_equal(
            got["masks"], np.roll(masks, -6, axis=2)[kept] * (np.arange(HW[1]) < HW[1] - 6)
        )
    params = from_idg({"tx": 6.0}, HW)
    params.min_box_size = 5  # box 0 keeps 4 px of width, box 2 is 4 px tall
    assert run(image, params, [target])[0]["labels"].tolist() == [4]


@pytest.mark.parametrize("name", [name for name, _ in EXECUTORS])
def test_a_one_pixel_object_stored_in_float32_is_one_pixel_for_min_box_size(name):
    """YOLO's 1 px objects come out of float32 arithmetic 0.99997 px wide: at
    min_box_size=1 they stay, as packing keeps them; 0.9 px does not."""
    run = dict(EXECUTORS)[name]
    cx, w, two, width = np.float32(9.5 / 56), np.float32(1 / 56), np.float32(2), np.float32(56)
    x1, x2 = (cx - w / two) * width, (cx + w / two) * width  # YOLO's xywhn2xyxy in float32
    boxes = np.array([[x1, 4, x2, 9], [20, 4, 20.9, 9], [30, 20, 40, 30]], np.float32)
    assert 0.9999 < boxes[0, 2] - boxes[0, 0] < 1.0  # what float32 makes of 1 px
    target = {"boxes": boxes, "labels": np.array([0, 1, 2], np.int64)}
    params = from_idg({}, HW)
    params.min_box_size = 1
    got = run(np.zeros((1, *HW, 3), np.uint8), params, [target])[0]
    assert got["labels"].tolist() == [0, 2]


@pytest.mark.parametrize("name", [name for name, _ in EXECUTORS])
def test_samples_without_objects(name):
    run = dict(EXECUTORS)[name]
    images, targets = scene(3, seed=6, objects=(0, 0))
    middle = np.zeros((1, *HW), np.uint8)
    middle[0, 10:30, 10:46] = 1  # inside every 28 x 36 crop
    targets[1] = {
        "boxes": np.array([[10, 10, 46, 30]], np.float32),
        "labels": np.array([0]),
        "masks": middle,
        "iscrowd": np.zeros(1, np.uint8),
    }
    aug = Augment(**CONFIGS["crop"], seed=1)
    moved = run(images, aug.draw(0, [0, 1, 2], HW), targets)
    for i in (0, 2):
        assert moved[i]["boxes"].shape == (0, 4) and moved[i]["labels"].shape == (0,)
        assert moved[i]["masks"].shape == (0, 28, 36)
    assert moved[1]["masks"].shape[1:] == (28, 36) and len(moved[1]["boxes"]) == 1
    assert moved[1]["masks"].sum() > 200


def test_targets_depend_on_seed_epoch_and_index_only():
    images, targets = scene(6, seed=8)
    aug = Augment(**CONFIGS["affine"], seed=4)
    whole = aug.apply(images, None, epoch=3, indices=np.arange(6), targets=targets)[2]
    part = aug.apply(
        images[[4, 1]], None, epoch=3, indices=[4, 1], targets=[targets[4], targets[1]]
    )
    for got, want in zip(part[2], [whole[4], whole[1]], strict=True):
        for key in ("boxes", "labels", "masks", "iscrowd"):
            np.testing.assert_array_equal(got[key], want[key])
        assert got["image_id"] == want["image_id"]
    again = Augment(**CONFIGS["affine"], seed=4).apply(
        images, None, epoch=3, indices=np.arange(6), targets=targets
    )[2]
    other = aug.apply(images, None, epoch=4, indices=np.arange(6), targets=targets)[2]
    np.testing.assert_array_equal(again[0]["boxes"], whole[0]["boxes"])
    assert any(
        a["boxes"].shape != b["boxes"].shape or not np.allclose(a["boxes"], b["boxes"])
        for a, b in zip(other, whole, strict=True)
    )


def test_tf_graph_draw_moves_targets_as_the_eager_executor():
    tf = pytest.importorskip("tensorflow")
    from packer.augment import tf_exec

    images, targets = scene(6, seed=10)
    batch = padded(targets, 9)
    aug = Augment(**CONFIGS["affine"], seed=6, min_visibility=0.3)
    ds = tf.data.Dataset.from_tensor_slices((images, np.arange(6), batch)).batch(3)
    ds = ds.map(lambda i, k, t: tf_exec.augment(aug, i, None, 1, k, targets=t)[2])
    got = [t for part in ds for t in unpadded(part)]
    want = run_numpy(images, aug.draw(1, np.arange(6), HW), targets)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g["boxes"], w["boxes"], atol=1e-3)
        np.testing.assert_array_equal(g["labels"], w["labels"])


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda t: t.update(boxes=np.zeros((2, 3), np.float32)), r"\[N, 4\]"),
        (lambda t: t.pop("boxes"), "no 'boxes'"),
        (lambda t: t.update(masks=t["masks"][:, :-1]), "masks must be uint8"),
        (lambda t: t.update(iscrowd=np.zeros(9, np.uint8)), "9 rows for"),
    ],
)
def test_bad_targets_are_refused_clearly(change, message):
    images, targets = scene(1, seed=11, objects=(2, 2))
    change(targets[0])
    params = Augment(seed=0).draw(0, [0], HW)
    with pytest.raises(ValueError, match=message):
        numpy_exec.apply(images, None, params, targets=targets)
    if importlib.util.find_spec("torch"):
        with pytest.raises(ValueError, match=message):
            run_torch(images, params, targets)
    with pytest.raises(ValueError, match="2 targets for a batch of 1"):
        numpy_exec.apply(images, None, params, targets=targets * 2)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [(dict(min_visibility=1.5), "fraction"), (dict(min_box_size=-1), "min_box_size")],
)
def test_bad_limits_are_refused_clearly(kwargs, message):
    with pytest.raises(ValueError, match=message):
        Augment(**kwargs)


def test_torch_targets_on_cuda_match_the_cpu():
    """Where a GPU is present: the same targets, moved on the images' CUDA device."""
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device here")
    from packer.augment import torch_exec

    images, targets = scene(6, seed=12)
    params = Augment(**CONFIGS["affine"], seed=5, min_visibility=0.2).draw(0, np.arange(6), HW)
    on_cpu = run_torch(images, params, targets)
    gpu_images = torch.as_tensor(images, device="cuda")
    _, _, on_gpu = torch_exec.apply(gpu_images, None, params, targets=to_torch(targets))
    for want, got in zip(on_cpu, on_gpu, strict=True):
        assert got["boxes"].device.type == "cuda" and got["masks"].device.type == "cuda"
        np.testing.assert_allclose(got["boxes"].cpu().numpy(), want["boxes"], atol=1e-3)
        np.testing.assert_array_equal(got["labels"].cpu().numpy(), want["labels"])
        if want["masks"].size:
            assert (got["masks"].cpu().numpy() == want["masks"]).mean() >= 0.9999


def test_the_docs_block_runs_as_written():
    pytest.importorskip("torch")
    pytest.importorskip("tensorflow")
    page = REPO / "docs" / "augmentation.md"
    section = page.read_text().split("## Augmentation with boxes and per-object masks")[1]
    block = re.search(r"```python\n(.*?)```", section, re.S)[1]
    scope: dict = {}
    exec(compile(block, "docs/augmentation.md", "exec"), scope)
    np.testing.assert_allclose(
        scope["moved"][0]["boxes"].numpy(), scope["moved_tf"]["boxes"][0, :1], atol=1e-3
    )
    assert scope["moved_tf"]["labels"].numpy().tolist() == [[3, -1, -1, -1], [-1, -1, -1, -1]]
    assert scope["out"].shape == (2, 320, 448, 3)
