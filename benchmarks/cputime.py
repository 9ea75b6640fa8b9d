"""CPU time of a benchmark and every process it started, for CPU-per-item columns.

Standard library only, so that scripts running in the peers' environment can import it too.
"""

from __future__ import annotations

import os
import resource
import time
from pathlib import Path


def cpu_seconds() -> float:
    """CPU time of this process (threads included), its finished children and its live ones."""
    done = resource.getrusage(resource.RUSAGE_CHILDREN)
    live = 0
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == os.getpid():  # ppid; utime and stime follow at 11, 12
                live += int(fields[11]) + int(fields[12])
    return time.process_time() + done.ru_utime + done.ru_stime + live / os.sysconf("SC_CLK_TCK")
