"""``doctor``'s hook checks: every harness has our hook on every event it uses.

The quietest install failure is a hook that was never wired, or that points at a venv that
moved: every session then ends with nothing captured and no error anywhere. These checks
read each harness's settings files (``install.hook_paths``) the way the harness does.
"""

from __future__ import annotations

import os
import shlex
from typing import Any

from .doctor_check import check


def _script_of(command: str) -> str | None:
    try:
        words = shlex.split(command)
    except ValueError:
        return None
    return next((w for w in words if w.endswith("reflect-jobs-hook")), None)


def _hook_args(command: str) -> list[str]:
    """The arguments after the hook script in a hook command (empty if unparseable)."""
    try:
        words = shlex.split(command)
    except ValueError:
        return []
    at = next((i for i, w in enumerate(words) if w.endswith("reflect-jobs-hook")), None)
    return [] if at is None else words[at + 1 :]


def _event_of(args: list[str]) -> str | None:
    """The ``--event`` value among hook arguments, or None."""
    if "--event" in args and args.index("--event") + 1 < len(args):
        return args[args.index("--event") + 1]
    return None


def check_hooks(environ: dict[str, str] | None = None) -> list[dict[str, Any]]:
    """One check per harness: our hook on every event, pointing at a script that exists.

    A harness whose settings are absent is not in use here and passes (skipped).

    Args:
        environ: The environment that locates each harness's config directory (default
            ``os.environ``).

    Returns:
        One check per harness in :data:`reflect_jobs.harnesses.REGISTRY` order. A check
        fails when our hook is missing on an event, installed twice on one, installed on an
        event the registry no longer uses (``SubagentStop``), points at a missing or
        non-executable script, runs the hook for another harness, does not name its event
        with ``--event`` (an install from before it), or has a timeout the harness would
        clamp or reject. Re-running ``install hooks`` fixes all of these.
    """
    from .harnesses import REGISTRY
    from .install import (
        default_settings_path,
        harness_hook_files,
        harness_present,
        read_installed,
        read_timeout_problems,
    )

    out = []
    for harness, spec in REGISTRY.items():
        name = f"hooks ({harness})"
        fix = f"reflect-jobs install hooks --harness {harness}"
        marker = harness_present(harness, environ)
        if marker is None:
            out.append(check(name, True, f"{spec.label} not set up here: skipped"))
            continue
        files = harness_hook_files(harness, environ)
        found: dict[str, list[str]] = {}
        where: list[str] = []
        timeouts: list[str] = []
        for f in files:
            timeouts += read_timeout_problems(f, harness)
            got = read_installed(f)
            if got:
                where.append(str(f))
            for event, cmds in got.items():
                found.setdefault(event, []).extend(cmds)
        if not found:
            target = default_settings_path(harness, environ)
            out.append(check(name, False, f"not installed in {target}", fix))
            continue
        problems = []
        missing = [e for e in spec.event_names if e not in found]
        if missing:
            problems.append(f"missing on {', '.join(missing)}")
        twice = [e for e, cmds in found.items() if len(cmds) > 1]
        if twice:
            problems.append(f"installed twice on {', '.join(twice)} (double captures)")
        stale = [e for e in found if e not in spec.event_names]
        if stale:
            problems.append(f"installed on {', '.join(stale)}, which it no longer uses")
        for cmd in sorted({c for cmds in found.values() for c in cmds}):
            script = _script_of(cmd)
            args = _hook_args(cmd)
            if script is None or not os.access(script, os.X_OK):
                problems.append(f"points at a missing script: {cmd}")
            elif args[:1] != [harness]:
                problems.append(f"runs the hook for another harness: {cmd}")
        unnamed = [
            e
            for e in spec.event_names
            if any(_event_of(_hook_args(c)) != e for c in found.get(e, ()))
        ]
        if unnamed:
            problems.append(f"no --event or the wrong one on {', '.join(unnamed)}")
        problems += [f"{spec.label} would not take {t}" for t in timeouts]
        detail = "; ".join(problems) if problems else f"installed in {', '.join(where)}"
        out.append(check(name, not problems, detail, fix))
    return out
