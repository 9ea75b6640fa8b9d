"""Tests of packer.augment: one seeded draw, executors that agree, boxes and masks moved alike."""
