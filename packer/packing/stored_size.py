"""The bytes a record takes on disk, estimated before packing, so that `--shard-size` is what a
compressed pack's shards hold: a few of the pack's samples (seeded, spread over the set) go
through the converter and the fields' encoder, as packing sends them, each field encoded as
its format stores it (`stored_fields`); fields stored raw count their decoded bytes. Without an
encoded field a record's stored bytes are its decoded bytes. A pack records its estimate
(`to_json`); a run over a pack of the same sources and options takes that one (`own`), so an
edit to a drawn source moves no shard's boundary and an update packs again only its shard.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from .. import formats, manifest, storage
from ..errors import PackError
from ..flags import name_of
from ..schema import Field, record_bytes
from ..sources import Sample
from .convert import Converter, PackConfig
from .ledger.workdir import plan_marker
from .values import SampleError

# Samples encoded for the estimate: the mean of this many payloads is within a few percent of
# the set's on photos, for the cost of decoding them once more at plan time.
SAMPLED = 24


@dataclass(frozen=True)
class StoredSize:
    """One record's bytes as stored: estimated (`encoded` samples encoded) or, for a pack
    without encoded fields, exactly its decoded bytes (`encoded` 0). `own`: the estimate the
    pack in OUT was made with, taken again rather than made anew."""

    record: int
    encoded: int = 0
    what: str = ""  # the encodings, as `jpeg q90, png`
    own: bool = False

    def notes(self, shard_bytes: int) -> list[str]:
        """The estimate as a plan's note (none when nothing is encoded)."""
        if not self.encoded:
            return []
        per_shard = max(1, shard_bytes // self.record)
        whose = ", the pack's own, kept for its updates" if self.own else ""
        return [
            f"shard size ({name_of('shard_size')}) {shard_bytes:,} bytes: about "
            f"{self.record:,} bytes a sample as stored (estimated from {self.encoded} samples "
            f"encoded as {self.what}{whose}), {per_shard:,} sample{'s' * (per_shard != 1)} "
            "a shard"
        ]

    def to_json(self) -> dict | None:
        """The estimate as a pack records it (manifest, plan.json); None when exact (raw)."""
        if not self.encoded:
            return None
        return {"record_bytes": self.record, "samples": self.encoded, "encodings": self.what}


def estimate(config: PackConfig, samples: Sequence[Sample], seed: int) -> StoredSize:
    """One record's stored bytes for a pack of `config` over `samples`: the raw fields' bytes
    plus the mean payload of the encoded fields over `drawn(samples, seed)`, rounded to two
    significant digits (a source edited slightly leaves the plan as it was). Samples that do
    not pack are left out of the mean; none packing gives the decoded bytes, as for raw."""
    fields = stored_fields(config)
    encoded = [f for f in fields if f.encoding != "raw"]
    decoded = StoredSize(record_bytes(config.fields))
    if not encoded:
        return decoded
    quality = formats.encoding.quality(config.format_options)
    converter = Converter(config)
    sizes = []
    for sample in drawn(samples, seed):
        try:
            record, _, _ = converter.record(sample, {})
        except (SampleError, PackError):
            continue  # packing rejects it, or stops there, with the reason
        sizes.append(
            sum(len(formats.encoding.payload(f, record[f.name], quality)) for f in encoded)
        )
    if not sizes:
        return decoded
    raw = record_bytes(tuple(f for f in fields if f.encoding == "raw"))
    mean = raw + sum(sizes) / len(sizes)
    what = sorted({f"jpeg q{quality}" if f.encoding == "jpeg" else f.encoding for f in encoded})
    return StoredSize(round(float(f"{mean:.2g}")), len(sizes), ", ".join(what))


def own(out: Path, options: Mapping, root: str | os.PathLike, revision: int) -> StoredSize | None:
    """The estimate OUT's pack was made with (its manifest's, or an unfinished pack's
    plan.json's) when that pack has the same source folder, `options` and converter `revision`
    (one that a run of this plan updates or resumes); None otherwise, or when it recorded none
    (raw, or made before packs recorded it): then the plan estimates as for a fresh pack."""
    for path in (out / manifest.MANIFEST_NAME, plan_marker(out)):
        try:
            made = json.loads(storage.read_text(path))  # one request where OUT is a URL
            kept = made["stored_size"]
            stored = StoredSize(int(kept["record_bytes"]), int(kept["samples"]), kept["encodings"])
        except FileNotFoundError:
            continue
        except (OSError, ValueError, KeyError, TypeError):
            return None  # none recorded; an unreadable file is the run's decision to name
        same = (  # as ledger.update's differences, but an unknown revision is another pack
            made.get("source", {}).get("root") == str(root)
            and made.get("options") == json.loads(json.dumps(options))
            and made.get("converter_revision") == revision
        )
        return replace(stored, own=True) if same and stored.record > 0 else None
    return None


def stored_fields(config: PackConfig) -> tuple[Field, ...]:
    """The pack's fields with the encoding its format stores each in: the format's
    `stored_fields` says so where it encodes more than the fields ask (RecordIO's mask in an
    encoded payload); otherwise the fields' own."""
    told = getattr(formats.get(config.format), "stored_fields", None)
    return config.fields if told is None else told(config.fields, config.format_options)


def drawn(samples: Sequence[Sample], seed: int, count: int = SAMPLED) -> list[Sample]:
    """`count` of `samples` (all when fewer): one drawn by `seed` from each of `count` equal
    stretches of the list, so that every part of the set has its say and no pattern of a
    sorted list (the first file of each folder) decides the estimate."""
    total = len(samples)
    if total <= count:
        return list(samples)
    digest = hashlib.sha256(f"{seed}/stored size".encode()).digest()
    rng = random.Random(int.from_bytes(digest[:8], "little"))
    return [
        samples[rng.randrange(i * total // count, (i + 1) * total // count)] for i in range(count)
    ]
