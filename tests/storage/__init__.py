"""Tests of packer.storage: packs and sources by URL on a real S3, and the local shard cache."""
