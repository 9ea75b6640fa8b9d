"""Augmentation at batch speed: one seeded parameter draw, three executors.

`Augment` takes ImageDataGenerator's arguments; `Augment.draw(epoch, indices, hw)` gives
the `AugmentParams` of a batch, keyed by (seed, epoch, sample index); the executors apply
them: `numpy_exec` (OpenCV), `tf_exec` (in-graph TensorFlow), `torch_exec` (CPU or CUDA).
Importing this package imports neither TensorFlow nor torch.
"""

from packer.augment.params import AugmentParams, draw
from packer.augment.spec import Augment

__all__ = ["Augment", "AugmentParams", "draw"]
