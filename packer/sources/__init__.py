"""Find the samples of an image dataset from file names alone: class folders, mask folders, lists.

`scan` detects the layout, pairs masks with images, assigns splits and explains every input it
leaves out. It never opens an image (decoding is the packer's job), and all its filesystem
access goes through `walk`, the one module to change for sources stored elsewhere.
"""

from __future__ import annotations

from ..errors import SourceError
from .detect import LAYOUTS, layouts_help, scan
from .model import IMAGE_EXTENSIONS, AnnotationOptions, Rejection, Sample, SourceScan
from .objects import ObjectsRecipe, SourceObject
from .recipes import MaskRecipe, mask_files, mask_key, mask_line
from .splits import SPLIT_NAMES, assign_split, parse_split_spec

__all__ = [
    "IMAGE_EXTENSIONS",
    "LAYOUTS",
    "SPLIT_NAMES",
    "AnnotationOptions",
    "MaskRecipe",
    "ObjectsRecipe",
    "Rejection",
    "Sample",
    "SourceError",
    "SourceObject",
    "SourceScan",
    "assign_split",
    "layouts_help",
    "mask_files",
    "mask_key",
    "mask_line",
    "parse_split_spec",
    "scan",
]
