"""Who holds a claim: a process's identity, and whether a recorded owner is still alive.

A claim records its owner as ``(host, pid, start)`` (ARCHITECTURE §3.2). On the owner's own
machine that is enough to *prove* the owner gone — no such pid, a zombie, or a pid now used
by a process that started at another time — so recovery takes the job back at once instead
of after its lease. A pid alone would not do: pids are reused, and a job must never be
mistaken for one held by an unrelated process that happens to have its owner's pid.

The start token is read without the wall clock, so a clock moved backwards (or forwards)
never makes a live owner look like another process:

* Linux: ``linux:<boot id>:<pid namespace>:<start ticks>`` — the boot id
  (``/proc/sys/kernel/random/boot_id``), the pid namespace (``/proc/self/ns/pid``) and the
  process's start time in clock ticks since boot (field 22 of ``/proc/<pid>/stat``). Two
  tokens are comparable only with the same boot id and namespace (a container sharing the
  host name but not its pids, or a machine that rebooted, can prove nothing here).
* Elsewhere: ``ps:<lstart>`` from ``ps -o lstart= -p PID`` (the start time the kernel
  recorded at fork, to the second), read once for this process and once per owner checked.

Anything else — another host, an unknown token — is "cannot tell", and the lease rule
decides (:func:`alive` returns ``None``).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
from dataclasses import dataclass

_LINUX = sys.platform.startswith("linux")
_cache: dict[int, Owner] = {}
_cache_lock = threading.Lock()


@dataclass(frozen=True)
class Owner:
    """One process that may hold claims.

    Attributes:
        host: Its host name (``socket.gethostname()``).
        pid: Its process id.
        start: Its start token (see the module docstring); ``""`` when it could not be read.
    """

    host: str
    pid: int
    start: str

    def __str__(self) -> str:
        """``host:pid``, as people read it in events."""
        return f"{self.host}:{self.pid}"


def _read(path: str) -> str:
    try:
        with open(path, encoding="ascii", errors="replace") as fh:
            return fh.read().strip()
    except OSError:
        return ""


def _machine() -> str:
    """What must match for two Linux start tokens to be comparable: boot and pid namespace."""
    boot = _read("/proc/sys/kernel/random/boot_id")
    try:
        pidns = os.readlink("/proc/self/ns/pid")
    except OSError:
        pidns = ""
    return f"linux:{boot}:{pidns}" if boot else ""


def _linux_stat(pid: int) -> tuple[str, str] | None:
    """``(state, start ticks)`` of ``pid`` from ``/proc``, or None when there is no such pid."""
    raw = _read(f"/proc/{pid}/stat")
    if not raw or ")" not in raw:
        return None
    fields = raw.rsplit(")", 1)[1].split()  # the name may hold spaces and parentheses
    if len(fields) < 20:
        return None
    return fields[0], fields[19]  # field 3 (state) and field 22 (starttime)


def _ps_start(pid: int) -> str | None:
    """``ps -o lstart=`` of ``pid``; None for no such process (or a zombie), "" when ps
    cannot tell."""
    try:
        proc = subprocess.run(
            ["ps", "-o", "stat=", "-o", "lstart=", "-p", str(pid)],
            capture_output=True,
            text=True,
            timeout=10,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.TimeoutExpired):
        return ""
    words = proc.stdout.split()
    if not words:
        return None if proc.returncode != 0 else ""
    if words[0].startswith("Z"):
        return None
    return "ps:" + " ".join(words[1:]) if len(words) > 1 else ""


def start_token(pid: int, *, portable: bool = False) -> str | None:
    """The start token of process ``pid`` as seen from this machine.

    Args:
        pid: A process id.
        portable: Use the ``ps`` reading even on Linux (tests of the fallback).

    Returns:
        The token; ``None`` when no such process runs here (a zombie counts as gone: it
        has exited, only its status is left); ``""`` when it cannot be read.
    """
    if _LINUX and not portable:
        stat = _linux_stat(pid)
        if stat is None or stat[0] in ("Z", "X"):
            return None
        machine = _machine()
        return f"{machine}:{stat[1]}" if machine else ""
    return _ps_start(pid)


def me() -> Owner:
    """This process's identity (read once per process; a forked child reads its own).

    Returns:
        The :class:`Owner` a claim made here records.
    """
    pid = os.getpid()
    with _cache_lock:
        found = _cache.get(pid)
        if found is None:
            found = Owner(socket.gethostname(), pid, start_token(pid) or "")
            _cache.clear()
            _cache[pid] = found
        return found


def _prefix(token: str) -> str:
    return token.rsplit(":", 1)[0] if token.startswith("linux:") else token.split(":", 1)[0]


def alive(owner: Owner, *, here: Owner | None = None) -> bool | None:
    """Whether a claim's owner still runs, as far as this machine can prove it.

    Args:
        owner: The claim's recorded owner.
        here: This process's identity (default :func:`me`; tests pass another).

    Returns:
        ``True``: the pid runs and started when the owner did. ``False``: proven gone — no
        such pid, a zombie, or the pid is now another process (reused). ``None``: cannot
        tell — another host, another boot or pid namespace, or a token that was not read —
        and the lease decides.
    """
    here = here or me()
    if owner.host != here.host or not owner.start or not here.start:
        return None
    portable = not owner.start.startswith("linux:")
    if _prefix(owner.start) != _prefix(here.start):
        return None
    now = start_token(owner.pid, portable=portable)
    if now is None:
        return False
    if not now:
        return None
    return now == owner.start
