"""Finding and launching Chromium, and finding its processes (for recovery and shutdown)."""

from __future__ import annotations

import contextlib
import os
import signal
import uuid
from pathlib import Path

from rmsweb.errors import UserError

# Without the networking flags Chromium keeps calling home, which floods a closed
# network with failing requests; GPU and sandbox are unavailable in containers.
# Site isolation trials off: cross-site iframes then stay in the page's renderer, so the
# navigation guard's request interception (guard.py) sees their requests too; with
# isolation on they run as separate targets whose requests bypass it (measured).
LAUNCH_FLAGS = (
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-site-isolation-trials",
)
SYSTEM_CHROMIUM = ("/usr/bin/chromium", "/usr/bin/chromium-browser")
INSTALL_HINT = (
    "no Chromium found. Install one: `sudo apt-get install -y chromium` (Debian/Ubuntu) or "
    "`playwright install chromium`; or point RMSWEB_CHROMIUM at a Chromium binary."
)


def find_chromium(playwright_path: str | None = None) -> str:
    """The browser to launch: $RMSWEB_CHROMIUM, Playwright's own build, else the system's.

    `playwright_path` is `playwright.chromium.executable_path` (where Playwright's own
    build would be); it is passed in so this module never imports Playwright.
    """
    override = os.environ.get("RMSWEB_CHROMIUM")
    if override:
        if not os.access(override, os.X_OK):
            raise UserError(f"RMSWEB_CHROMIUM={override} is not an executable file.")
        return override
    if playwright_path and os.access(playwright_path, os.X_OK):
        return playwright_path
    for path in SYSTEM_CHROMIUM:
        if os.access(path, os.X_OK):
            return path
    raise UserError(INSTALL_HINT)


def new_marker() -> str:
    """A do-nothing switch that tags one browser's main process in `ps` output."""
    return f"--rmsweb-pool={uuid.uuid4().hex[:12]}"


def _cmdline(pid: int) -> list[str]:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return []
    return raw.decode(errors="replace").split("\0")


def _stat(pid: int) -> tuple[str, int] | None:
    """(state, process group) of a live process, or None."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text[text.rfind(")") + 2 :].split()
    return fields[0], int(fields[2])


def process_state(pid: int) -> str | None:
    """The state letter of a process (R, S, Z, ...), None when it does not exist."""
    st = _stat(pid)
    return st[0] if st else None


def _pids() -> list[int]:
    return [int(p) for p in os.listdir("/proc") if p.isdigit()]


def find_main_pid(marker: str) -> int | None:
    """The pid of the browser launched with `marker` (None once it is gone)."""
    for pid in _pids():
        if marker in _cmdline(pid):
            st = _stat(pid)
            if st and st[0] != "Z":
                return pid
    return None


def group_pids(pgid: int) -> list[int]:
    """Live (non-zombie) processes of a process group. Chromium's children share the
    main process's group, so this is "everything this browser started"."""
    out = []
    for pid in _pids():
        st = _stat(pid)
        if st and st[1] == pgid and st[0] != "Z":
            out.append(pid)
    return out


def chromium_pids() -> list[int]:
    """Every live Chromium-looking process on the machine (for tests and diagnostics)."""
    out = []
    for pid in _pids():
        cmd = _cmdline(pid)
        st = _stat(pid)
        if cmd and st and st[0] != "Z" and ("chrom" in os.path.basename(cmd[0]).lower()):
            out.append(pid)
    return out


def kill_group(pgid: int) -> None:
    """SIGKILL a browser's whole process group (last resort at shutdown or recovery)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)
