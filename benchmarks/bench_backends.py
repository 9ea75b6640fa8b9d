"""Decode and resize cost per image, OpenCV against Pillow(-SIMD): why packer.imaging uses which.

    python benchmarks/bench_backends.py [--data ../shared/data] [--seconds 3] [--limit 60]

Cases: CamVid PNGs (480x360 decode; fill to 480x352 = crop only, to 240x176 = exact 2x area,
to 224x224 = non-integer area), CamVid 8-bit mask PNGs, hymenoptera JPEGs (decode at full and
at 1/2 size; fill to 224x224 area), and the CamVid pictures re-encoded as BMP, lossless WebP,
TIFF and GIF. Without the data folder it generates synthetic images of the same kinds.

Each backend runs for --seconds per case, alternating in three rounds (the fastest round
counts), with OpenCV held to one thread so that both numbers are per-core costs. Prints
Markdown tables: (1) ms per image for both, the ratio and the largest absolute pixel difference
of the two results; (2) for the JPEGs large enough to decode DCT-reduced, how far each
reduction rule + filter lands from a full decode + exact INTER_AREA, and at what cost;
(3) libspng (pyspng) beside both on the PNGs; (4) OpenCV's INTER_AREA on uint8 against
packer's float32 route on the JPEG crops; (5) what packer.imaging's decode_image / decode_mask
cost on the same files.
"""

from __future__ import annotations

import argparse
import functools
import io
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import cv2
import harness
import numpy as np
import pyspng
from PIL import Image

from packer.imaging import (
    Geometry,
    area_resize,
    backend_versions,
    decode_image,
    decode_mask,
    place,
)

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"
CV_RGB = cv2.IMREAD_COLOR_RGB | cv2.IMREAD_IGNORE_ORIENTATION
CV_HALF = CV_RGB | (cv2.IMREAD_REDUCED_COLOR_2 & ~cv2.IMREAD_COLOR_BGR)
CV_MASK = cv2.IMREAD_UNCHANGED | cv2.IMREAD_IGNORE_ORIENTATION
ROUNDS = 3
DIFF_SAMPLES = 20
FILL_224 = Geometry((224, 224))
OTHER_FORMATS = {"BMP": {}, "WEBP": {"lossless": True}, "TIFF": {}, "GIF": {}}
BOX, HAMMING = Image.Resampling.BOX, Image.Resampling.HAMMING
REDUCTION_RULES = {  # name: (reducing gap, Pillow filter for the fractional-box resize)
    "reduce while >= 1x left (target <= source/2), BOX": (1, BOX),
    "reduce while >= 1x left, HAMMING": (1, HAMMING),
    "reduce while >= 2x left, BOX": (2, BOX),
    "reduce while >= 2x left, HAMMING (packer)": (2, HAMMING),
}


@dataclass
class Case:
    """One comparison: the same items through an OpenCV and a Pillow function."""

    name: str
    items: Sequence
    opencv: Callable[[object], np.ndarray]
    pillow: Callable[[object], np.ndarray]


def parse_args() -> argparse.Namespace:
    """Command-line options."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DATA, help="folder with camvid/, hymenoptera/")
    parser.add_argument("--seconds", type=float, default=3.0, help="time per backend per case")
    parser.add_argument("--limit", type=int, default=60, help="images per set")
    return parser.parse_args()


def dataset(data: Path, limit: int, tmp: Path) -> dict[str, list[Path]]:
    """CamVid images and masks and hymenoptera JPEGs, or synthetic stand-ins written to tmp."""
    camvid, hymenoptera = data / "camvid", data / "hymenoptera"
    if not (camvid.is_dir() and hymenoptera.is_dir()):
        print(f"({data} has no camvid/ and hymenoptera/: using synthetic images)\n")
        return synthetic(limit, tmp)
    jpegs = sorted(hymenoptera.rglob("*.jp*g"))
    return {
        "png": sorted((camvid / "train").glob("*.png"))[:limit],
        "mask": sorted((camvid / "trainannot").glob("*.png"))[:limit],
        "jpeg": jpegs[:: max(1, len(jpegs) // limit)][:limit],
        "large": [p for p in jpegs if min(Image.open(p).size) >= 2 * 224][:limit],
    }


def synthetic(limit: int, tmp: Path) -> dict[str, list[Path]]:
    """Smooth textured pictures: 480x360 PNG + index mask, JPEGs from 320x240 to 1600x1200."""
    rng = np.random.default_rng(0)
    sets: dict[str, list[Path]] = {"png": [], "mask": [], "jpeg": []}
    for i in range(limit):
        picture = texture(rng, 480, 360)
        sets["png"].append(save(Image.fromarray(picture), tmp / f"{i}.png"))
        mask = Image.fromarray((picture[..., 0] // 22).astype(np.uint8))
        sets["mask"].append(save(mask, tmp / f"{i}_mask.png"))
        width = int(rng.choice([320, 500, 500, 640, 1024, 1600]))
        photo = Image.fromarray(texture(rng, width, width * 3 // 4))
        sets["jpeg"].append(save(photo, tmp / f"{i}.jpg", quality=90))
    sets["large"] = [p for p in sets["jpeg"] if min(Image.open(p).size) >= 2 * 224]
    return sets


def texture(rng: np.random.Generator, width: int, height: int) -> np.ndarray:
    """Low-frequency colour waves plus noise: compresses like a photograph, not like a flat fill."""
    yy, xx = np.mgrid[0:height, 0:width].astype(np.float32)
    waves = [np.sin(xx / rng.uniform(4, 40) + yy / rng.uniform(4, 40) + c) for c in range(3)]
    picture = 128 + 90 * np.stack(waves, -1) + rng.normal(0, 8, (height, width, 3))
    return picture.clip(0, 255).astype(np.uint8)


def save(image: Image.Image, path: Path, **options) -> Path:
    """Write an image and return its path."""
    image.save(path, **options)
    return path


def pillow_rgb(image: Image.Image) -> Image.Image:
    """A Pillow image in RGB mode, converted only when it is not already."""
    return image if image.mode == "RGB" else image.convert("RGB")


def cv_decode(data: bytes) -> np.ndarray:
    """OpenCV decode straight to RGB."""
    return cv2.imdecode(np.frombuffer(data, np.uint8), CV_RGB)


def pil_decode(data: bytes) -> np.ndarray:
    """Pillow decode to an RGB array."""
    return np.asarray(pillow_rgb(Image.open(io.BytesIO(data))))


def cv_decode_half(data: bytes) -> np.ndarray:
    """OpenCV DCT-reduced decode at 1/2 size, RGB."""
    return cv2.imdecode(np.frombuffer(data, np.uint8), CV_HALF)


def pil_decode_half(data: bytes) -> np.ndarray:
    """Pillow draft() DCT-reduced decode at 1/2 size, RGB."""
    image = Image.open(io.BytesIO(data))
    image.draft("RGB", (image.width // 2, image.height // 2))
    return np.asarray(pillow_rgb(image))


def cv_mask(data: bytes) -> np.ndarray:
    """OpenCV decode of a single-channel mask, values unchanged."""
    return cv2.imdecode(np.frombuffer(data, np.uint8), CV_MASK)


def pil_mask(data: bytes) -> np.ndarray:
    """Pillow decode of a single-channel mask."""
    return np.asarray(Image.open(io.BytesIO(data)))


def resize_items(arrays: list[np.ndarray], geometry: Geometry) -> list[tuple]:
    """(array, Pillow image, crop, scaled) per decoded picture, for the resize-only cases."""
    items = []
    for array in arrays:
        placement = place((array.shape[1], array.shape[0]), geometry)
        items.append((array, Image.fromarray(array), placement.crop, placement.scaled))
    return items


def cv_resize(item: tuple) -> np.ndarray:
    """Crop, then OpenCV INTER_AREA (a plain copy when the crop is already the size)."""
    array, _, (x0, y0, x1, y1), scaled = item
    region = array[y0:y1, x0:x1]
    if (x1 - x0, y1 - y0) == scaled:
        return np.ascontiguousarray(region)
    return cv2.resize(region, scaled, interpolation=cv2.INTER_AREA)


def pil_resize(item: tuple) -> np.ndarray:
    """Pillow BOX resize from the crop box (a plain crop when it is already the size)."""
    _, image, crop, scaled = item
    if (crop[2] - crop[0], crop[3] - crop[1]) == scaled:
        return np.asarray(image.crop(crop))
    return np.asarray(image.resize(scaled, BOX, box=crop))


def reencoded(pictures: list[np.ndarray], image_format: str) -> list[bytes]:
    """The pictures encoded in another format, in memory."""
    encoded = []
    for picture in pictures:
        buffer = io.BytesIO()
        Image.fromarray(picture).save(buffer, image_format, **OTHER_FORMATS[image_format])
        encoded.append(buffer.getvalue())
    return encoded


def cases(sets: dict[str, list[Path]]) -> list[Case]:
    """Every OpenCV / Pillow comparison, built from the image sets."""
    png = [p.read_bytes() for p in sets["png"]]
    masks = [p.read_bytes() for p in sets["mask"]]
    jpeg = [p.read_bytes() for p in sets["jpeg"]]
    pictures = [cv_decode(d) for d in png]
    photos = resize_items([cv_decode(d) for d in jpeg], FILL_224)
    found = [
        Case("PNG decode 480x360 RGB", png, cv_decode, pil_decode),
        Case(
            "PNG fill 480x352 (crop only)",
            resize_items(pictures, Geometry((480, 352))),
            cv_resize,
            pil_resize,
        ),
        Case(
            "PNG fill 240x176 (2x area)",
            resize_items(pictures, Geometry((240, 176))),
            cv_resize,
            pil_resize,
        ),
        Case(
            "PNG fill 224x224 (1.6x area)", resize_items(pictures, FILL_224), cv_resize, pil_resize
        ),
        Case("mask PNG decode 8-bit", masks, cv_mask, pil_mask),
        Case("JPEG decode full size", jpeg, cv_decode, pil_decode),
        Case("JPEG decode 1/2 size (DCT-reduced)", jpeg, cv_decode_half, pil_decode_half),
        Case("JPEG fill 224x224 area (resize only)", photos, cv_resize, pil_resize),
    ]
    for image_format in OTHER_FORMATS:
        encoded = reencoded(pictures, image_format)
        found.append(Case(f"{image_format} decode 480x360", encoded, cv_decode, pil_decode))
    return found


def per_image_ms(function: Callable, items: Sequence, seconds: float) -> float:
    """Mean ms per item over whole passes through the items for about `seconds`."""
    count, start = 0, time.perf_counter()
    while count == 0 or time.perf_counter() - start < seconds:
        for item in items:
            function(item)
        count += len(items)
    return 1000 * (time.perf_counter() - start) / count


def measure(case: Case, seconds: float) -> tuple[float, float]:
    """Fastest of ROUNDS alternating rounds for each backend: (OpenCV ms, Pillow ms)."""
    ms = fastest_ms(case.items, {"opencv": case.opencv, "pillow": case.pillow}, seconds)
    return ms["opencv"], ms["pillow"]


def max_difference(case: Case) -> str:
    """Largest absolute pixel difference between the two backends' results."""
    worst = 0
    for item in case.items[:DIFF_SAMPLES]:
        a, b = case.opencv(item), case.pillow(item)
        if a.shape != b.shape:
            return f"shapes {a.shape} vs {b.shape}"
        worst = max(worst, int(np.abs(a.astype(np.int32) - b).max()))
    return str(worst)


def exact_area_fill(data: bytes) -> np.ndarray:
    """The reference: full decode, then exact INTER_AREA of the fill crop."""
    array = cv_decode(data)
    placement = place((array.shape[1], array.shape[0]), FILL_224)
    x0, y0, x1, y1 = placement.crop
    return cv2.resize(array[y0:y1, x0:x1], placement.scaled, interpolation=cv2.INTER_AREA)


def reduced_fill(data: bytes, gap: int, resample: Image.Resampling) -> np.ndarray:
    """DCT-reduced decode by the largest factor that leaves `gap`x, float-box Pillow resize."""
    placement = place(Image.open(io.BytesIO(data)).size, FILL_224)
    (x0, y0, x1, y1), (w, h) = placement.crop, placement.scaled
    factor = next((f for f in (8, 4, 2) if x1 - x0 >= gap * f * w and y1 - y0 >= gap * f * h), 1)
    flags = CV_RGB
    if factor > 1:
        flags |= getattr(cv2, f"IMREAD_REDUCED_COLOR_{factor}") & ~cv2.IMREAD_COLOR_BGR
    array = cv2.imdecode(np.frombuffer(data, np.uint8), flags)
    box = tuple(c / factor for c in placement.crop)
    return np.asarray(Image.fromarray(array).resize(placement.scaled, resample, box=box))


def reduction_rows(paths: list[Path], seconds: float) -> list[str]:
    """Cost and distance from full decode + exact area of each reduction rule, on large JPEGs."""
    data = [p.read_bytes() for p in paths]
    reference = [exact_area_fill(d).astype(np.int32) for d in data]
    ms = per_image_ms(exact_area_fill, data, seconds)
    rows = [f"| full decode + OpenCV INTER_AREA (reference) | {ms:.2f} | 0 | 0 |"]
    for name, (gap, resample) in REDUCTION_RULES.items():
        ms = per_image_ms(lambda d, g=gap, r=resample: reduced_fill(d, g, r), data, seconds)
        diffs = [
            np.abs(reduced_fill(d, gap, resample) - ref)
            for d, ref in zip(data, reference, strict=True)
        ]
        mean, worst = np.mean([x.mean() for x in diffs]), max(int(x.max()) for x in diffs)
        rows.append(f"| {name} | {ms:.2f} | {mean:.2f} | {worst} |")
    return rows


def fastest_ms(items: Sequence, backends: dict[str, Callable], seconds: float) -> dict[str, float]:
    """ms per item of each backend: the fastest of ROUNDS interleaved rounds."""
    runs = {
        name: functools.partial(per_image_ms, function, items)
        for name, function in backends.items()
    }
    ms = harness.side_by_side(runs, seconds / ROUNDS, ROUNDS, measure=lambda run, s: run(s))
    return {name: min(values) for name, values in ms.items()}


def spng_rows(sets: dict[str, list[Path]], seconds: float) -> list[str]:
    """libspng (pyspng) beside OpenCV's libpng and Pillow on the same PNGs: ms per image."""
    rows = []
    for name, key, fmt, opencv, pillow in (
        ("PNG decode 480x360 RGB", "png", "RGB", cv_decode, pil_decode),
        ("mask PNG decode 8-bit", "mask", "L", cv_mask, pil_mask),
    ):
        data = [p.read_bytes() for p in sets[key]]
        spng = functools.partial(pyspng.load, format=fmt)
        ms = fastest_ms(data, {"opencv": opencv, "pillow": pillow, "spng": spng}, seconds)
        same = all(np.array_equal(spng(d), opencv(d)) for d in data[:DIFF_SAMPLES])
        rows.append(
            f"| {name} | {ms['opencv']:.3f} | {ms['pillow']:.3f} | {ms['spng']:.3f} "
            f"| {ms['opencv'] / ms['spng']:.2f} | {'yes' if same else 'NO'} |"
        )
    return rows


def area_row(sets: dict[str, list[Path]], seconds: float) -> str:
    """OpenCV INTER_AREA on uint8 against packer's float32 route, hymenoptera crops to 224."""
    photos = [cv_decode(p.read_bytes()) for p in sets["jpeg"]]
    crops = [item for item in resize_items(photos, FILL_224) if item[2][2] - item[2][0] > 224]

    def float32_area(item: tuple) -> np.ndarray:
        array, _, (x0, y0, x1, y1), scaled = item
        return area_resize(array[y0:y1, x0:x1], scaled)

    ms = fastest_ms(crops, {"uint8": cv_resize, "float32": float32_area}, seconds)
    same = all(np.array_equal(cv_resize(c), float32_area(c)) for c in crops)
    return (
        f"| {len(crops)} JPEG crops -> 224x224 | {ms['uint8']:.3f} | {ms['float32']:.3f} "
        f"| {ms['uint8'] / ms['float32']:.2f} | {'yes' if same else 'NO'} |"
    )


def chosen_rows(sets: dict[str, list[Path]], seconds: float) -> list[str]:
    """What decode_image / decode_mask cost on the same files (read included, as a pack does),
    with the backend each one used."""
    calls = [
        ("decode_image PNG -> 480x352 fill", sets["png"], Geometry((480, 352))),
        ("decode_image PNG -> 240x176 fill", sets["png"], Geometry((240, 176))),
        ("decode_image PNG -> 224x224 fill", sets["png"], FILL_224),
        ("decode_image JPEG -> 224x224 fill", sets["jpeg"], FILL_224),
        ("decode_image large JPEG -> 224x224 fill", sets["large"], FILL_224),
    ]
    rows = []
    for name, paths, geometry in calls:
        ms = per_image_ms(lambda p, g=geometry: decode_image(p.read_bytes(), g), paths, seconds)
        backends = sorted({decode_image(p.read_bytes(), geometry).backend for p in paths})
        rows.append(f"| {name} | {ms:.2f} | {', '.join(backends)} |")
    ms = per_image_ms(lambda p: decode_mask(p.read_bytes()), sets["mask"], seconds)
    rows.append(f"| decode_mask 8-bit PNG | {ms:.2f} | spng |")
    return rows


def main() -> None:
    """Run every case and print the tables."""
    args = parse_args()
    cv2.setNumThreads(1)
    versions = backend_versions()
    print(
        f"{harness.machine()}; numpy {np.__version__}, "
        + ", ".join(f"{k} {v}" for k, v in versions.items())
        + " (shared machine: compare within a run)"
    )
    with tempfile.TemporaryDirectory() as tmp:
        sets = dataset(args.data, args.limit, Path(tmp))
        pillow_name = versions["pillow_flavour"]
        print(f"\n| case | OpenCV ms | {pillow_name} ms | Pillow / OpenCV | max abs diff |")
        print("|---|---:|---:|---:|---:|")
        for case in cases(sets):
            opencv, pillow = measure(case, args.seconds)
            diff = max_difference(case)
            print(f"| {case.name} | {opencv:.3f} | {pillow:.3f} | {pillow / opencv:.2f} | {diff} |")
        print(f"\n{len(sets['large'])} JPEGs with short side >= 448 -> 224x224 fill, area:")
        print("| decode + resize | ms/image | mean abs diff | max abs diff |\n|---|---:|---:|---:|")
        print("\n".join(reduction_rows(sets["large"], args.seconds)))
        print(
            "\n| PNG | OpenCV ms | Pillow ms | libspng ms | OpenCV / libspng | same pixels |"
            "\n|---|---:|---:|---:|---:|---|"
        )
        print("\n".join(spng_rows(sets, args.seconds)))
        print(
            "\n| INTER_AREA | uint8 ms | float32 route ms | uint8 / float32 | same pixels |"
            "\n|---|---:|---:|---:|---|"
        )
        print(area_row(sets, args.seconds))
        print("\n| packer.imaging | ms/image | backend |\n|---|---:|---|")
        print("\n".join(chosen_rows(sets, args.seconds)))


if __name__ == "__main__":
    main()
