"""Tests of packer.sources: each layout scanned into samples, packed where its recipe matters."""
