"""RecordIO without MXNet: read any `.rec`/`.idx` pair, and turn packer's payloads into arrays.

```python
from packer.recordio import RecordIOReader, decode_payload

with RecordIOReader("train/train-00000-of-00001.rec") as reader:  # its .idx beside it
    header, payload = reader[7]          # IRHeader(flag, label, id, id2), payload bytes
    image, mask = decode_payload(payload)
    for header, payload in reader:       # every record in file order
        ...
```

DALI's `fn.readers.mxnet` takes one index for many `.rec` files: `dali_index(recs, path)`.

The bytes are specified in formats/recordio.md and implemented, both ways, in
`packer.formats.mxnet_recordio` (the pack format over them: `packer.formats.recordio`); this
module is their public face.
"""

from __future__ import annotations

from .errors import RecordIOError
from .formats.mxnet_recordio import (
    IRHeader,
    RecordIOReader,
    check_record_size,
    dali_index,
    decode_payload,
    encode_payload,
    frame,
    join_chunks,
    pack_record,
    read_index,
    unpack_record,
)

__all__ = [
    "IRHeader",
    "RecordIOError",
    "RecordIOReader",
    "check_record_size",
    "dali_index",
    "decode_payload",
    "encode_payload",
    "frame",
    "join_chunks",
    "pack_record",
    "read_index",
    "unpack_record",
]
