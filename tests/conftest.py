"""Pytest fixtures every folder shares: small synthetic datasets the tests make themselves,
packs several test modules read, and the real S3 endpoint (moto's server) started once.
Builders and helpers live in tests/fixtures/."""

from __future__ import annotations

import itertools
import logging
import os
import subprocess
import threading
from pathlib import Path
from types import SimpleNamespace

import pytest

from packer.synthetic import make_classification, make_segmentation
from tests.fixtures.golden import make_class_folders, make_objects, make_sources
from tests.fixtures.processes import pack_cmd
from tests.fixtures.s3 import SECRET, SlowShardUploads

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("KERAS_BACKEND", "tensorflow")


@pytest.fixture(scope="session")
def seg_src(tmp_path_factory) -> Path:
    """train/ + train_labels/, val/ + val_labels/ colour masks, class_dict.csv; 64x48 scenes."""
    return make_segmentation(tmp_path_factory.mktemp("seg"), {"train": 14, "val": 5}, (64, 48))


@pytest.fixture(scope="session")
def cls_src(tmp_path_factory) -> Path:
    """Three class folders of 48x36 JPEGs."""
    return make_classification(
        tmp_path_factory.mktemp("cls"), {"cats": 9, "dogs": 7, "owls": 6}, (48, 36)
    )


@pytest.fixture(scope="session")
def golden_sources(tmp_path_factory) -> dict[str, Path]:
    """The golden packs' sources: "seg" (mask folders), "cls" (class folders) and "obj" (COCO
    objects)."""
    base = tmp_path_factory.mktemp("golden")
    return {
        "seg": make_sources(base / "seg"),
        "cls": make_class_folders(base / "cls"),
        "obj": make_objects(base / "obj"),
    }


@pytest.fixture(scope="session")
def many_shards(tmp_path_factory) -> tuple[Path, list[str], Path]:
    """A source that packs into 40 one-sample shards (the pack options for that), and its
    uninterrupted reference pack: what the interruption tests kill and resume."""
    root = tmp_path_factory.mktemp("interrupt")
    src = make_segmentation(root / "src", {"train": 40}, (320, 240))
    args = ["--size", "96x72", "--shard-size", str(96 * 72 * 4), "--no-progress"]
    subprocess.run(pack_cmd(src, root / "reference", *args), check=True, capture_output=True)
    return src, args, root / "reference"


@pytest.fixture(scope="session")
def s3(tmp_path_factory):
    """moto's S3 server on a free port of 127.0.0.1, with the AWS_* environment pointing at it."""
    from moto.moto_server.werkzeug_app import (
        DomainDispatcherApplication,
        MotoRequestHandler,
        create_backend_app,
    )
    from werkzeug.serving import make_server

    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    slow = SlowShardUploads(DomainDispatcherApplication(create_backend_app))
    server = make_server("127.0.0.1", 0, slow, threaded=True, request_handler=MotoRequestHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    nowhere = str(tmp_path_factory.mktemp("aws") / "absent")
    env = {
        "AWS_ACCESS_KEY_ID": "packer-test-key",
        "AWS_SECRET_ACCESS_KEY": SECRET,
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_ENDPOINT_URL": f"http://127.0.0.1:{server.port}",
        "AWS_EC2_METADATA_DISABLED": "true",
        "AWS_SHARED_CREDENTIALS_FILE": nowhere,
        "AWS_CONFIG_FILE": nowhere,
        "PACKER_CACHE_DIR": str(tmp_path_factory.mktemp("cache")),
    }
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    import fsspec
    import s3fs

    # fsspec reuses filesystem instances: one made earlier in the session (a test of the
    # missing-credentials message, say) would keep its empty credentials.
    s3fs.S3FileSystem.clear_instance_cache()

    yield SimpleNamespace(fs=fsspec.filesystem("s3", use_listings_cache=False), slow=slow)
    server.shutdown()
    s3fs.S3FileSystem.clear_instance_cache()
    for k, v in saved.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


_buckets = itertools.count()


@pytest.fixture
def bucket(s3) -> str:
    """A new, empty bucket: its URL."""
    name = f"bucket-{next(_buckets)}"
    s3.fs.mkdir(name)
    return f"s3://{name}"
