"""Byte-identical packs across refactors: shard hashes of fixed inputs and options, pinned,
and the manifest's classes and statistics with them.

The sources are computed by integer arithmetic (no random streams, lossless PNG), and the
options avoid arithmetic that could differ between library versions (no resampling but exact
2x area averaging and packer's own nearest-neighbour mask resampling; no gzip or PNG/JPEG
re-encoding). The hashes in GOLDEN were written by the packer of commit ee1492b, before the
layout was reorganised; a change to them is a change of the on-disk bytes.
"""

from __future__ import annotations

import json

import pytest

import packer
from packer.fields.presets import fields_for
from tests.fixtures.golden import (
    CASES,
    GOLDEN,
    GOLDEN_MANIFEST,
    digest,
    field_kinds,
    manifest_digest,
)
from tests.fixtures.packs import manifest_hashes


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("workers", [1, 2])
def test_pack_bytes_match_golden_hashes(golden_sources, tmp_path, case, workers):
    kind, options = CASES[case]
    out = tmp_path / case
    packer.pack(golden_sources[kind], out=out, workers=workers, **options)
    assert digest(out) == GOLDEN[case], json.dumps(manifest_hashes(out), indent=1)
    assert manifest_digest(out) == GOLDEN_MANIFEST[case], (out / "dataset.json").read_text()
    task = json.loads((out / "dataset.json").read_text())["task"]
    preset = fields_for(task, (1, 1), "uint8")
    assert field_kinds(out) == [(f.name, f.kind) for f in preset]
