"""`--classes` given a YAML: an Ultralytics `data.yaml`'s `names` (a list, or {index: name})
are the classes, in their order, for every layout that takes `--classes`; a YAML without
`names` is refused in one line (each of its lines was once taken for a class name, and every
object dropped with exit 0)."""

from __future__ import annotations

import pytest

import packer
from packer.errors import SourceError
from packer.labels import read_class_table
from packer.sources import AnnotationOptions, scan
from tests.fixtures.voc import voc

NAMES = ["person", "dog", "cat", "aeroplane"]


@pytest.mark.parametrize(
    "text",
    [
        "path: .\ntrain: images/train\nnc: 4\nnames: [person, dog, cat, aeroplane]\n",
        "names:\n  - person\n  - dog\n  - cat\n  - aeroplane\n",
        "names:\n  3: aeroplane\n  0: person\n  2: cat\n  1: dog\n",
    ],
)
def test_a_data_yaml_gives_its_names_in_order(tmp_path, text):
    path = tmp_path / "data.yaml"
    path.write_text(text)
    table = read_class_table(path)
    assert list(table.names) == NAMES and table.source == "data.yaml"
    options = AnnotationOptions.given(None, classes=path)
    result = scan(voc(tmp_path / "src"), annotations=options)
    assert result.class_names == NAMES
    sample = next(s for s in result.samples if s.image.endswith("2008_000001.jpg"))
    objects, problems = sample.mask.objects(lambda r: (result.root / r).read_bytes(), (50, 40))
    assert [o.label for o in objects] == [1, 2] and problems == []


def test_a_voc_pack_with_a_data_yaml_keeps_every_object(tmp_path):
    (tmp_path / "data.yml").write_text("names: {0: person, 1: dog, 2: cat, 3: aeroplane}\n")
    ds = packer.pack(voc(tmp_path / "src"), out=tmp_path / "p", classes=tmp_path / "data.yml")
    assert ds.class_names == NAMES and ds.manifest.get("dropped_objects", []) == []
    part = ds["train"]
    assert sum(len(part[i][1]["labels"]) for i in range(part.count)) == 5


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("train: images/train\nval: images/val\n", "a YAML class table needs names"),
        ("nc: 4\n", "a YAML class table needs names"),
        ("- person\n- dog\n", "a YAML class table needs names"),
        ("names: [a\n", "cannot read classes.yaml"),
        ("names: {1: a, 2: b}\n", r"needs class indices 0\.\.1"),
    ],
)
def test_a_yaml_without_names_is_refused_in_one_line(tmp_path, text, message):
    path = tmp_path / "classes.yaml"
    path.write_text(text)
    with pytest.raises(SourceError, match=message) as info:
        read_class_table(path)
    assert "\n" not in str(info.value)
