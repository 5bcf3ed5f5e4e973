"""Starting and stopping the consumer's unit: ``install service --enable|--uninstall``, ``uninstall``.

``install service`` used to print the commands that enable the unit and stop there, and
``doctor``'s fix for a worker that never ran was ``install service`` again — the missing
step was enabling it. These run the service manager's own commands (``systemctl --user`` /
``launchctl``) and report each one; a manager that is absent or refuses (no user bus in a
container) is one line with the command to run by hand, never a traceback.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from .service import LAUNCHD_LABEL, default_service_path

Runner = Callable[[list[str]], subprocess.CompletedProcess[str]]


def run_command(argv: list[str]) -> subprocess.CompletedProcess[str]:
    """Run a service-manager command (30 s at most), capturing its output.

    Args:
        argv: The command.

    Returns:
        The finished process (a missing tool or a timeout reads as exit 127/124).
    """
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False)
    except FileNotFoundError as exc:
        return subprocess.CompletedProcess(argv, 127, "", str(exc))
    except subprocess.TimeoutExpired:
        return subprocess.CompletedProcess(argv, 124, "", "timed out after 30 s")


@dataclass
class Step:
    """One command run (or skipped) and how it went."""

    argv: list[str]
    ok: bool
    output: str = ""

    def line(self) -> str:
        """What happened, for a person.

        Returns:
            ``ran: <command>`` or ``failed: <command> — <first line of its output>``.
        """
        cmd = " ".join(self.argv)
        if self.ok:
            return f"ran: {cmd}"
        first = self.output.strip().splitlines()[0] if self.output.strip() else ""
        return f"failed: {cmd}" + (f" — {first}" if first else "")


def _tool(name: str) -> str | None:
    return shutil.which(name)


def start_commands(manager: str, path: Path) -> list[list[str]]:
    """The commands that start the unit now and at every login.

    Args:
        manager: ``systemd`` or ``launchd``.
        path: The unit file (a systemd unit outside the user unit directory is linked).

    Returns:
        argv lists, in order.
    """
    if manager == "launchd":
        domain = f"gui/{os.getuid()}"
        return [
            ["launchctl", "bootstrap", domain, str(path)],
            ["launchctl", "enable", f"{domain}/{LAUNCHD_LABEL}"],
        ]
    cmds = []
    if path.parent != default_service_path("systemd").parent:
        cmds.append(["systemctl", "--user", "link", str(path)])
    return [
        *cmds,
        ["systemctl", "--user", "daemon-reload"],
        ["systemctl", "--user", "enable", "--now", path.name],
    ]


def stop_commands(manager: str, path: Path) -> list[list[str]]:
    """The commands that stop the unit and keep it from starting again.

    Args:
        manager: ``systemd`` or ``launchd``.
        path: The unit file.

    Returns:
        argv lists, in order.
    """
    if manager == "launchd":
        return [["launchctl", "bootout", f"gui/{os.getuid()}/{LAUNCHD_LABEL}"]]
    return [["systemctl", "--user", "disable", "--now", path.name]]


def run_steps(cmds: list[list[str]], *, run: Runner = run_command) -> list[Step]:
    """Run commands in order, stopping at the first that fails.

    Args:
        cmds: The commands.
        run: How to run one (tests pass a recorder; the default runs it).

    Returns:
        One :class:`Step` per command run; a missing tool is a failed step.
    """
    steps = []
    for argv in cmds:
        if _tool(argv[0]) is None:
            steps.append(Step(argv, False, f"{argv[0]} not found on PATH"))
            break
        proc = run(argv)
        steps.append(Step(argv, proc.returncode == 0, (proc.stderr or proc.stdout or "")))
        if proc.returncode != 0:
            break
    return steps


def is_loaded(manager: str, path: Path, *, run: Runner = run_command) -> bool:
    """Whether the service manager knows the unit (so stopping it is worth a command).

    Args:
        manager: ``systemd`` or ``launchd``.
        path: The unit file.
        run: How to run a command.

    Returns:
        True when ``systemctl --user is-enabled``/``is-active`` or ``launchctl print``
        says so; False when the tool is absent or says no.
    """
    if manager == "launchd":
        if _tool("launchctl") is None:
            return False
        return run(["launchctl", "print", f"gui/{os.getuid()}/{LAUNCHD_LABEL}"]).returncode == 0
    if _tool("systemctl") is None:
        return False
    for verb in ("is-active", "is-enabled"):
        if run(["systemctl", "--user", verb, path.name]).returncode == 0:
            return True
    return False
