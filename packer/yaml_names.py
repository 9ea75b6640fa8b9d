"""The class names of an Ultralytics `data.yaml`, as its `check_class_names` reads them: `names`
as a list or {index: name} (indices 0..K-1), `nc` alone naming them class_<i>. Shared by the
YOLO layout (its own data.yaml) and `--classes` given a data.yaml, so both read it alike.
"""

from __future__ import annotations

from .errors import SourceError

YAML_SUFFIXES = (".yaml", ".yml")


def read_yaml_names(text: str, name: str) -> list[str]:
    """The `names` of a YAML file given as a class table; a one-line SourceError when it is no
    YAML mapping or holds no `names` (a names file must name its classes)."""
    import yaml  # only YAML class tables need it

    try:
        config = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise SourceError(f"cannot read {name}: {' '.join(str(exc).split())}") from None
    if not isinstance(config, dict) or "names" not in config:
        raise SourceError(
            f"{name}: a YAML class table needs names (a list, or {{0: name, ...}}) as "
            "Ultralytics' data.yaml has them"
        )
    return yaml_names(config, name)


def yaml_names(config: dict, name: str) -> list[str]:
    """The class names (Ultralytics' `check_class_names`); `nc` alone names them class_<i>."""
    names = config.get("names")
    count = config.get("nc")
    if names is None:
        if not isinstance(count, int) or count < 1:
            raise SourceError(f"{name}: no names and no class count nc")
        return [f"class_{i}" for i in range(count)]
    if isinstance(names, list):
        names = dict(enumerate(names))
    if not isinstance(names, dict) or not names:
        raise SourceError(f"{name}: names must be a list or a mapping {{0: name, ...}}")
    try:
        by_id = {int(k): str(v) for k, v in names.items()}
    except (TypeError, ValueError):
        raise SourceError(f"{name}: names' keys must be class indices 0, 1, ...") from None
    if sorted(by_id) != list(range(len(by_id))):
        raise SourceError(
            f"{name}: a {len(by_id)}-class dataset needs class indices 0..{len(by_id) - 1}, "
            f"found {sorted(by_id)[:8]}"
        )
    if count is not None and count != len(by_id):
        raise SourceError(f"{name}: nc is {count} but {len(by_id)} names are given")
    return [by_id[i] for i in range(len(by_id))]
