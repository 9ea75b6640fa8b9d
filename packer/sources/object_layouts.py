"""What the layouts that list objects (YOLO, Pascal VOC) share: the task they give for the one
asked, and class names from a names file (`--classes FILE`)."""

from __future__ import annotations

from .. import storage
from ..errors import SourceError
from ..flags import flag
from ..labels import read_class_table
from .model import AnnotationOptions


def chosen_task(layout: str, asked: str, natural: str, offered: tuple[str, ...], why: str) -> str:
    """The task a layout gives: its natural one under auto, else the one asked when it can
    give it; a one-line SourceError saying why not (`why`) otherwise."""
    if asked == "auto":
        return natural
    if asked in offered:
        return asked
    raise SourceError(
        f"{flag('task', asked)}: {layout} gives {' or '.join(offered)}, not {asked} ({why})"
    )


def given_names(annotations: AnnotationOptions) -> tuple[list[str], str] | None:
    """The class names of `--classes FILE` (a names file, or a name,r,g,b table) and the
    file's name; None when no file was given."""
    if annotations.classes is None:
        return None
    path = storage.as_path(annotations.classes).expanduser()
    try:
        table = read_class_table(path)
    except OSError as exc:
        raise SourceError(
            f"{flag('classes', annotations.classes)}: cannot read it ({exc})"
        ) from None
    return list(table.names), path.name
