"""``reflect-jobs install hooks``: our hook entry in each harness's settings, exactly once.

A second ``install`` that appends a second copy of our hook doubles every capture, and a
merge that drops an entry it did not understand breaks another tool. So the merge is a pure
function over the parsed document (:func:`merge_hooks`, :func:`remove_hooks`), the file is
written only when the document actually changed (a re-run is byte-identical and leaves no
new backup), and everything that is not ours — other keys, other tools' hooks, their order —
comes back as it was. Our entries are recognised by their command containing
``reflect-jobs-hook``, the one thing every version of our snippet has in common.

Reading, diffing, backing up and writing the file is :mod:`.jsonfile`'s job; this module
knows the harnesses: where each keeps its hooks and which shape its entries take.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from .. import harnesses
from ..harnesses import COMMAND_KEYS, OWN_SETTINGS_FILE, Harness
from .hook_paths import (
    HOOK_MARKER,
    event_command,
    hook_command,
)
from .jsonfile import (
    SettingsFileError,
    dump_like,
    parse_json,
    read_settings,
    replace_settings,
    settings_diff,
)

# --- harnesses (what each one is: :mod:`reflect_jobs.harnesses`) ------------------------------


def new_entry(spec: Harness, event: harnesses.HookEvent, command: str) -> dict[str, Any]:
    """One new hook entry of ours for ``event``, running ``command``, in the harness's shape.

    Args:
        spec: The harness.
        event: The event the entry is for (its timeout goes into the entry).
        command: The hook command (see :func:`hook_command`).

    Returns:
        ``{"type": "command", <command key>: command, <timeout key>: seconds}``.
    """
    return {"type": "command", spec.command_key: command, spec.timeout_key: event.timeout_sec}


def _accepted_timeout(value: Any, event: harnesses.HookEvent) -> bool:
    """Whether a timeout already in our entry is one the harness takes as written."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        return False
    return event.max_timeout_sec is None or value <= event.max_timeout_sec


# --- the pure merge -------------------------------------------------------------------------


def is_ours(entry: Any) -> bool:
    """Whether a hook entry (of any shape) has a command that runs our hook script.

    Args:
        entry: One item of an event's list, or of a matcher group's ``hooks``; anything
            but a dict is not ours.

    Returns:
        ``True`` when its ``command``, ``bash`` or ``powershell`` string contains
        ``reflect-jobs-hook``.
    """
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
        """Whether the document differs from the one the plan started from."""
        return bool(self.added or self.updated or self.removed)


def opt_in_events(
    harness: str, environ: Mapping[str, str] | None = None
) -> list[tuple[harnesses.HookEvent, bool]]:
    """The harness's opt-in events and whether each is on in ``environ``.

    Args:
        harness: A harness name.
        environ: The environment (default ``os.environ``).

    Returns:
        ``(event, on)`` per entry of :data:`reflect_jobs.harnesses.OPT_IN_EVENTS`.
    """
    from ..envpaths import environ as merged_environ
    from ..envpaths import is_truthy

    env = merged_environ(None if environ is None else dict(environ))
    return [(e, is_truthy(env.get(var))) for var, e in harnesses.OPT_IN_EVENTS.get(harness, ())]


def merge_hooks(
    doc: Any, harness: str, command: str, *, environ: Mapping[str, str] | None = None
) -> HookPlan:
    """Ensure exactly one entry of ours per event we install, and none on any other event.

    Each event's entry runs ``command --event EVENT`` (:func:`event_command`) with the
    registry's timeout. An existing entry of ours with another command (an older venv path,
    an install from before ``--event``) is updated in place, so the position the user gave it
    is kept; so is its timeout while the harness accepts it (:attr:`HookEvent.max_timeout_sec`),
    otherwise it gets ours. Extra copies of ours in the same event are removed, and so are our
    entries on events the registry no longer installs (``SubagentStop``). Everything else —
    other keys, other tools' hooks, their order — is carried over as is.

    An opt-in event (:func:`opt_in_events`, e.g. UserPromptSubmit under
    ``REFLECT_RECALL_ON_PROMPT=1``) is installed when it is on and our entry removed from it
    when it is off, so re-running ``install hooks`` toggles it.

    Args:
        doc: The parsed settings document (not modified).
        harness: Which harness's events and entry shape to use.
        command: The base hook command (see :func:`hook_command`).
        environ: Where opt-in variables are read (default ``os.environ``).

    Returns:
        The plan, holding the new document and what changed per event.

    Raises:
        SettingsFileError: The document's top level, ``hooks`` or an event is of the wrong
            JSON type.
    """
    spec = harnesses.get(harness)
    new = copy.deepcopy(doc)
    hooks = _hooks_table(new, create=True)
    assert hooks is not None
    plan = HookPlan(new)
    opt_in = opt_in_events(harness, environ)
    installed = (*spec.events, *(e for e, on in opt_in if on))
    names = {e.name for e in installed}
    for event in [e for e in hooks if e not in names]:
        entries = hooks[event]
        if not isinstance(entries, list):
            continue
        kept, removed = _without_ours(entries)
        if removed:
            plan.removed.append(event)
            if kept:
                hooks[event] = kept
            else:
                del hooks[event]
    for hook_event in installed:
        event = hook_event.name
        wanted = event_command(command, event)
        entries = hooks.get(event)
        if entries is None:
            entries = hooks[event] = []
        if not isinstance(entries, list):
            raise SettingsFileError(
                f'"hooks.{event}" is a JSON {type(entries).__name__}, expected a list'
            )
        slots = _our_slots(entries)
        if not slots:
            entry = new_entry(spec, hook_event, wanted)
            entries.append({"hooks": [entry]} if spec.grouped else entry)
            plan.added.append(event)
            continue
        i, j = slots[0]
        first = entries[i] if j is None else entries[i]["hooks"][j]
        key = spec.command_key
        if HOOK_MARKER not in str(first.get(key, "")):
            key = next(k for k in COMMAND_KEYS if HOOK_MARKER in str(first.get(k, "")))
        changed = first[key] != wanted
        first[key] = wanted
        if not _accepted_timeout(first.get(spec.timeout_key), hook_event):
            changed = True
            first[spec.timeout_key] = hook_event.timeout_sec
        if len(slots) > 1:  # copies of ours (two installs by hand): keep the first only
            hooks[event], _ = _without_ours(entries, keep_first=True)
            changed = True
        (plan.updated if changed else plan.unchanged).append(event)
    return plan


def remove_hooks(doc: Any) -> HookPlan:
    """Remove every entry of ours (any event), and the lists/tables only our removal emptied.

    Args:
        doc: The parsed settings document (not modified).

    Returns:
        The plan, holding the new document and the events we were removed from.

    Raises:
        SettingsFileError: The document's top level or ``hooks`` is of the wrong JSON type.
    """
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
    """Our commands per event, for doctor.

    Args:
        doc: A parsed settings document of any shape.

    Returns:
        E.g. ``{"Stop": ["/v/bin/reflect-jobs-hook claude"]}``; empty when none is ours.
    """
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


def timeout_problems(doc: Any, harness: str) -> list[str]:
    """Our entries whose timeout the harness would not take as written, for doctor.

    Args:
        doc: A parsed settings document of any shape.
        harness: Whose events and caps to check against.

    Returns:
        E.g. ``["SessionEnd: timeout 10 (accepted: 1-3 s)"]``; empty when all are accepted
        (an event we do not install is doctor's other finding).
    """
    spec = harnesses.get(harness)
    hooks = doc.get("hooks") if isinstance(doc, dict) else None
    out: list[str] = []
    if not isinstance(hooks, dict):
        return out
    for hook_event in spec.events:
        entries = hooks.get(hook_event.name)
        if not isinstance(entries, list):
            continue
        for i, j in _our_slots(entries):
            e = entries[i] if j is None else entries[i]["hooks"][j]
            value = e.get(spec.timeout_key)
            if not _accepted_timeout(value, hook_event):
                cap = hook_event.max_timeout_sec
                accepted = f"1-{cap} s" if cap else "a whole number of seconds"
                out.append(f"{hook_event.name}: timeout {value} (accepted: {accepted})")
    return out


# --- one settings file -----------------------------------------------------------------------


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
        """Whether the file's document changed (or, with ``dry_run``, would change)."""
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

    A file of our own (Copilot's ``reflect-jobs.json``) that holds nothing but its skeleton
    after an uninstall is removed rather than left empty.

    Args:
        path: The settings file (absent, a file, or a symlink to one).
        harness: Which harness the file belongs to.
        command: The base hook command (default :func:`hook_command` for ``harness``).
        uninstall: Remove our entries instead of installing them.
        dry_run: Compute the change and its diff; write nothing.
        now: The backup's timestamp (tests pin it).

    Returns:
        What changed, the backup made and the diff.

    Raises:
        SettingsFileError: The file cannot be read or parsed, or has an unexpected shape;
            nothing is written in that case.
    """
    current = read_settings(path)
    spec = harnesses.get(harness)
    doc = parse_json(current.text, path) if current.exists else spec.new_document()
    try:
        if uninstall:
            plan = remove_hooks(doc)
        else:
            plan = merge_hooks(doc, harness, command or hook_command(harness))
    except SettingsFileError as exc:
        raise SettingsFileError(f"{path}: {exc}; left untouched") from None
    change = FileChange(path, plan, created=not current.exists and plan.changed)
    if not plan.changed:
        return change
    delete = (
        uninstall and current.target.name == OWN_SETTINGS_FILE and plan.doc == spec.new_document()
    )
    change.deleted = delete
    new_text = "" if delete else dump_like(plan.doc, current.text)
    change.diff = settings_diff(current, new_text, delete=delete)
    if dry_run:
        return change
    change.backup = replace_settings(current, None if delete else new_text, now=now)
    return change


def read_timeout_problems(path: Path, harness: str) -> list[str]:
    """:func:`timeout_problems` of one settings file.

    Args:
        path: A settings file.
        harness: Whose events and caps to check against.

    Returns:
        The problems; empty when the file is absent or unparseable.
    """
    try:
        return timeout_problems(json.loads(path.read_text(encoding="utf-8") or "{}"), harness)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return []


def read_installed(path: Path) -> dict[str, list[str]]:
    """Our commands per event in one settings file.

    Args:
        path: A settings file.

    Returns:
        See :func:`installed_events`; empty when the file is absent or unparseable.
    """
    try:
        return installed_events(json.loads(path.read_text(encoding="utf-8") or "{}"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return {}
