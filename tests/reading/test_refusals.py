"""What a reader cannot do with a pack is refused when the reader is made, with the
alternative in the message, never at the first batch: a torch device torch cannot use, a
random crop larger than the packed images (gzip TFRecord packs:
tests/end_to_end/test_new_user.py)."""

from __future__ import annotations

import pytest

import packer
from packer.synthetic import make_segmentation

torch = pytest.importorskip("torch")
import packer.keras  # noqa: E402
import packer.tf  # noqa: E402
import packer.torch  # noqa: E402


@pytest.fixture(scope="module")
def pack(tmp_path_factory):
    root = tmp_path_factory.mktemp("refusals")
    src = make_segmentation(root / "src", {"train": 4}, (32, 24))
    return packer.pack(src, out=root / "npy", size=(16, 12), workers=1).root


def _dataset(pack, device):
    return packer.torch.PackedDataset(
        pack, batch_size=2, augment=packer.Augment(seed=0), augment_device=device
    )


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA")
def test_cuda_without_cuda_is_refused_with_the_cpu_alternative(pack):
    with pytest.raises(ValueError) as refused:
        _dataset(pack, "cuda")
    assert "torch sees no CUDA device here" in str(refused.value)
    assert "augment_device=None to augment on the CPU" in str(refused.value)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_a_cuda_index_beyond_the_devices_is_refused(pack):
    count = torch.cuda.device_count()
    with pytest.raises(ValueError, match=f"torch sees {count} CUDA device"):
        _dataset(pack, f"cuda:{count}")


def test_a_device_kind_torch_cannot_use_here_is_refused(pack):
    usable = getattr(torch, "xpu", None) is not None and torch.xpu.is_available()
    if usable:
        pytest.skip("this machine has an XPU")
    with pytest.raises(ValueError) as refused:
        _dataset(pack, "xpu")
    message = str(refused.value)
    assert "augment_device='xpu' is a device torch cannot use here" in message
    assert 'use "cuda" on a GPU, or augment_device=None' in message and "\n" not in message
    with pytest.raises(ValueError, match="'gpu' is not a torch device"):
        _dataset(pack, "gpu")
    images, _ = _dataset(pack, "cpu")[0]  # the device path on the CPU works
    assert tuple(images.shape) == (2, 12, 16, 3)


def test_a_random_crop_larger_than_the_images_is_refused_by_every_reader(pack):
    aug = packer.Augment(random_crop=(20, 20), seed=0)
    readers = {
        "keras": lambda: packer.keras.PackedSequence(pack, batch_size=2, augment=aug),
        "torch": lambda: packer.torch.PackedDataset(pack, batch_size=2, augment=aug),
        "tf": lambda: packer.tf.dataset(pack, batch_size=2, augment=aug),
    }
    for name, make in readers.items():
        with pytest.raises(ValueError) as refused:
            make()
        message = str(refused.value)
        assert "random_crop (20, 20) is larger than the images (12, 16)" in message, name
        assert "crop at most 12x16 (height x width), or pack larger images (--size)" in message
    fits = packer.keras.PackedSequence(
        pack, batch_size=2, augment=packer.Augment(random_crop=(8, 8), seed=0)
    )
    assert fits[0][0].shape == (2, 8, 8, 3)


@pytest.mark.parametrize(
    "settings, said",
    [
        (dict(cval=300, fill_mode="constant"), "cval 300 is outside the range of uint8 images"),
        (dict(ignore_index=300), "ignore_index"),
    ],
)
def test_a_fill_or_ignore_index_the_pack_cannot_hold_is_refused_when_made(pack, settings, said):
    """Its 8-bit images cannot hold cval=300, nor its 8-bit masks 300: every reader says so
    when it is made, naming the pack, not at its first batch."""
    aug = packer.Augment(seed=0, **settings)
    readers = {
        "keras": lambda: packer.keras.PackedSequence(pack, batch_size=2, augment=aug),
        "torch": lambda: packer.torch.PackedDataset(pack, batch_size=2, augment=aug),
        "tf": lambda: packer.tf.dataset(pack, batch_size=2, augment=aug),
    }
    for name, make in readers.items():
        with pytest.raises(ValueError, match=said) as refused:
            make()
        assert str(pack) in str(refused.value) and "\n" not in str(refused.value), name
