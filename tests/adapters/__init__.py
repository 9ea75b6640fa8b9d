"""Tests of the framework adapters, one package each: packer.keras (and its backup callback),
packer.tf, packer.torch (and its pinning and shared-memory hand-off)."""
