"""`python -m packer ...` is the `packer` command."""

from .cli import main

main()
