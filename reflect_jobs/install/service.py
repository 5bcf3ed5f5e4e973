"""``reflect-jobs install service``: the consumer as a systemd user unit or a LaunchAgent.

The templates in ``ops/`` are the source of truth; rendering fills in the real paths and
escapes them for the target format (``%`` is a systemd specifier, ``&`` and ``<`` break a
plist). The rendered text is checked here without external tools (:func:`validate_unit`,
:func:`validate_plist`) and, when present, by ``systemd-analyze verify`` / ``plutil -lint``
(:func:`external_check`), because a unit that fails to load only says so in a journal
nobody reads. :func:`write_unit` is the one place the unit reaches the disk: unchanged text
is not rewritten, a changed one is backed up first.
"""

from __future__ import annotations

import json
import os
import plistlib
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from xml.sax.saxutils import escape as xml_escape

from ..fsio import atomic_write
from .jsonfile import backup_path

SERVICE_FILES = {
    "systemd": ("systemd", "reflect-jobs.service"),
    "launchd": ("launchd", "com.reflect-jobs.worker.plist"),
}
LAUNCHD_LABEL = "com.reflect-jobs.worker"
PLACEHOLDER = re.compile(r"@[A-Z_]+@")
#: A unit file is configuration the service manager reads: world-readable, whatever it was.
UNIT_MODE = 0o644
#: Variables the rendered unit sets itself; other ``REFLECT_*`` in the shell are not carried.
CARRIED_ENV = frozenset({"REFLECT_HOME", "GLOBAL_LEARNINGS_PATH"})


class InstallError(Exception):
    """Something the user must fix before installing (a missing script or template)."""


def default_manager() -> str:
    """The service manager of this platform.

    Returns:
        ``"launchd"`` on macOS, else ``"systemd"``.
    """
    return "launchd" if sys.platform == "darwin" else "systemd"


def templates_dir() -> Path:
    """The repository's ``ops/``, shipped inside the package as ``reflect_jobs._ops``.

    A wheel install (pip, pipx, uv tool) reads the copy in site-packages, an editable install
    the checkout's folder (see :mod:`reflect_jobs.resources`).

    Returns:
        The directory holding ``systemd/`` and ``launchd/`` templates.
    """
    from reflect_jobs.resources import shipped_dir

    return shipped_dir("reflect_jobs._ops", "ops", "systemd")


def template_text(manager: str) -> str:
    """The unit template of a service manager.

    Args:
        manager: ``"systemd"`` or ``"launchd"``.

    Returns:
        The template's text, with ``@NAME@`` placeholders.

    Raises:
        InstallError: The template is missing (not installed from a checkout).
    """
    sub, name = SERVICE_FILES[manager]
    path = templates_dir() / sub / name
    try:
        return path.read_text(encoding="utf-8")
    except OSError:
        raise InstallError(
            f"service template {path} not found: reinstall reflect-jobs (the package carries ops/)"
        ) from None


def default_service_path(manager: str) -> Path:
    """Where the manager looks for a user's unit.

    Args:
        manager: ``"systemd"`` or ``"launchd"``.

    Returns:
        ``~/Library/LaunchAgents/…plist`` or ``$XDG_CONFIG_HOME/systemd/user/…service``.
    """
    if manager == "launchd":
        return Path.home() / "Library" / "LaunchAgents" / SERVICE_FILES["launchd"][1]
    xdg = os.environ.get("XDG_CONFIG_HOME", "").strip()
    base = Path(xdg).expanduser() if xdg else Path.home() / ".config"
    return base / "systemd" / "user" / SERVICE_FILES["systemd"][1]


def venv_dir() -> Path:
    """The environment whose ``bin/`` holds ``reflect-jobs``.

    Not resolved, like :func:`reflect_jobs.install.hook_paths.hook_script`: a venv's python is a
    symlink to the system one.

    Returns:
        The venv's root directory.
    """
    return Path(os.path.abspath(sys.executable)).parent.parent


def service_values(
    *, home: Path, kb_path: Path, timeout_sec: int, path_env: str | None = None
) -> dict[str, str]:
    """What the placeholders stand for.

    PATH is the installing shell's: a service manager's PATH is minimal
    (``/usr/bin:/bin`` under launchd) and would hide ``claude`` and the ``node`` it runs on,
    silently turning ``REFLECT_WRITER_BACKEND=auto`` into the heuristic writer. The stop
    timeout leaves a running model call its own timeout plus 30 s to finish (``-g TERM``).

    Args:
        home: ``REFLECT_HOME``.
        kb_path: The knowledge base (``GLOBAL_LEARNINGS_PATH``).
        timeout_sec: The model call timeout.
        path_env: The PATH to carry (default this process's).

    Returns:
        Placeholder name → value (unescaped).
    """
    venv = venv_dir()
    parts = [str(venv / "bin")] + [
        p
        for p in (path_env if path_env is not None else os.environ.get("PATH", "")).split(":")
        if p
    ]
    path = ":".join(dict.fromkeys(parts))  # each directory once, first place kept
    return {
        "VENV": str(venv),
        "REFLECT_HOME": str(home),
        "KB_PATH": str(kb_path),
        "PATH": path,
        "STOP_TIMEOUT": str(max(30, timeout_sec) + 30),
    }


def _systemd_value(v: str) -> str:
    # '%' starts a specifier; '\' and '"' are special inside the quoted assignments we use.
    return v.replace("%", "%%").replace("\\", "\\\\").replace('"', '\\"')


def render_service(manager: str, template: str, values: Mapping[str, str]) -> str:
    """Fill ``@NAME@`` placeholders, escaped for the target format.

    Unknown placeholders stay (and fail validation). Template lines marked ``By hand:`` tell
    a person what to replace; a rendered file has nothing left to replace, so they are
    dropped rather than filled in.

    Args:
        manager: ``"systemd"`` or ``"launchd"`` (picks the escaping).
        template: The template text.
        values: See :func:`service_values`.

    Returns:
        The rendered unit.
    """
    esc = _systemd_value if manager == "systemd" else xml_escape

    def sub(m: re.Match[str]) -> str:
        name = m.group(0)[1:-1]
        return esc(values[name]) if name in values else m.group(0)

    kept = [line for line in template.splitlines(keepends=True) if "By hand:" not in line]
    return PLACEHOLDER.sub(sub, "".join(kept))


def parse_unit(text: str) -> dict[str, list[tuple[str, str]]]:
    """A systemd unit as ``{section: [(key, value), ...]}`` (keys repeat, e.g. Environment).

    Args:
        text: The unit file's text.

    Returns:
        Sections in file order, each with its assignments in order.

    Raises:
        ValueError: A line is neither a section header, a comment nor ``key=value``.
    """
    sections: dict[str, list[tuple[str, str]]] = {}
    current: str | None = None
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("[") and line.endswith("]"):
            current = line[1:-1]
            sections.setdefault(current, [])
            continue
        if current is None or "=" not in line:
            raise ValueError(f"line {n}: {raw!r} is neither a section nor key=value")
        key, value = line.split("=", 1)
        sections[current].append((key.strip(), value.strip()))
    return sections


def validate_unit(text: str) -> list[str]:
    """Problems with a rendered systemd unit.

    Args:
        text: The rendered unit.

    Returns:
        One line per problem; empty when fine.
    """
    try:
        sections = parse_unit(text)
    except ValueError as exc:
        return [str(exc)]
    problems = [f"missing [{s}]" for s in ("Unit", "Service", "Install") if s not in sections]
    service = dict(sections.get("Service", []))
    exec_start = service.get("ExecStart", "")
    if not exec_start:
        problems.append("[Service] has no ExecStart")
    elif not exec_start.startswith("/"):
        problems.append(f"ExecStart is not an absolute path: {exec_start}")
    if PLACEHOLDER.search("\n".join(v for kv in sections.values() for _, v in kv)):
        problems.append("unfilled @PLACEHOLDER@ left")
    return problems


def validate_plist(text: str) -> list[str]:
    """Problems with a rendered launchd plist.

    Args:
        text: The rendered plist.

    Returns:
        One line per problem; empty when fine.
    """
    try:
        data = plistlib.loads(text.encode("utf-8"))
    except Exception as exc:  # noqa: BLE001 - plistlib raises several types
        return [f"not a valid plist: {exc}"]
    problems = []
    if data.get("Label") != LAUNCHD_LABEL:
        problems.append(f"Label is {data.get('Label')!r}, expected {LAUNCHD_LABEL!r}")
    args = data.get("ProgramArguments")
    if not (isinstance(args, list) and args and all(isinstance(a, str) for a in args)):
        problems.append("ProgramArguments is not a list of strings")
    elif not args[0].startswith("/"):
        problems.append(f"ProgramArguments[0] is not an absolute path: {args[0]}")
    if PLACEHOLDER.search(json.dumps(data, default=str)):
        problems.append("unfilled @PLACEHOLDER@ left")
    return problems


def validate(manager: str, text: str) -> list[str]:
    """:func:`validate_unit` or :func:`validate_plist`, by manager.

    Args:
        manager: ``"systemd"`` or ``"launchd"``.
        text: The rendered unit.

    Returns:
        One line per problem; empty when fine.
    """
    return (validate_unit if manager == "systemd" else validate_plist)(text)


def external_check(manager: str, text: str, name: str) -> tuple[str, bool, str] | None:
    """``systemd-analyze verify`` / ``plutil -lint`` on the rendered text, when installed.

    ``--user`` needs a user manager (absent in containers and CI); then the system-mode check
    still verifies syntax and that ExecStart is executable.

    Args:
        manager: ``"systemd"`` or ``"launchd"``.
        text: The rendered unit.
        name: The unit's file name (systemd checks it; it replaces the temp path in output).

    Returns:
        ``(tool, ok, output)``, or ``None`` when the tool is absent.
    """
    tool = shutil.which("systemd-analyze" if manager == "systemd" else "plutil")
    if tool is None:
        return None
    with tempfile.TemporaryDirectory() as tmp:
        f = Path(tmp) / name
        f.write_text(text, encoding="utf-8")
        if manager == "launchd":
            argvs = [[tool, "-lint", str(f)]]
        else:
            argvs = [[tool, "--user", "verify", str(f)], [tool, "verify", str(f)]]
        for argv in argvs:
            try:
                proc = subprocess.run(argv, capture_output=True, text=True, timeout=30)
            except (OSError, subprocess.TimeoutExpired) as exc:
                return (Path(tool).name, False, str(exc))
            out = (proc.stdout + proc.stderr).replace(str(f), name).strip()
            manager_down = "Failed to initialize manager" in out or "RuntimeDirectory" in out
            if manager == "systemd" and argv[1] == "--user" and manager_down:
                continue
            return (" ".join([Path(tool).name, *argv[1:-1]]), proc.returncode == 0, out)
    return None


@dataclass(frozen=True)
class UnitWrite:
    """What :func:`write_unit` did: ``changed`` False means the file already held the text."""

    path: Path
    changed: bool
    backup: Path | None = None


def write_unit(path: Path, text: str, *, home: Path, now: datetime | None = None) -> UnitWrite:
    """Put the rendered unit on disk: unchanged text is left alone, a change is backed up.

    ``home`` is created first because launchd opens ``StandardOutPath`` in ``REFLECT_HOME``
    before the worker could create it. The unit is written atomically with mode 0644
    (:data:`UNIT_MODE`), in a directory made as needed (``~/.config/systemd/user`` often
    does not exist yet).

    Args:
        path: Where the unit goes.
        text: The rendered, validated unit.
        home: ``REFLECT_HOME``.
        now: The backup's timestamp (tests pin it).

    Returns:
        Whether the file changed and the backup made of the old one.

    Raises:
        OSError: A directory, the backup or the write could not be made.
    """
    home.mkdir(parents=True, exist_ok=True)
    old = path.read_text(encoding="utf-8") if path.exists() else None
    if old == text:
        return UnitWrite(path, changed=False)
    backup = None
    if old is not None:
        backup = backup_path(path, now)
        shutil.copy2(path, backup)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, text, mode=UNIT_MODE)
    return UnitWrite(path, changed=True, backup=backup)


def uncarried_env(environ: Mapping[str, str] | None = None) -> list[str]:
    """``REFLECT_*`` variables set here that the rendered unit does not set.

    The service does not inherit the installing shell's environment, so a setting made only
    there would silently not apply to the worker.

    Args:
        environ: The environment to read (default ``os.environ``).

    Returns:
        Their names, sorted.
    """
    env = os.environ if environ is None else environ
    return sorted(k for k in env if k.startswith("REFLECT_") and k not in CARRIED_ENV)


def enable_commands(manager: str, path: Path) -> list[str]:
    """The exact commands that start the service now and at every login.

    Args:
        manager: ``"systemd"`` or ``"launchd"``.
        path: Where the unit was written (a non-default systemd path needs ``link``).

    Returns:
        Shell commands, in order.
    """
    if manager == "launchd":
        uid = os.getuid()
        return [
            f"launchctl bootstrap gui/{uid} {shlex.quote(str(path))}",
            f"launchctl enable gui/{uid}/{LAUNCHD_LABEL}",
            f"launchctl kickstart -k gui/{uid}/{LAUNCHD_LABEL}   # restart after an upgrade",
        ]
    unit = path.name
    cmds = []
    if path.parent != default_service_path("systemd").parent:
        cmds.append(f"systemctl --user link {shlex.quote(str(path))}")
    cmds += [
        "systemctl --user daemon-reload",
        f"systemctl --user enable --now {unit}",
        f"loginctl enable-linger {os.environ.get('USER', '$USER')}   # keep it running when logged out",
    ]
    return cmds
