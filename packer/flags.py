"""How a message names an option: `--shard-size 0` on the command line, `shard_size=0` in Python.

Errors are raised deep inside packing and scanning, far from whoever called; they name options
through `flag`, and the command line switches the wording for the messages it prints
(`command_line_wording`), so a Python caller never reads about flags it did not pass.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator

_ON_COMMAND_LINE = contextvars.ContextVar("packer_command_line", default=False)
_UNSET = object()


def flag(name: str, value: object = _UNSET) -> str:
    """An option as the caller wrote it: `--mask-suffix _L` / `mask_suffix='_L'`, without a
    value `--mask-suffix` / `mask_suffix=...`, a switch `--overwrite` / `overwrite=True`."""
    if _ON_COMMAND_LINE.get():
        text = "--" + name.replace("_", "-")
        return text if value is _UNSET or value is True else f"{text} {value}"
    return f"{name}=..." if value is _UNSET else f"{name}={value!r}"


def name_of(name: str) -> str:
    """An option's bare name: `--shard-size` on the command line, `shard_size` in Python."""
    return "--" + name.replace("_", "-") if _ON_COMMAND_LINE.get() else name


def on_command_line() -> bool:
    """Whether messages are worded for the command line."""
    return _ON_COMMAND_LINE.get()


@contextlib.contextmanager
def command_line_wording() -> Iterator[None]:
    """Word the messages raised inside this block for the command line."""
    token = _ON_COMMAND_LINE.set(True)
    try:
        yield
    finally:
        _ON_COMMAND_LINE.reset(token)
