"""Fields move by their kinds' geometry, never by their names: a float32 plane of geometry
"pixels" and per-object keypoints of geometry "points", kinds defined only here, augmented
beside images and boxes by the NumPy, TensorFlow and torch executors with one draw."""

from __future__ import annotations

import importlib.util

import cv2
import numpy as np
import pytest

from packer import fields
from packer.augment import Augment, numpy_exec
from packer.augment.boxes import move_boxes
from packer.augment.idg import from_idg
from packer.fields import FieldKind
from packer.schema import Field
from tests.augment.test_images_and_masks import TORCH_DEVICE

HW = (40, 56)
H, W = HW


class Heat(FieldKind):
    """A float32 [H, W] plane a sample, moved like pixels (bilinear)."""

    name = "augment_test_heat"
    geometry = "pixels"


class Spots(FieldKind):
    """Per object K keypoints (x, y, visibility) in pixels, moved as points."""

    name = "augment_test_spots"
    geometry = "points"
    ragged = True


fields.register(Heat())
fields.register(Spots())
FIELDS = (
    Field("images", (H, W, 3), "|u1", kind="image"),
    Field("heat", HW, "<f4", kind="augment_test_heat"),
    Field("seg", HW, "|u1", kind="mask"),  # a class-id plane under a name of its own
    Field("boxes", (4,), "<f4", ragged=True, kind="boxes"),
    Field("labels", (), "<i4", ragged=True, kind="object_class"),
    Field("spots", (3, 3), "<f4", ragged=True, kind="augment_test_spots"),
)
FIXED = ("images", "heat", "seg")
RAGGED = ("boxes", "labels", "spots")
AFFINE = dict(rotation_range=20, zoom_range=0.15, width_shift_range=0.2, horizontal_flip=True)


def batch(n: int = 4, seed: int = 0, objects: tuple[int, int] = (1, 4)):
    """Images, a smooth heat plane, class ids; per object a box and three keypoints inside
    it (visible, 2), all in a dict of fixed arrays and one of every object's rows + counts."""
    rng = np.random.default_rng(seed)
    ys, xs = np.mgrid[:H, :W]
    heat = np.stack([np.sin(xs / 7 + k) + np.cos(ys / 5 - k) for k in range(n)])
    counts = rng.integers(*objects, n, endpoint=True)
    total = int(counts.sum())
    x1, y1 = rng.uniform(2, W - 20, total), rng.uniform(2, H - 16, total)
    boxes = np.stack([x1, y1, x1 + rng.uniform(4, 18, total), y1 + rng.uniform(4, 14, total)], 1)
    inner = rng.uniform(0, 1, (total, 3, 2))
    spots = np.concatenate(
        [boxes[:, None, :2] + inner * (boxes[:, None, 2:] - boxes[:, None, :2]),
         np.full((total, 3, 1), 2.0)], axis=2,
    )  # fmt: skip
    fixed = {
        "images": rng.integers(0, 256, (n, H, W, 3), dtype=np.uint8),
        "heat": heat.astype(np.float32),
        "seg": rng.integers(0, 5, (n, H, W), dtype=np.uint8),
    }
    rows = {
        "boxes": boxes.astype(np.float32),
        "labels": rng.integers(0, 5, total).astype(np.int32),
        "spots": spots.astype(np.float32),
    }
    return fixed, rows, counts.astype(np.int64)


def split(rows: dict, counts) -> list[dict]:
    cuts = np.cumsum(counts)[:-1]
    parts = {k: np.split(v, cuts) for k, v in rows.items()}
    return [{k: parts[k][i] for k in rows} for i in range(len(counts))]


def run_numpy(fixed, rows, counts, params, found=FIELDS):
    moved, kept = numpy_exec.apply_fields(fixed | rows, params, found, counts=counts)
    return {k: moved[k] for k in fixed}, split({k: moved[k] for k in rows}, kept)


def run_torch(fixed, rows, counts, params, found=FIELDS):
    import torch

    from packer.augment import torch_exec

    device = torch.device(TORCH_DEVICE)
    targets = [
        {k: torch.as_tensor(v, device=device) for k, v in t.items()} for t in split(rows, counts)
    ]
    moved, per_image = torch_exec.apply_fields(fixed, params, found, device=device, targets=targets)
    return (
        {k: v.cpu().numpy() for k, v in moved.items()},
        [{k: v.cpu().numpy() for k, v in t.items()} for t in per_image],
    )


def run_tf(fixed, rows, counts, params, found=FIELDS):
    from packer.augment import tf_exec

    slots = int(counts.max()) + 2  # padding slots after the objects
    padded = {}
    for name, values in rows.items():
        pad = np.full((len(counts), slots, *values.shape[1:]), -1, values.dtype)
        for i, part in enumerate(np.split(values, np.cumsum(counts)[:-1])):
            pad[i, : len(part)] = part
        padded[name] = pad
    moved = {k: v.numpy() for k, v in tf_exec.apply_fields(fixed | padded, params, found).items()}
    if not rows:
        return moved, [{} for _ in counts]
    filled = [(row != -1).any(axis=tuple(range(1, row.ndim))) for row in moved[next(iter(rows))]]
    for i, keep in enumerate(filled):  # objects first, padding after
        assert keep.tolist() == sorted(keep.tolist(), reverse=True)
        for name in rows:
            assert (moved[name][i][~keep] == -1).all()
    per_image = [{k: moved[k][i][keep] for k in rows} for i, keep in enumerate(filled)]
    return {k: moved[k] for k in fixed}, per_image


def executors():
    found = [("numpy", run_numpy)]
    if importlib.util.find_spec("torch"):
        found.append(("torch", run_torch))
    if importlib.util.find_spec("tensorflow"):
        found.append(("tf", run_tf))
    return dict(found)


EXECUTORS = executors()


def test_a_pixels_field_is_warped_as_an_image_band_and_a_labels_field_as_a_mask():
    """The heat plane is OpenCV's bilinear warp of the same array (no colour change), the
    class-id plane named "seg" what the masks path gives masks."""
    fixed, rows, counts = batch(seed=1)
    aug = Augment(**AFFINE, brightness_range=(0.5, 1.5), channel_shift_range=20, seed=3)
    params = aug.draw(0, np.arange(4), HW)
    got, _ = run_numpy(fixed, rows, counts, params)
    for i in range(4):
        want = cv2.warpAffine(
            fixed["heat"][i], params.matrix[i], (W, H),
            flags=cv2.INTER_LINEAR | cv2.WARP_INVERSE_MAP, borderMode=cv2.BORDER_REPLICATE,
        )  # fmt: skip
        np.testing.assert_array_equal(got["heat"][i], want)
    images, masks = numpy_exec.apply(fixed["images"], fixed["seg"], params)
    np.testing.assert_array_equal(got["images"], images)
    np.testing.assert_array_equal(got["seg"], masks)


@pytest.mark.parametrize("name", sorted(EXECUTORS))
def test_points_move_as_box_corners_do(name):
    """A keypoint equals a box made of it, moved by the box rule, wherever it stays in."""
    fixed, rows, counts = batch(seed=2)
    params = Augment(**AFFINE, seed=5).draw(1, np.arange(4), HW)
    _, moved = EXECUTORS[name](fixed, rows, counts, params)
    reference = run_numpy(fixed, rows, counts, params)[1]
    forward = params.box_matrix.reshape(-1, 6)
    checked = 0
    for i, (before, after, want) in enumerate(
        zip(split(rows, counts), moved, reference, strict=True)
    ):
        assert len(after["spots"]) == len(want["spots"])
        kept = [k for k, box in enumerate(before["boxes"]) if _kept(box, forward[i], params)]
        for points, out in zip(before["spots"][kept], after["spots"], strict=True):
            for (x, y, _), (mx, my, seen) in zip(points, out, strict=True):
                corners = tuple(np.float64([v]) for v in (x, y, x, y))
                box, _ = move_boxes(np, corners, tuple(forward[i]), HW, 0.0, 0.0)
                if seen:  # in the frame: the box of the point is the point
                    np.testing.assert_allclose([mx, my], [box[0][0], box[1][0]], atol=1e-4)
                    checked += 1
    assert checked > 10


def _kept(box, forward, params) -> bool:
    corners = tuple(np.float64([v]) for v in box)
    return bool(move_boxes(np, corners, tuple(forward), params.out_hw, 0.0, 0.0)[1][0])


@pytest.mark.parametrize("name", sorted(EXECUTORS))
def test_a_flip_moves_x_to_w_minus_x_as_it_moves_boxes(name):
    fixed, rows, counts = batch(seed=3)
    params = from_idg({"flip_horizontal": True}, HW)
    params = _batch_of(params, len(counts))
    got, moved = EXECUTORS[name](fixed, rows, counts, params)
    for before, after in zip(split(rows, counts), moved, strict=True):
        want = before["spots"].copy()
        want[..., 0] = W - want[..., 0]
        np.testing.assert_allclose(after["spots"], want, atol=1e-4)
        box = before["boxes"]
        np.testing.assert_allclose(
            after["boxes"], np.stack([W - box[:, 2], box[:, 1], W - box[:, 0], box[:, 3]], 1),
            atol=1e-4,
        )  # fmt: skip
    np.testing.assert_allclose(got["heat"], fixed["heat"][:, :, ::-1], atol=1e-5)


def _batch_of(params, n: int):
    """One sample's parameters repeated for a batch of ``n``."""
    params.matrix = np.repeat(params.matrix, n, axis=0)
    return params


@pytest.mark.parametrize("name", sorted(EXECUTORS))
def test_a_point_leaving_the_frame_keeps_its_coordinates_and_gets_visibility_0(name):
    """A shift of 10 px to the right: the point at x=50 lands at 60, outside the 56-wide
    frame (visibility 0), the others stay visible; a box wholly out drops its keypoints."""
    fixed, _, _ = batch(1, seed=4)
    rows = {
        "boxes": np.array([[10, 5, 48, 30], [50, 30, 55, 38]], np.float32),
        "labels": np.array([1, 2], np.int32),
        "spots": np.array(
            [[[20, 10, 2], [50, 20, 2], [30, 25, 1]], [[52, 32, 2], [53, 33, 2], [54, 34, 2]]],
            np.float32,
        ),
    }
    params = from_idg({"tx": -10.0}, HW)
    _, moved = EXECUTORS[name](fixed, rows, np.array([2]), params)
    got = moved[0]
    assert got["labels"].tolist() == [1]  # the second object's box left the frame
    np.testing.assert_allclose(got["spots"], [[[30, 10, 2], [60, 20, 0], [40, 25, 1]]], atol=1e-4)


@pytest.mark.parametrize("config", ["affine", "crop"])
def test_executors_agree_on_every_field(config):
    if len(EXECUTORS) < 2:
        pytest.skip("only the NumPy executor is importable here")
    strong = dict(AFFINE, width_shift_range=0.4, height_shift_range=0.3)
    settings = strong if config == "affine" else dict(random_crop=(28, 36))
    fixed, rows, counts = batch(6, seed=5, objects=(0, 5))
    params = Augment(**settings, seed=0, min_visibility=0.5).draw(2, np.arange(6), HW)
    results = {name: run(fixed, rows, counts, params) for name, run in EXECUTORS.items()}
    want_fixed, want_rows = results["numpy"]
    assert sum(len(t["labels"]) for t in want_rows) < len(rows["labels"])  # some dropped
    for name, (got_fixed, got_rows) in results.items():
        assert got_fixed["heat"].shape == (6, *params.out_hw)
        inner = (slice(None), slice(1, -1), slice(1, -1))  # borders differ by fill rules
        np.testing.assert_allclose(
            got_fixed["heat"][inner], want_fixed["heat"][inner], atol=0.02, err_msg=name
        )
        assert (got_fixed["seg"] == want_fixed["seg"]).mean() >= 0.999, name
        for got, want in zip(got_rows, want_rows, strict=True):
            np.testing.assert_array_equal(got["labels"], want["labels"], err_msg=name)
            np.testing.assert_allclose(got["boxes"], want["boxes"], atol=1e-3, err_msg=name)
            np.testing.assert_allclose(got["spots"], want["spots"], atol=1e-3, err_msg=name)


@pytest.mark.parametrize("per_object", [1, 4])
@pytest.mark.parametrize("name", sorted(EXECUTORS))
def test_points_alone_never_drop_an_object(name, per_object):
    """Rows of (x, y) (one point an object, or four), no boxes: every object stays, a point
    off the frame included, and nothing but x and y changes."""
    fixed = {"images": np.zeros((2, H, W, 3), np.uint8)}
    points = np.array([[5, 5], [50, 20], [30, 30]], np.float32)
    rows = {"spots": points if per_object == 1 else np.repeat(points[:, None], 4, axis=1)}
    found = {"images": "pixels", "spots": Spots()}
    params = _batch_of(from_idg({"tx": -10.0}, HW), 2)
    _, moved = EXECUTORS[name](fixed, rows, np.array([2, 1]), params, found)
    want = rows["spots"] + np.float32(10) * (np.arange(2) == 0)
    np.testing.assert_allclose(moved[0]["spots"], want[:2], atol=1e-4)
    np.testing.assert_allclose(moved[1]["spots"], want[2:], atol=1e-4)


def test_per_object_planes_that_are_not_uint8_image_planes_are_refused():
    fixed = {"images": np.zeros((1, H, W, 3), np.uint8)}
    found = {"images": "pixels", "masks": fields.get("object_mask")}
    for planes in (np.zeros((1, H, W), np.int32), np.zeros((1, H, W - 1), np.uint8)):
        with pytest.raises(ValueError, match="per-object masks must be uint8"):
            numpy_exec.apply_fields(fixed | {"masks": planes}, from_idg({}, HW), found, counts=[1])


def test_users_dicts_move_by_convention_or_by_the_geometries_given():
    """Augment.apply's targets: "keypoints" are points by convention; "spots" rides along
    untouched unless geometries name it."""
    image = np.zeros((1, H, W, 3), np.uint8)
    target = {
        "boxes": np.array([[4, 4, 20, 20]], np.float32),
        "keypoints": np.array([[[6, 8, 2]]], np.float32),
        "spots": np.array([[6, 8]], np.float32),
    }
    aug = Augment(horizontal_flip=True, seed=0)
    flipped = next(i for i in range(50) if aug.draw(0, [i], HW).matrix[0, 0, 0] < 0)
    got = aug.apply(image, epoch=0, indices=[flipped], targets=[target])[2][0]
    np.testing.assert_allclose(got["keypoints"], [[[W - 6, 8, 2]]], atol=1e-4)
    np.testing.assert_array_equal(got["spots"], target["spots"])
    geometries = {"boxes": "boxes", "spots": "points"}
    got = aug.apply(image, epoch=0, indices=[flipped], targets=[target], geometries=geometries)
    np.testing.assert_allclose(got[2][0]["spots"], [[W - 6, 8]], atol=1e-4)
    np.testing.assert_array_equal(got[2][0]["keypoints"], target["keypoints"])


@pytest.mark.parametrize(
    ("spots", "message"),
    [
        (Field("spots", (2,), "<f4", ragged=True, kind="image"), "per-object .* not 'pixels'"),
        (Field("spots", (2,), "<f4", kind="boxes"), "fixed fields as .* not 'boxes'"),
    ],
)
def test_a_geometry_a_field_cannot_have_is_refused_in_one_line(spots, message):
    arrays = {"images": np.zeros((1, H, W, 3), np.uint8), "spots": np.zeros((1, 2), np.float32)}
    with pytest.raises(ValueError, match=message):
        numpy_exec.apply_fields(arrays, from_idg({}, HW), (FIELDS[0], spots), counts=[1])


def test_torch_moves_a_fixed_field_inside_the_per_image_dicts_as_the_batch_field():
    """packer.torch's detection dicts hold each fixed target's per-image value too."""
    torch = pytest.importorskip("torch")
    from packer.augment import torch_exec

    fixed, rows, counts = batch(seed=6)
    params = Augment(**AFFINE, seed=2).draw(0, np.arange(4), HW)
    targets = [
        {**{k: torch.as_tensor(v) for k, v in t.items()}, "heat": torch.as_tensor(heat)}
        for t, heat in zip(split(rows, counts), fixed["heat"], strict=True)
    ]
    batch_fields, per_image = torch_exec.apply_fields(fixed, params, FIELDS, targets=targets)
    _, want = run_torch(fixed, rows, counts, params)
    for i, (got, expected) in enumerate(zip(per_image, want, strict=True)):
        np.testing.assert_array_equal(got["heat"].numpy(), batch_fields["heat"][i].numpy())
        np.testing.assert_array_equal(got["spots"].numpy(), expected["spots"])


def test_tf_in_graph_draw_moves_every_field_as_the_eager_executor():
    tf = pytest.importorskip("tensorflow")
    from packer.augment import tf_exec

    fixed, rows, counts = batch(4, seed=7, objects=(1, 3))
    aug = Augment(**AFFINE, seed=4, min_visibility=0.4)
    padded = {
        name: np.stack([np.concatenate([part, np.full((4 - len(part), *part.shape[1:]), -1)])
                        for part in np.split(values, np.cumsum(counts)[:-1])]).astype(values.dtype)
        for name, values in rows.items()
    }  # fmt: skip
    arrays = fixed | padded
    ds = tf.data.Dataset.from_tensor_slices((arrays, np.arange(10, 14))).batch(4)
    ds = ds.map(lambda a, k: tf_exec.augment_fields(aug, a, FIELDS, 3, k))
    got = next(iter(ds))
    want = tf_exec.apply_fields(arrays, aug.draw(3, np.arange(10, 14), HW), FIELDS)
    for name in arrays:
        np.testing.assert_allclose(got[name].numpy(), want[name].numpy(), atol=1e-4, err_msg=name)


def test_device_finish_moves_the_targets_by_the_fields_kinds():
    """augment_device: a DeviceFinish given the pack's fields moves a detection batch's
    keypoints and a fixed target of geometry pixels on the device, as the executor does."""
    torch = pytest.importorskip("torch")
    from packer.augment import torch_exec
    from packer.reading.transforms import Normalizer
    from packer.torch.device import DeviceFinish, DeviceObjects

    fixed, rows, counts = batch(seed=8)
    params = Augment(**AFFINE, seed=1).draw(0, np.arange(4), HW)
    device = torch.device(TORCH_DEVICE)  # the executor's, so the two agree exactly
    plain = Normalizer(None, {"mean": [0.0] * 3, "std": [1.0] * 3})
    objects = (FIELDS[0], *FIELDS[3:])
    finish = DeviceFinish(device, plain, 5, False, objects, "NHWC")
    targets = [{k: torch.as_tensor(v) for k, v in t.items()} for t in split(rows, counts)]
    images, moved = DeviceObjects(torch.as_tensor(fixed["images"]), targets, params, finish)
    want_fixed, want = run_torch({"images": fixed["images"]}, rows, counts, params, objects)
    np.testing.assert_array_equal(images.cpu().numpy(), want_fixed["images"])
    for got, expected in zip(moved, want, strict=True):
        np.testing.assert_array_equal(got["spots"].cpu().numpy(), expected["spots"])
    heat_fields = (FIELDS[0], FIELDS[1])
    finish = DeviceFinish(device, plain, 5, False, heat_fields, "NHWC")
    finish.target_dtype = torch.float32
    _, heat = finish(torch.as_tensor(fixed["images"]), torch.as_tensor(fixed["heat"]), params)
    want = torch_exec.apply_fields(fixed, params, FIELDS, device=device)[0]["heat"]
    np.testing.assert_array_equal(heat.cpu().numpy(), want.cpu().numpy())


class Depth(FieldKind):
    """A uint16 [H, W] plane moved like pixels but sampled nearest (no blended values)."""

    name = "augment_test_depth"
    geometry = "pixels"
    interpolation = "nearest"


fields.register(Depth())


def test_a_nearest_pixels_field_takes_only_values_it_had_in_every_executor():
    rng = np.random.default_rng(9)
    depth = rng.integers(500, 4000, (3, H, W), dtype=np.uint16)
    fixed = {"images": np.zeros((3, H, W, 3), np.uint8), "depth": depth}
    found = (FIELDS[0], Field("depth", HW, "<u2", kind="augment_test_depth"))
    params = Augment(**AFFINE, fill_mode="constant", cval=0, seed=3).draw(0, np.arange(3), HW)
    want = numpy_exec.apply_fields(fixed, params, found)[0]["depth"]
    for i in range(3):
        direct = cv2.warpAffine(
            depth[i], params.mask_matrix[i], (W, H), flags=cv2.INTER_NEAREST | cv2.WARP_INVERSE_MAP,
            borderMode=cv2.BORDER_CONSTANT, borderValue=0,
        )  # fmt: skip
        np.testing.assert_array_equal(want[i], direct)
        assert set(np.unique(want[i])) <= set(np.unique(depth[i])) | {0}
    for name, run in EXECUTORS.items():
        got = run(fixed, {}, np.zeros(3, np.int64), params, found)[0]["depth"]
        assert got.dtype == np.uint16 and (got == want).mean() >= 0.999, name


def test_tf_padded_targets_move_by_the_geometries_given_or_need_boxes_or_keypoints():
    pytest.importorskip("tensorflow")
    from packer.augment import tf_exec

    params, images = from_idg({"flip_vertical": True}, HW), np.zeros((1, H, W, 3), np.uint8)
    with pytest.raises(ValueError, match="padded targets need 'boxes'"):
        tf_exec.apply(images, None, params, targets={"labels": np.zeros((1, 3), np.int32)})
    spots = {"spots": np.array([[[5, 5], [-1, -1]]], np.float32)}  # one object, one padding
    moved = tf_exec.apply(images, None, params, targets=spots, geometries={"spots": "points"})[2]
    np.testing.assert_array_equal(moved["spots"].numpy(), [[[5, H - 5], [-1, -1]]])
