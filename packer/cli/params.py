"""Parameter types of the command line: sizes, byte counts, split specs, paths and URLs checked
through the storage seam, and every registered format's own options."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import click

from .. import storage
from ..errors import PackError
from ..formats import all_options
from ..options import Option
from ..sources import parse_split_spec

_UNITS = {"": 1, "b": 1, "k": 10**3, "kb": 10**3, "m": 10**6, "mb": 10**6, "g": 10**9}
_UNITS |= {"gb": 10**9, "kib": 2**10, "mib": 2**20, "gib": 2**30}
FORMAT_OPTIONS = all_options()  # every format's own options, each with the formats taking it


def parse_size(text: str) -> tuple[int, int]:
    """`480x352` -> (480, 352) as WIDTHxHEIGHT; `224` -> (224, 224)."""
    match = re.fullmatch(r"\s*(\d+)\s*(?:[xX×]\s*(\d+))?\s*", text)
    if not match:
        raise click.BadParameter(f"{text!r} is not WIDTHxHEIGHT (e.g. 480x352) or one number")
    width = int(match[1])
    height = int(match[2] or width)
    if width == 0 or height == 0:
        raise click.BadParameter(f"{text!r}: width and height must be positive (e.g. 480x352)")
    return width, height


def parse_bytes(text: str) -> int:
    """`256MB`, `1GiB`, `1000000` -> bytes."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*", text)
    if not match or match[2].lower() not in _UNITS:
        raise click.BadParameter(f"{text!r} is not a size in bytes (e.g. 256MB, 1GiB, 1000000)")
    return int(float(match[1]) * _UNITS[match[2].lower()])


def size_option(ctx, param, value):
    """--size: WIDTHxHEIGHT or one number, None when not given."""
    return None if value is None else parse_size(value)


def bytes_option(ctx, param, value):
    """--shard-size: a byte count with an optional unit."""
    return parse_bytes(value)


def split_option(ctx, param, value):
    """--split: name=fraction pairs, checked."""
    if value is None:
        return None
    try:
        return parse_split_spec(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None


def location(ctx, param, value):
    """A path or URL argument, checked through the storage seam: a URL no backend handles is
    a usage error here, never a local folder named `s3:`."""
    if value is None:
        return None
    try:
        storage.backend(value)
    except PackError as exc:
        raise click.BadParameter(str(exc)) from None
    return value


def existing(ctx, param, value):
    """A path that must exist (SRC, a pack folder). A URL is checked where it is used: a
    missing credential or bucket then ends as one `Error:` line, not a usage error."""
    value = location(ctx, param, value)
    if value is not None and not storage.is_url(value) and not storage.exists(value):
        raise click.BadParameter(f"{value}: no such file or folder")
    return value


def format_options(command):
    """Add every registered format's options to `command`, in registry order. Each is unset
    (None) unless given, so the chosen format's default applies and an option given for
    another format is refused by the plan; its help names the formats that take it."""
    for option, names in reversed(FORMAT_OPTIONS):
        shown = "off" if option.kind == "flag" else str(option.default)
        help = f"{', '.join(names)}: {option.help}."
        command = declared_option(replace(option, default=None, shown=shown, help=help))(command)
    return command


def _click_kind(option: Option) -> dict:
    """How click reads an option's value, by its declared kind."""
    kind = option.kind
    if kind == "choice":
        return {"type": click.Choice(option.choices)}
    if kind == "int":
        low, high = option.range or (None, None)
        return {"type": click.IntRange(low, high) if (low, high) != (None, None) else int}
    if kind == "number":
        low, high = option.range or (None, None)
        return {"type": click.FloatRange(low, high) if (low, high) != (None, None) else float}
    if kind in ("file", "folder"):
        return {
            "type": click.Path(
                exists=True, dir_okay=kind == "folder", file_okay=kind == "file", path_type=Path
            )
        }
    readers = {"size": size_option, "bytes": bytes_option, "split": split_option}
    return {"callback": readers[kind]} if kind in readers else {}


def declared_option(option: Option):
    """The click option of one declared option (see `packer.options`)."""
    name = option.name.replace("_", "-")
    default = option.default if option.cli_default is None else option.cli_default
    settings: dict = {"help": option.help, "default": default, **_click_kind(option)}
    flags = [f"--{name}"]
    if option.kind == "switch":
        flags = [f"--{name}/--no-{name}"]
    elif option.kind == "flag":
        settings.update(is_flag=True, show_default="off")
    if option.multiple:
        settings.update(multiple=True, default=())
    if option.shown is not None:
        settings["show_default"] = option.shown
    return click.option(*flags, option.name, **settings)


def declared_options(options):
    """Add `options` (declared `Option`s) to a command, in their order."""

    def add(command):
        for option in reversed(tuple(options)):
            command = declared_option(option)(command)
        return command

    return add
