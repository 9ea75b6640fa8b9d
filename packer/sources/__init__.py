"""Source scanning as a package: its one module for now, split into modules by job next."""

from .detect import (
    IMAGE_EXTENSIONS,
    LAYOUTS,
    SPLIT_NAMES,
    Rejection,
    Sample,
    SourceError,
    SourceScan,
    assign_split,
    parse_split_spec,
    scan,
)

__all__ = [
    "IMAGE_EXTENSIONS",
    "LAYOUTS",
    "SPLIT_NAMES",
    "Rejection",
    "Sample",
    "SourceError",
    "SourceScan",
    "assign_split",
    "parse_split_spec",
    "scan",
]
