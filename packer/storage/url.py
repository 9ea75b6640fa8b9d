"""Paths that may be URLs: `pathlib.Path` for plain paths, `URLPath` for `s3://`, `gs://`, ...

`Path("s3://bucket/key")` collapses the `//` after the scheme, so code that joins pack paths
with `/` (`out / split / name`) would lose the URL. A `URLPath` is a pure POSIX path that
keeps it: joins, `.name`, `.parent`, `.with_name` and `.relative_to` work as on a `Path`, and
`str()` / `os.fspath()` give the URL back. It does no I/O: the storage backends do.
"""

from __future__ import annotations

import os
import re
from pathlib import Path, PurePosixPath

_SCHEME = re.compile(r"^([a-zA-Z][a-zA-Z0-9+.-]+)://")
_COLLAPSED = re.compile(r"^([a-zA-Z][a-zA-Z0-9+.-]+):/")


def url_scheme(path: str | os.PathLike) -> str | None:
    """The scheme of a URL (`s3`, `gs`, `memory`, `file`), None for a plain path."""
    match = _SCHEME.match(os.fspath(path))
    return match[1].lower() if match else None


class URLPath(PurePosixPath):
    """A URL as a pure path: `URLPath("s3://bucket/packed") / "train"` is `s3://bucket/packed/train`."""

    def __str__(self) -> str:
        try:
            return self._url  # type: ignore[has-type]
        except AttributeError:
            text = super().__str__()
            self._url = _COLLAPSED.sub(r"\1://", text, count=1)
            return self._url

    def __fspath__(self) -> str:
        return str(self)

    def __repr__(self) -> str:
        return f"URLPath({str(self)!r})"

    @property
    def scheme(self) -> str:
        return url_scheme(str(self)) or "file"

    def expanduser(self) -> URLPath:
        return self

    def resolve(self) -> URLPath:
        return self


def as_path(path: str | os.PathLike) -> Path | URLPath:
    """A `URLPath` for a URL other than `file://`, else a `Path` (`file://` stripped)."""
    if isinstance(path, URLPath):
        return path
    text = os.fspath(path)
    scheme = url_scheme(text)
    if scheme is None:
        return Path(text)
    if scheme == "file":
        return Path(text[len("file://") :])
    return URLPath(text)


def is_url(path: str | os.PathLike) -> bool:
    """True for a URL that a remote backend serves (not a plain path, not `file://`)."""
    return url_scheme(path) not in (None, "file")
