"""Augmentation at batch speed: one seeded parameter draw, three executors.

`Augment` takes ImageDataGenerator's arguments; `Augment.draw(epoch, indices, hw)` gives
the `AugmentParams` of a batch, keyed by (seed, epoch, sample index); the executors apply
them: `numpy_exec` (OpenCV), `tf_exec` (in-graph TensorFlow), `torch_exec` (CPU or CUDA).
Importing this package imports neither TensorFlow nor torch.

Images stay as the pack keeps them: uint8, uint16 or float32, any number of bands; masks
uint8 or uint16 (`dtypes` holds the rules all three executors share: rounding, clipping,
colour units). Modules import one another one way only: `params` (the batch's numbers),
`dtypes` and `moves` (which asks `packer.fields`) are leaves, `drawing` draws them, `spec`
validates the settings, each executor imports its own `*_targets` (and torch both
`torch_grid`), nothing imports back.

Every field of a batch moves by its kind's geometry, never its name (`moves`): the readers
call each executor's ``apply_fields(arrays, params, fields)`` (tf in-graph:
``tf_exec.augment_fields``) with the pack's fields; fixed "pixels" fields are warped with the
kind's interpolation (only the image coloured), "labels" sampled nearest, "points" moved as box
corners, "none" left alone; ragged fields move per object (boxes, points, planes, none), an
object the box rule drops leaving every one of them. Users' own target dicts move by
``geometries=`` or by the convention of their keys ("boxes", "masks" per object, "keypoints").

Detection targets move with the images, from the same draw (`boxes.move_boxes` is the one
rule: corners through `AugmentParams.box_matrix`, hull, clip, drop below ``min_visibility``
or ``min_box_size`` with the label, mask and flags; per-object masks sampled as class-id
masks, 0 out of frame). A target is ``{"boxes": float32 [N, 4] x1, y1, x2, y2, "labels":
[N], optional "masks": uint8 [N, H, W] 0/1, other per-object fields of N rows, scalars}``.
The stable names, each also reached through its executor's ``apply(..., targets=...)``,
which then returns (images, masks, moved targets):

- NumPy: ``numpy_targets.move_targets(params, targets) -> list[dict]``: a list of one dict
  of NumPy arrays per sample in, the same out (``Augment.apply(..., targets=)`` draws too).
- torch: ``torch_targets.move_targets(params, targets, device=None) -> list[dict]``: dicts
  of tensors, on the images' device; ``torch_exec.apply(..., targets=)``.
- TensorFlow: ``tf_targets.move_targets(targets, forward, mask_transforms, out_hw=...,
  min_visibility=..., min_box_size=...) -> dict`` over padded ``{"boxes": [B, M, 4],
  "labels": [B, M]}`` (-1 padding; optional "masks" [B, M, H, W] and other [B, M] fields),
  kept objects first, padding after; reach it through ``tf_exec.apply(..., targets=)`` with
  drawn params or ``tf_exec.augment(aug, images, masks, epoch, indices, targets=)`` in-graph.
"""

from packer.augment.drawing import draw
from packer.augment.params import AugmentParams
from packer.augment.spec import Augment

__all__ = ["Augment", "AugmentParams", "draw"]
