"""Which decoders ran: their versions, and whether PIL is Pillow or Pillow-SIMD (both install
the same `PIL` module, so only the distribution whose version matches PIL's own can tell)."""

from __future__ import annotations

import importlib.metadata

import cv2
import PIL
import pyspng


def backend_versions() -> dict[str, str]:
    """Versions of the decoders in use, and which distribution really provides PIL."""
    return {
        "opencv": cv2.__version__,
        "pillow": PIL.__version__,
        "pillow_flavour": _pillow_flavour(),
        "pyspng": pyspng.__version__,
    }


def _pillow_flavour() -> str:
    """'pillow-simd' or 'pillow': the installed distribution whose version is PIL's own."""
    for name in ("pillow-simd", "pillow"):
        try:
            if importlib.metadata.version(name) == PIL.__version__:
                return name
        except importlib.metadata.PackageNotFoundError:
            continue
    return "unknown"
