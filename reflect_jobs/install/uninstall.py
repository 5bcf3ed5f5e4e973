"""``reflect-jobs uninstall``: take back everything ``install`` put on the machine.

Hooks, MCP entries, our skills and our ``statusLine`` leave every harness's files (other tools' settings byte-identical; a
file that held only ours is deleted, not left as ``{}``), the service is stopped and
disabled before its unit is removed, and the ``.bak-*`` copies our edits made are pruned to
the newest one. With ``purge`` the data goes too: ``$REFLECT_HOME`` (ledger, queue, raw
model answers, transcript excerpts), the knowledge base, the config file and the remaining
backups — but only directories that look like ours, and never while a worker still holds
the home.

Pure planning (:func:`uninstall` with ``dry_run``) and doing are one function so what
``--yes`` deletes is what the confirmation listed.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from .. import harnesses
from ..userconfig import config_path
from .hook_paths import default_settings_path, harness_hook_files
from .hooks import apply_hooks, read_installed
from .mcp import apply_mcp, mcp_config_path
from .service import SERVICE_FILES, default_service_path
from .service_control import Runner, Step, is_loaded, run_command, run_steps, stop_commands
from .skills import apply_skills
from .statusline import apply_statusline

#: What a directory of ours holds: a home, a KB (anything else is not deleted).
HOME_MARKERS = ("reflect.db", "queue.db", "spool", "drain.log", "hook-errors.log", "slices", "run")
KB_MARKERS = ("documents", "index", "repos")


class PurgeRefused(Exception):
    """A data directory does not look like ours, or a worker still uses the home."""


@dataclass
class Report:
    """What uninstall did (or, with ``dry_run``, would do): one line per action."""

    lines: list[str] = field(default_factory=list)
    steps: list[Step] = field(default_factory=list)
    #: Directories ``purge`` deletes (or would), with what they hold.
    purged: list[Path] = field(default_factory=list)

    @property
    def nothing(self) -> bool:
        """Whether nothing of ours was found."""
        return not self.lines and not self.purged


def backups_of(path: Path) -> list[Path]:
    """Our ``<file>.bak-<stamp>`` copies of ``path``, oldest first (the stamp sorts).

    Args:
        path: The file that was backed up.

    Returns:
        The backups.
    """
    return sorted(path.parent.glob(path.name + ".bak-*")) if path.parent.is_dir() else []


def prune_backups(path: Path, *, keep: int, dry_run: bool) -> list[Path]:
    """Delete all but the newest ``keep`` backups of ``path``.

    Args:
        path: The file whose backups to prune.
        keep: How many of the newest to keep (0 = all go).
        dry_run: Decide, delete nothing.

    Returns:
        The backups deleted.
    """
    found = backups_of(path)
    gone = found[: len(found) - keep] if keep else found
    if not dry_run:
        for b in gone:
            b.unlink(missing_ok=True)
    return gone


def _empty_document(path: Path) -> bool:
    """Whether a settings file we edited is left holding nothing (``{}`` or blank TOML)."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError:
        return False
    if not text.strip():
        return True
    try:
        doc = tomllib.loads(text) if path.suffix == ".toml" else json.loads(text)
    except ValueError:
        return False
    return doc == {}


def _remove_hooks(harness: str, report: Report, keep: int, dry_run: bool, env: Mapping) -> None:
    spec = harnesses.get(harness)
    files = {*harness_hook_files(harness, env), default_settings_path(harness, env)}
    for path in sorted(files):
        if not path.exists() or not read_installed(path):
            prune_backups(path, keep=keep, dry_run=dry_run)
            continue
        change = apply_hooks(path, harness, uninstall=True, dry_run=dry_run)
        gone = change.deleted
        if not dry_run and not gone and path.exists() and _empty_document(path):
            path.unlink()
            gone = True
        report.lines.append(
            f"{spec.label}: hooks removed from {path}"
            + ("; the file held nothing else and was deleted" if gone else "")
        )
        prune_backups(path, keep=keep, dry_run=dry_run)
        home = Path(harnesses.home_of(spec, env))
        if gone and not dry_run and path.parent != home and not any(path.parent.iterdir()):
            path.parent.rmdir()  # Copilot's hooks/ that held only our file


def _remove_mcp(harness: str, report: Report, keep: int, dry_run: bool, env: Mapping) -> None:
    spec = harnesses.get(harness)
    path = mcp_config_path(harness, env)
    if not path.exists():
        prune_backups(path, keep=keep, dry_run=dry_run)
        return
    change = apply_mcp(harness, path=path, uninstall=True, dry_run=dry_run, environ=env)
    if change.action == "removed":
        gone = False
        if not dry_run and _empty_document(path):
            path.unlink()
            gone = True
        report.lines.append(
            f"{spec.label}: MCP server reflect-jobs removed from {path}"
            + ("; the file held nothing else and was deleted" if gone else "")
        )
    prune_backups(path, keep=keep, dry_run=dry_run)


def _remove_extras(harness: str, report: Report, keep: int, dry_run: bool, env: Mapping) -> None:
    """Our skills (``skills.py``) and, for Claude Code, our ``statusLine``
    (``statusline.py``); a person's own of either is left alone."""
    spec = harnesses.get(harness)
    for change in apply_skills(harness, uninstall=True, dry_run=dry_run, environ=dict(env)):
        if change.action == "removed":
            backup = f" (your edits kept in {change.backup})" if change.backup else ""
            report.lines.append(f"{spec.label}: skill /{change.name} removed{backup}")
    if harness != "claude":
        return
    path = default_settings_path(harness, env)
    if not path.exists():
        return
    if apply_statusline(path, uninstall=True, dry_run=dry_run).action == "removed":
        report.lines.append(f"{spec.label}: statusLine removed from {path}")
        prune_backups(path, keep=keep, dry_run=dry_run)


def _remove_service(report: Report, keep: int, dry_run: bool, run: Runner) -> None:
    for manager in SERVICE_FILES:
        path = default_service_path(manager)
        if path.exists():
            if not dry_run and is_loaded(manager, path, run=run):
                steps = run_steps(stop_commands(manager, path), run=run)
                report.steps += steps
                report.lines += [s.line() for s in steps]
            if not dry_run:
                path.unlink()
                if manager == "systemd" and shutil.which("systemctl"):
                    report.steps += run_steps([["systemctl", "--user", "daemon-reload"]], run=run)
            report.lines.append(f"service ({manager}): removed {path}")
        prune_backups(path, keep=keep, dry_run=dry_run)
        if not dry_run:  # ~/.config/systemd/user our install made, now empty (not ~/.config)
            for parent in (path.parent, path.parent.parent):
                if (
                    parent.name in ("user", "systemd")
                    and parent.is_dir()
                    and not any(parent.iterdir())
                ):
                    parent.rmdir()


def worker_holds(home: Path) -> bool:
    """Whether a running worker holds this home (its ``run/model.lock`` flock is taken).

    Args:
        home: ``$REFLECT_HOME``.

    Returns:
        True when another process holds the lock.
    """
    lock = home / "run" / "model.lock"
    if not lock.exists():
        return False
    fd = os.open(lock, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False


def _ours(path: Path, markers: tuple[str, ...]) -> bool:
    """A directory ``purge`` may delete: empty, or holding one of our markers, never ``/``,
    ``$HOME`` or an ancestor of it."""
    home = Path.home().resolve()
    real = path.resolve()
    if real == Path("/") or real == home or real in home.parents:
        return False
    entries = {p.name for p in path.iterdir()}
    return not entries or bool(entries & set(markers))


def purge_targets(home: Path, kb: Path) -> list[Path]:
    """The data directories ``--purge`` deletes, checked to be ours.

    Args:
        home: ``$REFLECT_HOME``.
        kb: The knowledge base.

    Returns:
        The existing ones, home first.

    Raises:
        PurgeRefused: One does not look like ours, or a worker still holds the home.
    """
    out = []
    for path, markers, what in ((home, HOME_MARKERS, "REFLECT_HOME"), (kb, KB_MARKERS, "KB")):
        if not path.is_dir():
            continue
        if not _ours(path, markers):
            raise PurgeRefused(
                f"{path} ({what}) does not look like reflect-jobs data "
                f"(none of {', '.join(markers)}): not deleting it"
            )
        out.append(path)
    if home.is_dir() and worker_holds(home):
        raise PurgeRefused(
            f"a worker still runs on {home}: stop it first (`systemctl --user stop "
            "reflect-jobs`, or end `reflect-jobs worker`)"
        )
    return out


def uninstall(
    selected: list[str],
    *,
    home: Path,
    kb: Path,
    purge: bool = False,
    dry_run: bool = False,
    environ: Mapping[str, str] | None = None,
    run: Runner = run_command,
) -> Report:
    """Remove hooks and MCP entries of ``selected`` harnesses, and with all of them the service.

    Args:
        selected: Harness names; every harness when it names them all.
        home: ``$REFLECT_HOME`` (purged with ``purge``).
        kb: The knowledge base (purged with ``purge``).
        purge: Also delete the data, the config file and every backup we made.
        dry_run: Report what would be done; change nothing (service commands are not run).
        environ: The environment that locates the harness homes (default ``os.environ``).
        run: How to run a service-manager command (tests record them).

    Returns:
        The report.

    Raises:
        PurgeRefused: ``purge`` was asked and a data directory is not ours or still in use
            (checked before anything is removed).
        reflect_jobs.install.SettingsFileError: A settings file cannot be parsed (it is left
            untouched).
    """
    env = os.environ if environ is None else environ
    everything = set(selected) == set(harnesses.NAMES)
    targets = purge_targets(home, kb) if purge else []
    keep = 0 if purge else 1
    report = Report()
    for harness in selected:
        _remove_extras(harness, report, keep, dry_run, env)
        _remove_hooks(harness, report, keep, dry_run, env)
        _remove_mcp(harness, report, keep, dry_run, env)
    if everything:
        _remove_service(report, keep, dry_run, run)
    if purge:
        cfg = Path(config_path(dict(env)))
        if cfg.exists():
            report.lines.append(f"config file: removed {cfg}")
            if not dry_run:
                cfg.unlink()
        prune_backups(cfg, keep=0, dry_run=dry_run)
        if not dry_run and cfg.parent.is_dir() and not any(cfg.parent.iterdir()):
            cfg.parent.rmdir()
        for path in targets:
            report.purged.append(path)
            report.lines.append(f"deleted {path}")
            if not dry_run:
                shutil.rmtree(path)
    return report
