"""Tests of packer.imaging: headers, decoding, orientation, geometry and masks."""
