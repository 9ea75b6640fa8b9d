"""Tests of packer.formats: every byte each format writes, read back by us and by its own tools."""
