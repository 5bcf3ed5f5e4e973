"""``reflect-jobs install``: wire the hook into a harness and the consumer into a service manager.

Two jobs, both about editing files that belong to someone else:

* **Hook settings.** ``~/.claude/settings.json`` and friends hold the user's other settings and
  other tools' hooks. A merge that reorders keys, reflows the file or drops an entry it did not
  understand is a bug report waiting to happen, and a second ``install`` that appends a second
  copy of our hook doubles every capture. So the merge is a pure function over the parsed
  document (:func:`merge_hooks`, :func:`remove_hooks`), the file is written only when the
  document actually changed (a re-run is byte-identical and leaves no new backup), a
  ``<file>.bak-<UTC timestamp>`` copy is made before any change, the write is atomic and goes
  through a symlink to its target (dotfile managers symlink these files), and a file we cannot
  parse is reported and never touched. Our entries are recognised by their command containing
  ``reflect-jobs-hook`` — the one thing every version of our snippet has in common.

* **Service units.** The templates in ``ops/`` are the source of truth; rendering fills in the
  real paths and escapes them for the target format (``%`` is a systemd specifier, ``&`` and
  ``<`` break a plist). The rendered text is checked here without external tools
  (:func:`validate_unit`, :func:`validate_plist`) and, when present, by ``systemd-analyze
  verify`` / ``plutil -lint``.

Nothing here is imported by the hook (``reflect_jobs.hook``) — it is CLI-only.
"""

from __future__ import annotations

import contextlib
import copy
import difflib
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
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from xml.sax.saxutils import escape as xml_escape

HOOK_MARKER = "reflect-jobs-hook"
HOOK_TIMEOUT_SEC = 5
#: Keys of a hook entry that may hold its shell command (Claude/Codex: ``command``;
#: Copilot: ``bash``/``powershell``).
COMMAND_KEYS = ("command", "bash", "powershell")
#: The file we own outright in Copilot's user hooks directory; removed when it empties.
COPILOT_FILE = "reflect-jobs.json"


class SettingsFileError(Exception):
    """A settings file cannot be parsed or has an unexpected shape; it was left untouched."""


class InstallError(Exception):
    """Something the user must fix before installing (a missing script or template)."""


# --- harnesses -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Harness:
    """Where a harness keeps its hooks and which shape its entries take.

    ``grouped`` harnesses (Claude Code, Codex) nest commands in matcher groups:
    ``{"Stop": [{"hooks": [{"type": "command", "command": …, "timeout": 5}]}]}``.
    Copilot CLI lists commands directly: ``{"agentStop": [{"type": "command", "bash": …}]}``
    and wants ``"version": 1`` at the top of the file.
    """

    name: str
    events: tuple[str, ...]
    grouped: bool
    label: str

    def entry(self, command: str) -> dict[str, Any]:
        if self.grouped:
            return {"type": "command", "command": command, "timeout": HOOK_TIMEOUT_SEC}
        return {"type": "command", "bash": command, "timeoutSec": HOOK_TIMEOUT_SEC}

    @property
    def command_key(self) -> str:
        return "command" if self.grouped else "bash"

    def skeleton(self) -> dict[str, Any]:
        """The document of a file we create from nothing."""
        return {} if self.grouped else {"version": 1}


HARNESS_SPECS: dict[str, Harness] = {
    "claude": Harness(
        "claude", ("PreCompact", "Stop", "SubagentStop", "SessionEnd"), True, "Claude Code"
    ),
    # Codex has no SessionEnd hook (SPEC-drain §1.1).
    "codex": Harness("codex", ("PreCompact", "Stop", "SubagentStop"), True, "Codex"),
    "copilot": Harness(
        "copilot", ("preCompact", "agentStop", "subagentStop", "sessionEnd"), False, "Copilot CLI"
    ),
}


def _env_dir(environ: Mapping[str, str], var: str, default: str) -> Path:
    raw = (environ.get(var) or "").strip()
    if raw:
        return Path(raw).expanduser()
    home = (environ.get("HOME") or "").strip()
    return (Path(home) if home else Path.home()) / default


def harness_home(harness: str, environ: Mapping[str, str] | None = None) -> Path:
    """The harness's config directory, honouring the variables each harness itself reads."""
    env = os.environ if environ is None else environ
    var, default = {
        "claude": ("CLAUDE_CONFIG_DIR", ".claude"),
        "codex": ("CODEX_HOME", ".codex"),
        "copilot": ("COPILOT_HOME", ".copilot"),
    }[harness]
    return _env_dir(env, var, default)


def default_settings_path(harness: str, environ: Mapping[str, str] | None = None) -> Path:
    """Where ``install hooks`` writes by default.

    Copilot CLI loads every ``*.json`` in its user hooks directory, so we get a file of our own
    there instead of editing a shared one (its ``config.json`` is rewritten by the CLI itself,
    which drops a ``hooks`` key — github/copilot-cli#3403).
    """
    home = harness_home(harness, environ)
    return {
        "claude": home / "settings.json",
        "codex": home / "hooks.json",
        "copilot": home / "hooks" / COPILOT_FILE,
    }[harness]


def harness_present(harness: str, environ: Mapping[str, str] | None = None) -> Path | None:
    """The settings file showing the harness is set up here, or None (doctor skips it)."""
    home = harness_home(harness, environ)
    markers = {
        "claude": [home / "settings.json"],
        "codex": [home / "hooks.json", home / "config.toml"],
        "copilot": [home / "hooks", home / "config.json"],
    }[harness]
    return next((m for m in markers if m.exists()), None)


def hook_script() -> Path:
    """The installed ``reflect-jobs-hook`` next to this interpreter.

    ``sys.executable`` is deliberately not resolved: in a venv it is a symlink to the system
    Python, and the script lives next to the link, not next to its target.
    """
    return Path(os.path.abspath(sys.executable)).parent / HOOK_MARKER


def hook_command(harness: str, script: Path | None = None) -> str:
    """The shell command a harness runs: absolute path (quoted if needed) and the harness."""
    return f"{shlex.quote(str(script or hook_script()))} {harness}"


# --- the pure merge -------------------------------------------------------------------------


def is_ours(entry: Any) -> bool:
    """A hook entry whose command runs our hook script."""
    return isinstance(entry, dict) and any(
        isinstance(entry.get(k), str) and HOOK_MARKER in entry[k] for k in COMMAND_KEYS
    )


def _hooks_table(doc: Any, *, create: bool) -> dict[str, Any] | None:
    if not isinstance(doc, dict):
        raise SettingsFileError(f"top level is a JSON {type(doc).__name__}, expected an object")
    hooks = doc.get("hooks")
    if hooks is None:
        if not create:
            return None
        hooks = doc["hooks"] = {}
    if not isinstance(hooks, dict):
        raise SettingsFileError(f'"hooks" is a JSON {type(hooks).__name__}, expected an object')
    return hooks


def _our_slots(entries: list[Any]) -> list[tuple[int, int | None]]:
    """Positions of our entries in an event list: ``(i, None)`` for a bare entry,
    ``(i, j)`` for the j-th command of the i-th matcher group."""
    slots: list[tuple[int, int | None]] = []
    for i, entry in enumerate(entries):
        if is_ours(entry):
            slots.append((i, None))
        elif isinstance(entry, dict) and isinstance(entry.get("hooks"), list):
            slots.extend((i, j) for j, h in enumerate(entry["hooks"]) if is_ours(h))
    return slots


def _without_ours(entries: list[Any], *, keep_first: bool = False) -> tuple[list[Any], int]:
    """The list without our entries (or all but the first), and how many were dropped.

    A matcher group that held only entries of ours is dropped with them; a group shared with
    another tool keeps that tool's commands.
    """
    keep = keep_first
    removed = 0

    def drop(e: Any) -> bool:
        nonlocal keep, removed
        if not is_ours(e):
            return False
        if keep:
            keep = False
            return False
        removed += 1
        return True

    out: list[Any] = []
    for entry in entries:
        if drop(entry):
            continue
        if isinstance(entry, dict) and isinstance(entry.get("hooks"), list):
            inner = [h for h in entry["hooks"] if not drop(h)]
            if len(inner) != len(entry["hooks"]):
                if not inner:
                    continue
                entry = {**entry, "hooks": inner}
        out.append(entry)
    return out, removed


@dataclass
class HookPlan:
    """What a merge or removal does to a document, per event."""

    doc: Any
    added: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return bool(self.added or self.updated or self.removed)


def merge_hooks(doc: Any, harness: str, command: str) -> HookPlan:
    """Ensure exactly one entry of ours per event, running ``command``.

    Returns a new document; ``doc`` is not modified. An existing entry of ours with another
    command (an older venv path) is updated in place, so the position the user gave it is
    kept; extra copies of ours in the same event are removed. Everything else — other keys,
    other tools' hooks, their order — is carried over as is.
    """
    spec = HARNESS_SPECS[harness]
    new = copy.deepcopy(doc)
    hooks = _hooks_table(new, create=True)
    assert hooks is not None
    plan = HookPlan(new)
    for event in spec.events:
        entries = hooks.get(event)
        if entries is None:
            entries = hooks[event] = []
        if not isinstance(entries, list):
            raise SettingsFileError(
                f'"hooks.{event}" is a JSON {type(entries).__name__}, expected a list'
            )
        slots = _our_slots(entries)
        if not slots:
            entries.append(
                {"hooks": [spec.entry(command)]} if spec.grouped else spec.entry(command)
            )
            plan.added.append(event)
            continue
        i, j = slots[0]
        first = entries[i] if j is None else entries[i]["hooks"][j]
        key = spec.command_key
        if HOOK_MARKER not in str(first.get(key, "")):
            key = next(k for k in COMMAND_KEYS if HOOK_MARKER in str(first.get(k, "")))
        changed = first[key] != command
        first[key] = command
        if len(slots) > 1:  # copies of ours (two installs by hand): keep the first only
            hooks[event], _ = _without_ours(entries, keep_first=True)
            changed = True
        (plan.updated if changed else plan.unchanged).append(event)
    return plan


def remove_hooks(doc: Any) -> HookPlan:
    """Remove every entry of ours (any event), and the lists/tables only our removal emptied."""
    new = copy.deepcopy(doc)
    plan = HookPlan(new)
    hooks = _hooks_table(new, create=False)
    if not hooks:
        return plan
    for event in list(hooks):
        entries = hooks[event]
        if not isinstance(entries, list):
            continue
        kept, removed = _without_ours(entries)
        if not removed:
            continue
        plan.removed.append(event)
        if kept:
            hooks[event] = kept
        else:
            del hooks[event]
    if plan.removed and not hooks:
        del new["hooks"]
    return plan


def installed_events(doc: Any) -> dict[str, list[str]]:
    """Our commands per event (for doctor): ``{"Stop": ["/v/bin/reflect-jobs-hook claude"]}``."""
    out: dict[str, list[str]] = {}
    hooks = doc.get("hooks") if isinstance(doc, dict) else None
    if not isinstance(hooks, dict):
        return out
    for event, entries in hooks.items():
        if not isinstance(entries, list):
            continue
        for i, j in _our_slots(entries):
            e = entries[i] if j is None else entries[i]["hooks"][j]
            cmd = next(
                e[k] for k in COMMAND_KEYS if isinstance(e.get(k), str) and HOOK_MARKER in e[k]
            )
            out.setdefault(event, []).append(cmd)
    return out


# --- JSON text in, JSON text out -------------------------------------------------------------


def parse_json(text: str, path: Path | str) -> Any:
    """Parse a settings file; an empty file counts as ``{}``."""
    if not text.strip():
        return {}
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise SettingsFileError(
            f"{path}: not valid JSON (line {exc.lineno} column {exc.colno}: {exc.msg}); left untouched"
        ) from None


def guess_indent(text: str) -> int | str | None:
    """The indent unit of a JSON file: the whitespace before its first indented line.

    ``None`` means the file is one line (compact JSON stays compact); a file we create, or
    one with no indented line, gets 2 spaces — what Claude Code itself writes.
    """
    body = text.strip()
    if body and "\n" not in body:
        return None
    for line in body.splitlines()[1:]:
        stripped = line.lstrip(" \t")
        if stripped and len(stripped) < len(line):
            ws = line[: len(line) - len(stripped)]
            return "\t" if ws.startswith("\t") else len(ws)
    return 2


def dump_like(doc: Any, original: str) -> str:
    """Serialise ``doc`` in the style of ``original`` (indent, separators, final newline)."""
    indent = guess_indent(original)
    if indent is None:
        compact = '": ' not in original and '", ' not in original
        seps = (",", ":") if compact else (", ", ": ")
        text = json.dumps(doc, ensure_ascii=False, separators=seps)
    else:
        text = json.dumps(doc, ensure_ascii=False, indent=indent)
    newline = original.endswith("\n") or not original.strip()
    return text + ("\n" if newline else "")


# --- files ---------------------------------------------------------------------------------


def backup_path(path: Path, now: datetime | None = None) -> Path:
    """``<file>.bak-<UTC timestamp>``, with a counter if one already exists for this second."""
    stamp = (now or datetime.now(UTC)).strftime("%Y%m%dT%H%M%SZ")
    candidate = path.with_name(f"{path.name}.bak-{stamp}")
    n = 1
    while candidate.exists():
        candidate = path.with_name(f"{path.name}.bak-{stamp}-{n}")
        n += 1
    return candidate


def atomic_write(path: Path, text: str, mode: int | None = None) -> None:
    """Write via a temp file in the same directory, fsync, rename (never a half file)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        if mode is not None:
            os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    with contextlib.suppress(OSError):
        dfd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)


@dataclass
class FileChange:
    """The outcome of applying a plan to a file."""

    path: Path
    plan: HookPlan
    created: bool = False
    deleted: bool = False
    backup: Path | None = None
    diff: str = ""

    @property
    def changed(self) -> bool:
        return self.plan.changed


def apply_hooks(
    path: Path,
    harness: str,
    *,
    command: str | None = None,
    uninstall: bool = False,
    dry_run: bool = False,
    now: datetime | None = None,
) -> FileChange:
    """Install (or with ``uninstall`` remove) our hook entries in one settings file.

    Raises :class:`SettingsFileError` when the file cannot be parsed or read; nothing is
    written in that case. With ``dry_run`` nothing is written either; ``diff`` shows the edit.
    """
    # Write through a symlink to its target, so a dotfiles-managed link stays a link.
    target = Path(os.path.realpath(path)) if path.is_symlink() else path
    exists = target.exists()
    try:
        original = target.read_text(encoding="utf-8") if exists else ""
    except (OSError, UnicodeDecodeError) as exc:
        raise SettingsFileError(f"{path}: cannot read ({exc}); left untouched") from None
    spec = HARNESS_SPECS[harness]
    doc = parse_json(original, path) if exists else spec.skeleton()
    try:
        if uninstall:
            plan = remove_hooks(doc)
        else:
            plan = merge_hooks(doc, harness, command or hook_command(harness))
    except SettingsFileError as exc:
        raise SettingsFileError(f"{path}: {exc}; left untouched") from None
    change = FileChange(path, plan, created=not exists and plan.changed)
    if not plan.changed:
        return change
    # A file of our own that holds nothing but its skeleton is removed, not left empty.
    delete = uninstall and target.name == COPILOT_FILE and plan.doc == spec.skeleton()
    change.deleted = delete
    new_text = "" if delete else dump_like(plan.doc, original)
    change.diff = "".join(
        difflib.unified_diff(
            original.splitlines(keepends=True),
            new_text.splitlines(keepends=True),
            fromfile=str(path) if exists else "/dev/null",
            tofile="/dev/null" if delete else str(path),
        )
    )
    if dry_run:
        return change
    if exists:
        change.backup = backup_path(target, now)
        shutil.copy2(target, change.backup)
    if delete:
        target.unlink()
    else:
        mode = target.stat().st_mode & 0o7777 if exists else None
        atomic_write(target, new_text, mode)
    return change


def read_installed(path: Path) -> dict[str, list[str]]:
    """Our commands per event in one settings file (empty when absent or unparseable)."""
    try:
        return installed_events(json.loads(path.read_text(encoding="utf-8") or "{}"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return {}


def harness_hook_files(harness: str, environ: Mapping[str, str] | None = None) -> list[Path]:
    """Every file the harness loads user-level hooks from (Copilot: all ``hooks/*.json``)."""
    if harness == "copilot":
        d = harness_home(harness, environ) / "hooks"
        return sorted(d.glob("*.json")) if d.is_dir() else []
    p = default_settings_path(harness, environ)
    return [p] if p.exists() else []


# --- service units --------------------------------------------------------------------------

SERVICE_FILES = {
    "systemd": ("systemd", "reflect-jobs.service"),
    "launchd": ("launchd", "com.reflect-jobs.worker.plist"),
}
LAUNCHD_LABEL = "com.reflect-jobs.worker"
PLACEHOLDER = re.compile(r"@[A-Z_]+@")


def default_manager() -> str:
    return "launchd" if sys.platform == "darwin" else "systemd"


def templates_dir() -> Path:
    """``ops/`` of the checkout this package runs from (``make install`` is editable)."""
    return Path(__file__).resolve().parents[1] / "ops"


def template_text(manager: str) -> str:
    sub, name = SERVICE_FILES[manager]
    path = templates_dir() / sub / name
    try:
        return path.read_text(encoding="utf-8")
    except OSError:
        raise InstallError(
            f"service template {path} not found: install reflect-jobs from its checkout (make install)"
        ) from None


def default_service_path(manager: str) -> Path:
    if manager == "launchd":
        return Path.home() / "Library" / "LaunchAgents" / SERVICE_FILES["launchd"][1]
    xdg = os.environ.get("XDG_CONFIG_HOME", "").strip()
    base = Path(xdg).expanduser() if xdg else Path.home() / ".config"
    return base / "systemd" / "user" / SERVICE_FILES["systemd"][1]


def venv_dir() -> Path:
    """The environment whose ``bin/`` holds ``reflect-jobs`` (not resolved: see hook_script)."""
    return Path(os.path.abspath(sys.executable)).parent.parent


def service_values(
    *, home: Path, kb_path: Path, timeout_sec: int, path_env: str | None = None
) -> dict[str, str]:
    """What the placeholders stand for.

    PATH is the installing shell's: a service manager's PATH is minimal
    (``/usr/bin:/bin`` under launchd) and would hide ``claude`` and the ``node`` it runs on,
    silently turning ``REFLECT_WRITER_BACKEND=auto`` into the heuristic writer. The stop
    timeout leaves a running model call its own timeout plus 30 s to finish (``-g TERM``).
    """
    venv = venv_dir()
    parts = [str(venv / "bin")] + [
        p
        for p in (path_env if path_env is not None else os.environ.get("PATH", "")).split(":")
        if p
    ]
    seen: set[str] = set()
    path = ":".join(p for p in parts if not (p in seen or seen.add(p)))
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
    """Fill ``@NAME@`` placeholders, escaped for the target format; unknown ones stay (and
    fail validation)."""
    esc = _systemd_value if manager == "systemd" else xml_escape

    def sub(m: re.Match[str]) -> str:
        name = m.group(0)[1:-1]
        return esc(values[name]) if name in values else m.group(0)

    # Template lines marked "By hand:" tell a person what to replace; a rendered file has
    # nothing left to replace, so they are dropped rather than filled in.
    kept = [line for line in template.splitlines(keepends=True) if "By hand:" not in line]
    return PLACEHOLDER.sub(sub, "".join(kept))


def parse_unit(text: str) -> dict[str, list[tuple[str, str]]]:
    """A systemd unit as ``{section: [(key, value), ...]}`` (keys repeat, e.g. Environment)."""
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
    """Problems with a rendered unit (empty list: fine)."""
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
    """Problems with a rendered launchd plist (empty list: fine)."""
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


def external_check(manager: str, text: str, name: str) -> tuple[str, bool, str] | None:
    """``systemd-analyze verify`` / ``plutil -lint`` on the rendered text, when installed.

    Returns ``(tool, ok, output)`` or None when the tool is absent. ``--user`` needs a user
    manager (absent in containers and CI); then the system-mode check still verifies syntax
    and that ExecStart is executable.
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


def enable_commands(manager: str, path: Path) -> list[str]:
    """The exact commands that start the service now and at every login."""
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
