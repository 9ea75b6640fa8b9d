"""Tests of the framework adapters at the package top level: packer.keras (and its backup
callback), packer.tf, packer.torch (and its pinning and shared-memory hand-off)."""
