"""Programs the tests run in other processes (`python -m tests.jobs.<name>`): training killed
mid-epoch, DDP ranks, the README's blocks in one interpreter."""
