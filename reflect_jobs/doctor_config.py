"""``doctor``'s checks of the configuration, the running worker and the hook's failures.

The product's quietest failure was a home set only in the shell: the MCP entry and the
service unit carried it, the hooks did not, so captures went to ``~/.reflect/spool`` which
nobody read, and ``doctor`` — reading the shell's environment — said all was well. These
checks look where the *other* processes look:

* :func:`check_config_file` — the config file parses and names only known keys.
* :func:`check_agreement` — hooks, service unit, MCP entries, config file, this shell and
  the running worker use one home and one KB (and one installation); the first source that
  disagrees is named with the file to fix. The environment wins where it is set (this
  shell), and the check says so.
* :func:`check_worker` — a consumer is running (with the configuration it recorded), not
  two on one home; the fix for a service that is installed but not running is enabling it.
* :func:`check_hook_errors` — the hook logged no failure in the last 24 hours.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from .config import Resolved, Settings, load_settings
from .doctor_check import check


def check_config_file(resolved: Resolved) -> dict[str, Any]:
    """The config file is TOML and names only settings we know.

    Args:
        resolved: The shell's settings with their sources.

    Returns:
        A check; a missing file passes (defaults and the environment are used).
    """
    name = "config file"
    path = resolved.config_path
    problems = [w for w in resolved.warnings if w.startswith(path)]
    deprecated = [w for w in resolved.warnings if not w.startswith(path)]
    if problems:
        return check(name, False, "; ".join(problems), f"edit {path}")
    if deprecated:
        return check(
            name,
            False,
            "; ".join(deprecated),
            "unset the deprecated variables (`reflect-jobs config` shows what is in force)",
        )
    if not resolved.config_exists:
        return check(name, True, f"{path} not found: defaults and the environment are used")
    return check(name, True, f"{path}: every key known")


def bare_settings(environ: dict[str, str] | None = None) -> Settings:
    """What a process started with only ``HOME`` and ``PATH`` uses (a harness's hook, a unit).

    Args:
        environ: Where ``HOME``/``XDG_CONFIG_HOME`` are read (default ``os.environ``).

    Returns:
        The settings from the config file and the defaults alone.
    """
    env = os.environ if environ is None else environ
    keep = ("HOME", "PATH", "XDG_CONFIG_HOME")
    return load_settings({k: env[k] for k in keep if k in env})


def _norm(path: str) -> str:
    return os.path.normpath(os.path.expanduser(path))


def check_agreement(
    s: Settings,
    resolved: Resolved,
    workers: list[dict[str, Any]],
    environ: dict[str, str] | None = None,
) -> dict[str, Any]:
    """Hooks, service, MCP entries, config file, this shell and the worker use one home.

    Args:
        s: This shell's settings.
        resolved: The same with sources (which variables this shell sets).
        workers: The running consumers (``consumers.live_consumers``).
        environ: The environment that locates the harness homes (default ``os.environ``).

    Returns:
        A check. Passing: every source that names a home and a KB names the config file's
        (or the default's, without a file), and every installed command lives in one
        ``bin`` directory. Failing: the first disagreement, the file to fix in ``fix``.
    """
    from .install import inventory

    name = "configuration"
    cfg = resolved.config_path
    try:
        base = bare_settings(environ)
    except Exception as exc:  # noqa: BLE001 - a bad value in the file: check_config_file says more
        return check(name, False, f"the config file does not load: {exc}", f"edit {cfg}")
    want = {
        "REFLECT_HOME": _norm(str(base.home)),
        "GLOBAL_LEARNINGS_PATH": _norm(str(base.kb_path)),
    }
    what = f"config file {cfg}" if resolved.config_exists else "the defaults (no config file)"
    problems: list[tuple[str, str]] = []
    for var, setting in (("REFLECT_HOME", "home"), ("GLOBAL_LEARNINGS_PATH", "kb_path")):
        mine = _norm(str(getattr(s, setting)))
        if resolved.sources[setting].startswith("environment") and mine != want[var]:
            problems.append(
                (
                    f"this shell sets {var}={mine} (the environment wins here) but the hooks "
                    f"use {want[var]} from {what}",
                    f'unset {var}, or set {setting} = "{mine}" in {cfg} '
                    "(`reflect-jobs install hooks` writes it)",
                )
            )
    items = inventory.everything(environ)
    for item in items:
        if item.problem:
            problems.append((item.problem, f"fix or remove {item.path}"))
            continue
        for var, value in item.env.items():
            if var in want and _norm(value) != want[var]:
                rerun = (
                    "reflect-jobs install service"
                    if item.what.startswith("service")
                    else f"reflect-jobs install hooks --harness {item.what.split('(')[1][:-1]}"
                )
                problems.append(
                    (
                        f"{item.what} in {item.path} sets {var}={value}, {what} says {want[var]}",
                        f"re-run `{rerun}` (it rewrites {item.path}), or edit {cfg}",
                    )
                )
    for w in workers:
        if w.get("kind") == "worker" and w.get("home") and _norm(w["home"]) != want["REFLECT_HOME"]:
            problems.append(
                (
                    f"the running worker (pid {w['pid']}) uses home {w['home']}, the hooks "
                    f"{want['REFLECT_HOME']}",
                    "re-run `reflect-jobs install service --enable` so both read one config",
                )
            )
    here = str(Path(os.path.abspath(sys.executable)).parent)
    dirs = {inventory.bin_dir(i.command) for i in items if i.command} - {None}
    if len(dirs) > 1:
        problems.append(
            (
                "installed commands run from several installations: " + ", ".join(sorted(dirs)),  # type: ignore[arg-type]
                f"re-run `reflect-jobs install hooks` and `install service` from {here}",
            )
        )
    if problems:
        detail, fix = problems[0]
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        return check(name, False, detail + more, fix)
    parts = [i.what for i in items]
    return check(
        name,
        True,
        f"home {want['REFLECT_HOME']}, KB {want['GLOBAL_LEARNINGS_PATH']} from {what}"
        + (f"; {', '.join(parts)} agree" if parts else ""),
    )


def check_worker(s: Settings, workers: list[dict[str, Any]], last_beat: Any) -> dict[str, Any]:
    """A worker runs on this home, one only; its configuration is shown.

    Args:
        s: The settings.
        workers: The running consumers (``consumers.live_consumers``).
        last_beat: The newest heartbeat (UTC) or None.

    Returns:
        A check named ``worker``.
    """
    from .consumers import describe, duplicate_workers
    from .install import inventory
    from .ledger.models import utcnow

    units = inventory.service_units()
    if units:
        unit = units[0]
        start = (
            f"systemctl --user enable --now {unit.path.name}"
            if unit.what == "service (systemd)"
            else f"launchctl bootstrap gui/{os.getuid()} {unit.path}"
        )
        fix = (
            f"the service is installed ({unit.path}) but not running: {start} "
            "(or `reflect-jobs install service --enable`); "
            "after a stop: `systemctl --user restart reflect-jobs`"
        )
    else:
        fix = "reflect-jobs install service --enable (or run `reflect-jobs worker`)"
    dups = duplicate_workers(workers)
    if dups:
        return check(
            "worker",
            False,
            f"{len(dups[0])} workers on one home: " + "; ".join(describe(c) for c in dups[0]),
            "stop all but one (the service: `systemctl --user status reflect-jobs`; others: kill PID)",
        )
    if last_beat is None:
        return check("worker", False, "no consumer has ever run", fix)
    age = int((utcnow() - last_beat).total_seconds())
    running = [w for w in workers if w.get("kind") != "drain"]
    if age < 300 and not running and workers:
        return check(
            "worker",
            False,
            f"no worker is running (the last heartbeat, {age}s ago, was a drain's)",
            fix,
        )
    if not running or age >= 300:
        stale_fix = (
            fix
            if units
            else (
                "start the consumer: `reflect-jobs worker` or `systemctl --user restart reflect-jobs`"
            )
        )
        return check("worker", False, f"last heartbeat {age}s ago", stale_fix)
    return check(
        "worker",
        True,
        f"last heartbeat {age}s ago; " + "; ".join(describe(w) for w in running),
    )


def check_hook_errors(s: Settings) -> dict[str, Any]:
    """The hook logged no failure in the last 24 hours.

    Args:
        s: The settings (``$REFLECT_HOME`` holds ``hook-errors.log``).

    Returns:
        A check naming the count and the newest message.
    """
    from .hook_errors import log_path, recent

    found = recent(s.home)
    if not found:
        return check("hook errors", True, "none in the last 24 h")
    return check(
        "hook errors",
        False,
        f"{len(found)} in the last 24 h, newest: {found[0]['error'][:300]}",
        f"`reflect-jobs errors` lists them (log: {log_path(s.home)})",
    )
