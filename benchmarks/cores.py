"""Cores a command keeps busy: machine-wide CPU time over its wall time, beside rusage's figure.

    python benchmarks/cores.py -- make run

`/usr/bin/time -v` counts only the CPU of processes whose parents waited for them.
Chromium's renderers and helper processes are not reaped that way when Playwright
closes the browser, so rusage misses them: on the default job's evals it reported 0.98
cores while the machine ran at 1.64. This script reads /proc/stat before and after
(every process on the machine, so run it on an otherwise idle machine) and prints both,
and their ratio, on its last line:

    machine_cores=X rusage_cores=Y wall_s=Z ratio=X/Y

Linux only (/proc/stat). The exit code is the command's.
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import time


def busy_seconds() -> float:
    """CPU seconds every core spent busy since boot (all but idle and iowait)."""
    with open("/proc/stat") as fh:
        fields = [int(x) for x in fh.readline().split()[1:]]
    idle = fields[3] + fields[4]
    return (sum(fields) - idle) / os.sysconf("SC_CLK_TCK")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("command", nargs=argparse.REMAINDER, help="the command, after --")
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("give the command to measure after --")
    busy0, t0 = busy_seconds(), time.perf_counter()
    code = subprocess.call(command)
    busy1, wall = busy_seconds(), time.perf_counter() - t0
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    machine = (busy1 - busy0) / wall
    rusage = (usage.ru_utime + usage.ru_stime) / wall
    print(
        f"machine_cores={machine:.2f} rusage_cores={rusage:.2f} wall_s={wall:.0f} "
        f"ratio={machine / rusage if rusage else float('nan'):.2f}",
        file=sys.stderr,
    )
    return code


if __name__ == "__main__":
    sys.exit(main())
