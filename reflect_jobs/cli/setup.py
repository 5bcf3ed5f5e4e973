"""Commands that set a machine up: hooks into harnesses, the consumer as a service, backfill.

``install hooks``, ``install service`` and ``backfill``. What they change on disk is decided
and written by :mod:`reflect_jobs.install` and :mod:`reflect_jobs.backfill`; this module
turns their results into the few lines a person reads once, at setup time.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import click

from .. import harnesses
from ..settings_spec import BY_VAR
from .common import HARNESSES, emit, get_settings


@click.group()
def install() -> None:
    """Wire reflect-jobs into a harness (hooks) and the service manager (consumer)."""


@install.command("hooks")
@click.option("--harness", type=click.Choice(HARNESSES), required=True)
@click.option(
    "--settings",
    "settings_file",
    type=click.Path(dir_okay=False),
    default=None,
    help="The settings file to edit (default: the harness's user-level file).",
)
@click.option("--uninstall", is_flag=True, help="Remove our entries (and nothing else).")
@click.option("--dry-run", is_flag=True, help="Show the edit as a diff; write nothing.")
@click.option(
    "--mcp-config",
    "mcp_file",
    type=click.Path(dir_okay=False),
    default=None,
    help="The MCP config file to register `reflect-jobs mcp` in (default: the harness's own; "
    "skipped when --settings is given without it).",
)
@click.option("--no-mcp", is_flag=True, help="Do not register (or unregister) the MCP server.")
@click.option(
    "--statusline",
    "with_statusline",
    is_flag=True,
    help="Claude Code: also show the open items in the status line (when none is set).",
)
@click.option(
    "--skills-dir",
    type=click.Path(file_okay=False),
    default=None,
    help="Where to write the reflect and handoff skills (default: the harness's own; "
    "skipped when --settings is given without it).",
)
@click.option("--no-skills", is_flag=True, help="Do not install (or remove) the skills.")
def install_hooks(
    harness: str,
    settings_file: str | None,
    uninstall: bool,
    dry_run: bool,
    mcp_file: str | None = None,
    no_mcp: bool = False,
    with_statusline: bool = False,
    skills_dir: str | None = None,
    no_skills: bool = False,
) -> None:
    """Merge the reflect-jobs hook into a harness's settings, idempotently (backup first).

    \f
    Also registers the ``reflect-jobs mcp`` server where the harness reads MCP servers
    (ARCHITECTURE §13), unless ``--no-mcp``, or ``--settings`` is given without
    ``--mcp-config`` (a custom settings file must not edit the user's real MCP config).

    Args:
        harness: Which harness to wire.
        settings_file: The settings file to edit; ``None`` for the harness's user-level one.
        uninstall: Remove our entries (and nothing else).
        dry_run: Print the edit as a diff; write nothing.
        mcp_file: The MCP config file; ``None`` for the harness's own.
        no_mcp: Leave MCP configuration alone.
        with_statusline: Set ``statusLine`` to ``reflect-jobs statusline`` (Claude Code,
            only when none is set; otherwise print how to compose the two). ``--uninstall``
            always removes ours.
        skills_dir: The skills directory (default: Claude Code's ``skills/``, Codex's
            ``~/.agents/skills``).
        no_skills: Leave the skills alone.

    Raises:
        click.ClickException: The hook script is missing or not executable (when
            installing), or the settings file cannot be parsed (exit 1).
    """
    from .. import install as inst

    path = (
        Path(settings_file).expanduser() if settings_file else inst.default_settings_path(harness)
    )
    spec = harnesses.get(harness)
    script = inst.hook_script()
    if not uninstall and not os.access(script, os.X_OK):
        raise click.ClickException(
            f"{script} not found or not executable: reinstall reflect-jobs (make install)"
        )
    try:
        change = inst.apply_hooks(
            path,
            harness,
            command=inst.hook_command(harness, script),
            uninstall=uninstall,
            dry_run=dry_run,
        )
    except inst.SettingsFileError as exc:
        raise click.ClickException(str(exc)) from None
    if not no_mcp and (mcp_file or not settings_file):
        _register_mcp(harness, spec.label, mcp_file, uninstall=uninstall, dry_run=dry_run)
    _report_hooks(spec, path, change, uninstall=uninstall, dry_run=dry_run)
    if not no_skills and (skills_dir or not settings_file):
        _skills(harness, skills_dir, uninstall=uninstall, dry_run=dry_run)
    if harness == "claude" and (with_statusline or uninstall):
        _statusline(path, uninstall=uninstall, dry_run=dry_run)
    elif with_statusline:
        click.echo(f"{spec.label}: no statusLine setting; --statusline is for Claude Code")
    if not uninstall:
        _record_config(dry_run=dry_run)


def _skills(harness: str, where: str | None, *, uninstall: bool, dry_run: bool) -> None:
    """Install (or remove) the reflect and handoff skills; one line each."""
    from ..install.skills import apply_skills

    base = Path(where).expanduser() if where else None
    try:
        changes = apply_skills(harness, uninstall=uninstall, dry_run=dry_run, base=base)
    except OSError as exc:
        raise click.ClickException(f"skills: {exc}") from None
    label = harnesses.get(harness).label
    for ch in changes:
        if ch.action == "absent":
            continue
        verb = ch.action
        if ch.action == "kept":
            verb = "kept (a skill of yours has this name; ours is not installed)"
        elif dry_run and ch.action != "unchanged":
            verb = f"would be {ch.action}"
        backup = f" (backup {ch.backup})" if ch.backup else ""
        click.echo(f"{label}: skill /{ch.name} {verb}: {ch.path}{backup}")


def _statusline(path: Path, *, uninstall: bool, dry_run: bool) -> None:
    """Set (or remove) our ``statusLine`` in Claude Code's settings; a line or two out."""
    from ..install.jsonfile import SettingsFileError
    from ..install.statusline import apply_statusline

    try:
        sc = apply_statusline(path, uninstall=uninstall, dry_run=dry_run)
    except (SettingsFileError, OSError) as exc:
        raise click.ClickException(f"statusLine: {exc}") from None
    if sc.action == "absent":
        return
    if sc.hint:
        click.echo(f"Claude Code: {sc.hint}")
        return
    backup = f" (backup {sc.backup})" if sc.backup else ""
    verb = f"would be {sc.action}" if dry_run and sc.action != "unchanged" else sc.action
    click.echo(f"Claude Code: statusLine {verb} in {path}{backup}")


def _report_hooks(spec: Any, path: Path, change: Any, *, uninstall: bool, dry_run: bool) -> None:
    """What ``install hooks`` did to the settings file, in a line or two (a diff with
    ``--dry-run``)."""
    plan = change.plan
    if not change.changed:
        state = "not installed" if uninstall else "already installed"
        click.echo(f"{spec.label}: {state} in {path} (unchanged)")
        return
    if dry_run:
        click.echo(change.diff, nl=False)
        click.echo(f"{spec.label}: dry run, {path} not written")
        return
    parts = [
        f"{verb} {', '.join(events)}"
        for verb, events in (
            ("added", plan.added),
            ("updated", plan.updated),
            ("removed", plan.removed),
        )
        if events
    ]
    backup = f" (backup {change.backup})" if change.backup else ""
    gone = "; the file held nothing else and was deleted" if change.deleted else ""
    click.echo(f"{spec.label}: {'; '.join(parts)} in {path}{gone}{backup}")
    if spec.install_note and not uninstall:
        click.echo(spec.install_note)


def _record_config(*, dry_run: bool = False) -> tuple[str, ...]:
    """Write what install was run with to the user config file; one line out.

    Every entry point reads that file (the hook with the harness's environment, the worker
    with the service manager's), so a home set only in this shell reaches them all.
    Returns the keys recorded.
    """
    from ..config import SettingsError, resolve
    from ..install.config_file import record_install
    from .common import ConfigError, settings_fix

    try:
        resolved = resolve()
    except SettingsError as exc:
        raise ConfigError(f"{exc}; fix: {settings_fix(str(exc))}") from None
    try:
        done = record_install(resolved, dry_run=dry_run)
    except (OSError, ValueError) as exc:
        raise click.ClickException(f"config file: {exc}") from None
    s = resolved.settings
    state = "unchanged" if not done.changed else "would be written" if dry_run else "written"
    click.echo(f"config: {done.path} {state} (home {s.home}, KB {s.kb_path})")
    return done.keys


def _register_mcp(
    harness: str, label: str, mcp_file: str | None, *, uninstall: bool, dry_run: bool
) -> None:
    """Register (or remove) ``reflect-jobs mcp`` in the harness's MCP config; one line out."""
    from ..install.jsonfile import SettingsFileError
    from ..install.mcp import apply_mcp

    try:
        mc = apply_mcp(
            harness,
            path=Path(mcp_file).expanduser() if mcp_file else None,
            uninstall=uninstall,
            dry_run=dry_run,
        )
    except (SettingsFileError, OSError) as exc:
        raise click.ClickException(f"MCP server: {exc}") from None
    backup = f" (backup {mc.backup})" if mc.backup else ""
    verb = (
        "would be " + mc.action
        if dry_run and mc.action not in ("unchanged", "absent")
        else mc.action
    )
    click.echo(f"{label}: MCP server reflect-jobs {verb} in {mc.path}{backup}")


@install.command("service")
@click.option("--systemd", "manager", flag_value="systemd", help="A systemd user unit (Linux).")
@click.option("--launchd", "manager", flag_value="launchd", help="A LaunchAgent (macOS).")
@click.option("--output", type=click.Path(dir_okay=False), default=None, help="Write here instead.")
@click.option("--print", "to_stdout", is_flag=True, help="Print the unit; write nothing.")
@click.option("--enable", is_flag=True, help="Also start it now and at every login.")
@click.option(
    "--uninstall", is_flag=True, help="Stop and disable the service, and remove its unit."
)
def install_service(
    manager: str | None,
    output: str | None,
    to_stdout: bool,
    enable: bool = False,
    uninstall: bool = False,
) -> None:
    """Render the consumer's service unit with this installation's paths and write it.

    \f
    The unit is validated (and checked by ``systemd-analyze``/``plutil`` when available)
    before anything is written, and the settings it runs with are recorded in the user
    config file; then ``--enable`` starts it (``systemctl --user enable --now`` /
    ``launchctl bootstrap``), else the commands that do are printed. ``--uninstall`` stops
    and disables a loaded unit, removes it and prunes its backups to the newest.

    Args:
        manager: ``systemd`` or ``launchd``; ``None`` picks this platform's.
        output: Write the unit here instead of the manager's default path.
        to_stdout: Print the unit; write nothing.
        enable: Start the service now and at every login.
        uninstall: Stop, disable and remove the unit instead.

    Raises:
        click.ClickException: No template, the rendered unit is invalid, the external
            checker rejects it, or the service manager refuses to start or stop it (exit 1).
    """
    s = get_settings()
    from .. import install as inst
    from ..install import service_control as ctl

    manager = manager or inst.default_manager()
    path = Path(output).expanduser().absolute() if output else inst.default_service_path(manager)
    if uninstall:
        _uninstall_service(manager, path)
        return
    try:
        template = inst.template_text(manager)
    except inst.InstallError as exc:
        raise click.ClickException(str(exc)) from None
    text = inst.render_service(
        manager,
        template,
        inst.service_values(home=s.home, kb_path=s.kb_path, timeout_sec=s.timeout_sec),
    )
    problems = inst.validate(manager, text)
    if problems:
        raise click.ClickException(f"rendered {manager} unit is invalid: {'; '.join(problems)}")
    checked = inst.external_check(manager, text, path.name)
    if checked is not None:
        tool, ok, out = checked
        if not ok:
            raise click.ClickException(
                f"{tool} rejected the unit: {out.splitlines()[0] if out else ''}"
            )
        for line in out.splitlines():
            click.secho(f"{tool}: {line}", fg="yellow", err=True)
    if to_stdout:
        click.echo(text, nl=False)
        return
    written = inst.write_unit(path, text, home=s.home)
    if not written.changed:
        click.echo(f"{path}: unchanged")
    else:
        backup = written.backup
        click.echo(f"wrote {path}" + (f" (backup {backup})" if backup else ""))
    if checked is not None:
        click.echo(f"{checked[0]}: ok")
    recorded = _record_config()
    if enable:
        steps = ctl.run_steps(ctl.start_commands(manager, path))
        for step in steps:
            click.echo(step.line())
        if not all(st.ok for st in steps):
            raise click.ClickException(
                "the service manager did not start it; run by hand: "
                + " && ".join(" ".join(c) for c in ctl.start_commands(manager, path))
            )
        click.echo("the service is enabled and running (`reflect-jobs status` shows it)")
    else:
        click.echo("enable it with `reflect-jobs install service --enable`, or by hand:")
        for cmd in inst.enable_commands(manager, path):
            click.echo(f"  {cmd}")
    extra = [v for v in inst.uncarried_env() if v in BY_VAR and BY_VAR[v] not in recorded]
    if extra:
        click.echo(
            f"note: {', '.join(extra)} set in this shell are not in the unit or the config "
            f"file; add them to the config file (`reflect-jobs config` names the keys)"
        )


def _uninstall_service(manager: str, path: Path) -> None:
    """``install service --uninstall``: stop and disable when loaded, remove, prune backups."""
    from ..install import service_control as ctl
    from ..install.uninstall import prune_backups

    if not path.exists():
        click.echo(f"{path}: no unit installed (nothing to remove)")
        return
    if ctl.is_loaded(manager, path):
        steps = ctl.run_steps(ctl.stop_commands(manager, path))
        for step in steps:
            click.echo(step.line())
        if not all(st.ok for st in steps):
            raise click.ClickException(
                f"could not stop the service; {path} left in place. Run by hand: "
                + " && ".join(" ".join(c) for c in ctl.stop_commands(manager, path))
            )
    path.unlink()
    prune_backups(path, keep=1, dry_run=False)
    if manager == "systemd":
        ctl.run_steps([["systemctl", "--user", "daemon-reload"]])
    click.echo(f"removed {path}")


@click.command()
@click.option("--since", default="7d", show_default=True, help="Nd, Nh, Nw or all")
@click.option(
    "--root",
    type=click.Path(file_okay=False),
    default=None,
    help="Sessions directory (default: the harness's, e.g. ~/.claude/projects).",
)
@click.option("--harness", type=click.Choice(HARNESSES), default="claude", show_default=True)
@click.option("--limit", type=click.IntRange(min=0), default=None, help="Enqueue at most N.")
@click.option("--settle", type=int, default=0, show_default=True)
@click.option("--dry-run", is_flag=True, help="Report what would be enqueued.")
@click.option("--json", "as_json", is_flag=True)
def backfill(
    since: str,
    root: str | None,
    harness: str,
    limit: int | None,
    settle: int,
    dry_run: bool,
    as_json: bool,
) -> None:
    """Capture past sessions: each transcript changed since --since, newest first.

    \f
    Exits 1 when ``REFLECT_DISABLED`` refused the captures.

    Args:
        since: ``7d``, ``24h``, ``2w`` … or ``all``.
        root: The sessions directory; ``None`` for the harness's.
        harness: Whose sessions to capture.
        limit: Enqueue at most this many (``None``: no limit).
        settle: Seconds each job waits for more captures before preparing.
        dry_run: Report what would be enqueued; capture nothing.
        as_json: Print :func:`reflect_jobs.backfill.run_backfill`'s report as JSON.

    Raises:
        click.UsageError: ``--since`` does not parse (exit 2).
        click.ClickException: The sessions directory does not exist (exit 1).
    """
    s = get_settings()
    from ..backfill import default_root, run_backfill
    from ..ledger.spend import parse_since

    window = None if since.strip().lower() == "all" else parse_since(since)
    if window is None and since.strip().lower() != "all":
        raise click.UsageError(f"--since must be like 7d, 24h, 2w or all, got {since!r}")
    base = Path(root).expanduser() if root else default_root(harness)
    if not base.is_dir():
        raise click.ClickException(f"no sessions directory {base} (use --root)")
    bar: Any = None
    use_bar = sys.stderr.isatty() and not as_json

    def on_plan(n: int) -> None:
        nonlocal bar
        if use_bar:
            bar = click.progressbar(length=n, label="enqueue", file=sys.stderr)

    def progress(_c: Any) -> None:
        if bar is not None:
            bar.update(1)

    report = run_backfill(
        s,
        harness,
        base,
        window,
        dry_run=dry_run,
        limit=limit,
        settle_sec=settle,
        progress=progress,
        on_plan=on_plan,
    )
    if bar is not None:
        bar.render_finish()
    if as_json:
        emit(report)
    else:
        verb = "would enqueue" if dry_run else "enqueued"
        skipped = ", ".join(f"{k[5:]} {v}" for k, v in sorted(report["skipped_by"].items()))
        click.echo(
            f"{report['found']} transcript(s) in {report['root']}: {verb} {report['enqueued']}, "
            f"skipped {report['skipped']}"
            + (f" ({skipped})" if skipped else "")
            + (
                f", not enqueued {report['not_enqueued']} (--limit)"
                if report["not_enqueued"] and not report["disabled"]
                else ""
            )
        )
    if report["disabled"]:
        click.echo("reflect-jobs is disabled (REFLECT_DISABLED=1): nothing enqueued", err=True)
        sys.exit(1)


#: Registered on the top-level group by :mod:`reflect_jobs.cli`.
COMMANDS = (install, backfill)
