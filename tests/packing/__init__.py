"""Tests of packer.packing: plans, workers, resume and update, statistics, golden bytes."""
