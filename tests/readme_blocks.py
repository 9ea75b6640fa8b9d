"""The fenced blocks of a Markdown file, as the README test runs them.

A block is run when its info string starts with `python` or `sh`. A block (or a file in a
block's info string: ```` ```csv map.csv ```` is written to `map.csv` before anything runs)
is named by its file, line, heading and first line, so a failure says which one it is.

`# needs: WORD[, WORD]` on a line (or on a comment line just above a Python statement)
marks what CI may lack: `cuda` (a GPU torch can use), `cluster` (a Ray cluster to join).
That line or statement runs only where each WORD is there; the rest of the block, which
shows the CPU or local form, runs everywhere.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

RUN = ("python", "sh")
FENCE = re.compile(r"^```(\S*)[ \t]*(.*)$")
NEEDS = re.compile(r"#\s*needs:\s*(\w+(?:\s*,\s*\w+)*)")


@dataclass(frozen=True)
class Block:
    """One fenced block: its language, the file its info string names, where it stands."""

    source: str  # the Markdown file's name
    line: int  # the line of its first code line, 1-based
    heading: str
    lang: str
    file: str  # a file name after the language (```csv map.csv), or ""
    code: str

    @property
    def first_line(self) -> str:
        return next((s.strip() for s in self.code.splitlines() if s.strip()), "")

    @property
    def name(self) -> str:
        """How a failure names the block: file:line, heading and first line."""
        return f"{self.source}:{self.line} [{self.heading}] {self.first_line}"


def blocks(path: Path) -> list[Block]:
    """Every fenced block of `path`, in order."""
    found, heading, lang, start, code = [], "(top)", None, 0, []
    file = ""
    for number, text in enumerate(path.read_text().splitlines(), 1):
        if lang is None:
            if text.startswith("#") and not text.startswith("#!"):
                heading = text.lstrip("#").strip()
            fence = FENCE.match(text)
            if fence:
                lang, file, start, code = fence[1], fence[2].strip(), number + 1, []
            continue
        if text.startswith("```"):
            found.append(Block(path.name, start, heading, lang, file, "\n".join(code) + "\n"))
            lang = None
            continue
        code.append(text)
    return found


def runnable(path: Path) -> list[Block]:
    """The blocks the README test runs (python and sh), in order."""
    return [b for b in blocks(path) if b.lang in RUN]


def needs(text: str) -> set[str]:
    """The words of a `# needs:` comment in `text` (empty when there is none)."""
    match = NEEDS.search(text)
    if not match:
        return set()
    return {w.strip() for w in match[1].split(",")}
