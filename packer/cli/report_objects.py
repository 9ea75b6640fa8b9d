"""What `pack` and `packer info` say about a detection or instances pack's objects: objects per
image and per class, COCO's size ranges, and the objects left out and why."""

from __future__ import annotations

from collections import Counter

SHOWN = 5  # dropped objects named one by one before "... and N more"


def dropped_lines(data: dict, named: int = SHOWN) -> list[str]:
    """The objects left out (bad annotations, or the pack's geometry), counted by reason,
    with the first few named by file."""
    dropped = data.get("dropped_objects")
    if not dropped:
        return []
    reasons = Counter(d["reason"] for d in dropped)
    top = "; ".join(f"{why} ({n})" for why, n in reasons.most_common(4))
    lines = [f"objects left out: {len(dropped)}: {top}"]
    for d in dropped[:named]:
        which = f" object {d['object']}" if "object" in d else ""
        lines.append(f"  {d['path']}{which}: {d['reason']}")
    if len(dropped) > named:
        lines.append(f"  ... and {len(dropped) - named} more (info --json lists them all)")
    return lines


def keypoint_lines(data: dict) -> list[str]:
    """Per point name, the objects with it visible and with it labelled (`stats.keypoints`
    named by the manifest's `keypoints`)."""
    counts = data["stats"].get("keypoints")
    if not counts or not counts["labelled"]:
        return []
    names = data.get("keypoints", {}).get("names") or []
    named = [names[k] if k < len(names) else str(k) for k in range(len(counts["labelled"]))]
    shown = ", ".join(
        f"{name} {seen}/{labelled}"
        for name, seen, labelled in zip(named, counts["visible"], counts["labelled"], strict=True)
    )
    return [f"points:   visible/labelled per keypoint: {shown}"]


def object_lines(data: dict) -> list[str]:
    """Objects per image and per class, and by COCO's area ranges (on the packed boxes); the
    keypoints' counts per name."""
    stats = data["stats"]
    objects = stats.get("objects")
    if objects is None:
        return []
    per_image = {int(k): v for k, v in objects["images_by_count"].items()}
    images = sum(per_image.values()) or 1
    total = sum(k * v for k, v in per_image.items())
    sizes = objects["sizes"]
    return [
        f"objects:  {total} in {images} images ({stats['computed_on']}): "
        f"{total / images:.2f} per image, at most {max(per_image, default=0)}, "
        f"{per_image.get(0, 0)} images with none",
        f"sizes:    small {sizes['small']}, medium {sizes['medium']}, large {sizes['large']} "
        "(COCO's ranges: under 32^2, under 96^2 px of the packed box)",
        *keypoint_lines(data),
    ]
