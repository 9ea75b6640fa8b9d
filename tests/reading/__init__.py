"""Tests of packer.reading: batches, options, orders and resume, worker pipeline, mixtures."""
