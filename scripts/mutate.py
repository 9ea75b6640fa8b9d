"""Mutation probe: make one-line bugs in a module and see whether its own tests notice.

Each mutant changes one token of one line (a comparison, an arithmetic or boolean operator, a
constant, a `not`) or replaces one simple statement by `pass`. It is written into a copy of the
repository (the working tree is never touched) and the given tests run there with `-x`; a
mutant no test fails is a survivor, listed at the end with its line. Survivors are either
equivalent (the same behaviour written differently) or a test to write.

    python scripts/mutate.py packer/sources/coco_masks.py tests/sources/test_coco.py
    python scripts/mutate.py packer/reading/position.py tests/reading/test_elastic.py \
        --lines 57-90,101-106
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import importlib
import io
import os
import shutil
import subprocess
import sys
import tempfile
import time
import tokenize
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SWAPS = {
    "==": "!=", "!=": "==", "<": "<=", "<=": "<", ">": ">=", ">=": ">",
    "+": "-", "-": "+", "*": "//", "//": "*", "%": "//", "+=": "-=", "-=": "+=",
    "and": "or", "or": "and", "is": "is not", "True": "False", "False": "True",
}  # fmt: skip


@dataclass(frozen=True)
class Mutant:
    line: int  # 1-based
    before: str
    after: str

    def __str__(self) -> str:
        return f"{self.line}: {self.before.strip()}  ->  {self.after.strip()}"


def replaced(lines: list[str], number: int, line: str) -> str:
    """The source with line `number` (1-based) replaced by `line`."""
    return "".join([*lines[: number - 1], line, *lines[number:]])


def skipped_lines(tree: ast.Module) -> set[int]:
    """Lines not worth mutating: imports, signatures, decorators, raise statements, docstrings."""
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom, ast.Raise)):
            lines.update(range(node.lineno, node.end_lineno + 1))
        elif isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            lines.update(range(node.lineno, node.body[0].lineno))
            lines.update(d.lineno for d in node.decorator_list)
        elif isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            lines.update(range(node.lineno, node.end_lineno + 1))
    return lines


def mutants(source: str, wanted: set[int] | None = None) -> list[Mutant]:
    """Every one-token and one-statement mutant of `source` (on the `wanted` lines, when
    given) that still compiles."""
    lines = source.splitlines(keepends=True)
    tree = ast.parse(source)
    skip = skipped_lines(tree)
    found: list[Mutant] = []

    def add(number: int, after: str) -> None:
        before = lines[number - 1]
        if (wanted is None or number in wanted) and number not in skip and after != before:
            try:
                ast.parse(replaced(lines, number, after))
            except SyntaxError:
                return
            found.append(Mutant(number, before, after))

    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        (row, col), (end_row, end_col) = tok.start, tok.end
        if row != end_row or row > len(lines):
            continue
        line = lines[row - 1]
        if tok.string in SWAPS:
            add(row, line[:col] + SWAPS[tok.string] + line[end_col:])
        elif tok.string == "not":
            add(row, line[:col] + line[end_col:].lstrip())
        elif tok.type == tokenize.NUMBER and tok.string.isdigit():
            add(row, line[:col] + str(int(tok.string) + 1) + line[end_col:])
    for node in ast.walk(tree):
        simple = (ast.Assign, ast.AugAssign, ast.Expr)  # not a dataclass field
        if isinstance(node, simple) and node.lineno == node.end_lineno:
            line = lines[node.lineno - 1]
            indent = line[: len(line) - len(line.lstrip())]
            add(node.lineno, f"{indent}pass\n")
    return sorted(set(found), key=lambda m: (m.line, m.after))


def copy_of_repository(into: Path) -> Path:
    """The tracked and untracked, not ignored files of the repository, copied under `into`."""
    listed = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard"],
        cwd=ROOT, capture_output=True, text=True, check=True,
    ).stdout.split()  # fmt: skip
    for name in listed:
        if (ROOT / name).is_file():
            (into / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, into / name)
    return into


HEAVY = ("numpy", "cv2", "PIL.Image", "pycocotools.mask", "torch", "tensorflow", "keras")


def preload() -> None:
    """Import the heavy libraries once, before any fork, so that each mutant's run pays only
    for packer and its tests (packer itself is imported fresh in every child)."""
    os.environ.setdefault("KERAS_BACKEND", "tensorflow")
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    for name in HEAVY:
        with contextlib.suppress(ImportError):
            importlib.import_module(name)


def outcome(copy: Path, tests: list[str], pytest_args: list[str], timeout: float) -> str:
    """How the tests end in a forked child, inside the copy: passed, failed or timeout."""
    import pytest

    pid = os.fork()
    if pid == 0:  # the child: its own process group, so a timeout ends its helpers too
        os.setpgrp()
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, 1)
        os.dup2(null, 2)
        os.chdir(copy)
        sys.path.insert(0, str(copy))
        os.environ["PYTHONPATH"] = str(copy)  # for the processes the tests start,
        os.environ["PYTHONDONTWRITEBYTECODE"] = "1"  # which compile each mutant afresh too
        args = ["-x", "-q", "-p", "no:cacheprovider", *pytest_args, *tests]
        os._exit(int(pytest.main(args)))
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return "passed" if os.waitstatus_to_exitcode(status) == 0 else "failed"
        time.sleep(0.05)
    os.killpg(pid, 9)
    os.waitpid(pid, 0)
    return "timeout"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("module", help="the file to mutate, relative to the repository root")
    parser.add_argument("tests", nargs="+", help="its own tests (pytest paths or node ids)")
    parser.add_argument("--lines", default="", help="only lines FIRST-LAST[,FIRST-LAST...]")
    parser.add_argument("-k", default="", help="pytest's -k expression for the tests")
    parser.add_argument("--list", action="store_true", help="list the mutants, run nothing")
    args = parser.parse_args()
    source = (ROOT / args.module).read_text()
    wanted = None
    if args.lines:
        spans = [span.partition("-") for span in args.lines.split(",")]
        wanted = {n for a, _, b in spans for n in range(int(a), int(b or a) + 1)}
    found = mutants(source, wanted)
    if args.list:
        print("\n".join(map(str, found)))
        print(f"{len(found)} mutants")
        return
    pytest_args = ["-k", args.k] if args.k else []
    preload()
    sys.dont_write_bytecode = True  # every child compiles the mutated module afresh
    with tempfile.TemporaryDirectory(prefix="mutants-") as scratch:
        copy = copy_of_repository(Path(scratch))
        target = copy / args.module
        start = time.monotonic()
        if outcome(copy, args.tests, pytest_args, timeout=1800) != "passed":
            sys.exit("the tests fail without a mutant: fix them first")
        timeout = 3 * (time.monotonic() - start) + 30
        print(f"tests pass unmutated in {time.monotonic() - start:.0f} s", flush=True)
        survivors = []
        lines = source.splitlines(keepends=True)
        for n, mutant in enumerate(found, 1):
            target.write_text(replaced(lines, mutant.line, mutant.after))
            result = outcome(copy, args.tests, pytest_args, timeout)
            print(f"[{n}/{len(found)}] {result:8} {mutant}", flush=True)
            if result == "passed":
                survivors.append(mutant)
        target.write_text(source)
    print(f"\n{len(found) - len(survivors)} of {len(found)} killed; survivors:")
    print("\n".join(map(str, survivors)) or "none")


if __name__ == "__main__":
    main()
