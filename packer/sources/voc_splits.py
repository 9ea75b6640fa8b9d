"""Pascal VOC's split lists: every `ImageSets/Main/<name>.txt` is the split `<name>` (`train`,
`val`, `trainval`, `test`, or any other name), except the per-class lists VOC ships beside them
(`<class>_<name>.txt`, whose `<name>.txt` is there too), which say which images hold a class.

VOC2012 ships `trainval.txt` beside `train.txt` and `val.txt`, its union: then train and val are
the splits and trainval is not packed a second time (any of its ids in neither is, as the split
`trainval`); VOC2007's test-set release ships `trainval.txt` and `test.txt`, two splits. Each
choice is said in a note; an id listed twice in one list is packed once in that split, and an
id in two lists is in both splits, both said too.
"""

from __future__ import annotations

from pathlib import Path

from .model import Found, Tree, ext, join, stem
from .walk import read_text

UNION = ("trainval", ("train", "val"))  # a list that is the union of two others, as VOC ships


def split_lists(root: Path, tree: Tree, base: str, found: Found) -> list[tuple[str, str]] | None:
    """(id, split) for every id of every split list, sorted by split then id; None when the
    folder holds no split list."""
    folder = join(base, "ImageSets/Main")
    node = tree.get(folder)
    names = {stem(n): n for n in node.files if ext(n) == ".txt"} if node else {}
    per_class = {s for s in names if "_" in s and s.rpartition("_")[2] in names}
    lists = {s: _ids(root, folder, names[s], found) for s in sorted(names) if s not in per_class}
    if not lists:
        return None
    notes = [f"splits from {folder}/: {', '.join(f'{s}.txt' for s in lists)}"]
    if per_class:
        example = names[min(per_class)]
        notes[0] += f" ({len(per_class)} per-class lists there, e.g. {example}, not splits)"
    union, parts = UNION
    if union in lists and all(p in lists for p in parts):
        covered = set().union(*(lists[p] for p in parts))
        rest = [i for i in lists.pop(union) if i not in covered]
        notes.append(
            f"{union}.txt is {' + '.join(f'{p}.txt' for p in parts)}: packed as "
            f"{' and '.join(parts)}, not again as {union}"
            + (f" (its {len(rest)} ids in neither are split {union})" if rest else "")
        )
        if rest:
            lists[union] = rest
    pairs = sorted((split, i) for split, ids in lists.items() for i in ids)
    splits_of: dict[str, list[str]] = {}
    for split, i in pairs:
        splits_of.setdefault(i, []).append(split)
    shared = {i: s for i, s in splits_of.items() if len(s) > 1}
    if shared:
        i, s = next(iter(sorted(shared.items())))
        notes.append(
            f"{len(shared)} ids are in more than one split list, packed in each (e.g. {i}: "
            f"{', '.join(s)})"
        )
    found.notes += notes
    return [(i, split) for split, i in pairs]


def _ids(root: Path, folder: str, name: str, found: Found) -> list[str]:
    """The ids of one list, in its order, each once (a repeat is said in a note)."""
    ids: list[str] = []
    seen: set[str] = set()
    repeats = 0
    for line in read_text(root / folder / name, f"{folder}/{name}").splitlines():
        if line.strip():
            key = line.split()[0]
            repeats += key in seen
            if key not in seen:
                seen.add(key)
                ids.append(key)
    if repeats:
        found.notes.append(f"{folder}/{name}: {repeats} ids listed again, packed once")
    return ids
