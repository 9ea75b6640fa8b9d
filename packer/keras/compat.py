"""The one place packer reaches into Keras' internals, because Keras has no public way: a
callback is not given `fit`'s epoch iterator, and cannot change how many steps `fit` runs in an
epoch (counted once, before callbacks run), which a resumed, shorter epoch needs.

Importing `packer.keras` with a Keras outside `SUPPORTED` fails in one line, and so does
`BackupAndRestore` when `fit`'s epoch iterator is no longer where it looks: never a silently
wrong resume.
"""

from __future__ import annotations

import sys
from typing import Any

import keras

from ..errors import FrameworkVersionError, PackError

SUPPORTED = ((3, 12), (4, 0))  # Keras versions tested (scripts/compat.sh): >= first, < second


def check_version(version: str = keras.__version__) -> None:
    """A one-line error when the installed Keras is outside the range packer is tested with."""
    numbers = tuple(int(part) for part in version.split(".")[:2] if part.isdigit())
    low, high = SUPPORTED
    if not low <= numbers < high:
        raise FrameworkVersionError(
            f"packer.keras supports Keras >={low[0]}.{low[1]},<{high[0]}.{high[1]} "
            f"(found {version}): install a Keras in that range"
        )


def fit_epoch_iterator() -> Any:
    """The `epoch_iterator` of the `fit` call running the current callback, found in `fit`'s
    frame (every Keras 3 backend names it so)."""
    frame = sys._getframe(1)
    while frame is not None:
        candidate = frame.f_locals.get("epoch_iterator")
        if hasattr(candidate, "data_adapter") and hasattr(candidate, "_num_batches"):
            return candidate
        frame = frame.f_back
    raise PackError(
        f"BackupAndRestore(reader=...) cannot find model.fit's epoch iterator in Keras "
        f"{keras.__version__}: install a Keras packer supports (setup.cfg)"
    )


def epoch_steps(iterator: Any) -> int:
    """How many steps `fit` runs in the current epoch."""
    return iterator.num_batches


def set_epoch_steps(iterator: Any, steps: int | None = None) -> None:
    """Make `fit` run `steps` steps from this epoch on (None: the dataset's whole epoch)."""
    iterator._num_batches = iterator.data_adapter.num_batches if steps is None else steps


check_version()
