"""Every error a user can act on, in one tree: the message says what went wrong and what to do.

The CLI catches `PackError` alone and prints its message as one `Error:` line; anything else
is a bug and keeps its traceback. Subclasses also derive from the built-in error a caller
would expect (ValueError for bad input, OSError for storage), so `except ValueError` keeps
working.
"""

from __future__ import annotations


class PackError(RuntimeError):
    """The pack, or a read of a pack, cannot start or go on; the message says why and what to do."""


class SourceError(PackError, ValueError):
    """The source folder or list cannot be packed as it is (layout, splits, list rows)."""


class ImageError(PackError, ValueError):
    """An image or mask file that cannot be decoded, or is too large to decode safely."""


class ImageKindError(PackError, ValueError):
    """Images of one pack that differ in sample type or bands, or that cannot be converted as
    asked (`--channels`, `--dtype`): the pack stores one kind per field."""


class LabelError(PackError, ValueError):
    """A class table, or a mask that does not fit its image or its class table."""


class UnknownLabelError(PackError):
    """With `--unknown-colors error`: a mask holds values outside the class table."""


class ManifestError(PackError, ValueError):
    """A missing, unreadable or incompatible dataset.json."""


class MixtureError(PackError, ValueError):
    """A mixture of packs that cannot be read together as asked (amounts, tasks, sizes, classes)."""


class RecordIOError(PackError, ValueError):
    """A RecordIO file or record that is not what the format specifies."""


class StorageError(PackError, OSError):
    """A path or URL that cannot be read, listed or written as asked."""


class LockHeldError(StorageError):
    """Another process holds the lock a writer asked for; `holder` says who (pid, host)."""

    def __init__(self, path: str, holder: str) -> None:
        super().__init__(f"{path} is locked by {holder}")
        self.holder = holder


class SplitNotFoundError(PackError, KeyError):
    """A split name the pack does not have (a KeyError too, as `ds["nope"]` should raise)."""

    def __str__(self) -> str:  # KeyError would show the message in quotes
        return str(self.args[0])


class FrameworkVersionError(PackError, ImportError):
    """The installed Keras or torch is outside the range packer is tested with (setup.cfg)."""


class ReorderError(PackError, ValueError):
    """A framework would reorder or split the batches a packer reader orders itself."""
