"""The command line: `pack SRC ...` (`pack_command`) and `packer pack|info|verify|bench|preview`
(`main`), the console scripts setup.cfg installs.

- `commands`: the commands and their error handling
- `params`: parameter types (sizes, byte counts, paths and URLs) and declared options
- `report`, `report_objects`: the dry-run plan, the end-of-pack summary, `packer info`
- `verify`, `bench`, `preview` (with `preview_objects`): the commands that read a pack
"""

from __future__ import annotations

from .commands import main, pack_command

__all__ = ["main", "pack_command"]
