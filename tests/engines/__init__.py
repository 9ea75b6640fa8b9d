"""Tests of packer.engines: the Ray engine gives the local engine's bytes."""
