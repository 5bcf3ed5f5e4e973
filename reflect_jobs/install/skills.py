"""The ``/reflect`` and ``/handoff`` skills (seed 002), installed beside the hooks.

``install hooks`` writes two Agent Skills (a directory with a ``SKILL.md`` holding ``name``
and ``description`` frontmatter) where each harness reads personal skills:

* Claude Code: ``$CLAUDE_CONFIG_DIR/skills/<name>/SKILL.md`` (default ``~/.claude/skills``);
* Codex: ``$HOME/.agents/skills/<name>/SKILL.md`` — the user scope of Codex's current skills
  documentation (https://developers.openai.com/codex/skills, "Where to save skills": REPO
  ``.agents/skills``, USER ``$HOME/.agents/skills``, ADMIN ``/etc/codex/skills``). Older Codex
  builds read ``$CODEX_HOME/skills``; one copy is written, so the picker shows no twins.

*reflect* is the end-of-session retrospective: list the repository's open items, close what
the session finished with its evidence, record follow-ups. *handoff* writes a portable
handoff prompt and records it as an open ``handoff`` item, which the receiving session is
shown first (the session-start block puts handoffs first) and closes.

A person's file is never lost: our text carries :data:`MARKER`. A ``SKILL.md`` without it
is the person's own skill of the same name and is left alone (reported); one with it that
differs from what we would write (edited, or from another install) is backed up
(``SKILL.md.bak-<UTC stamp>``) before it is replaced or removed. ``--uninstall`` removes
only our files (an edited one after its backup) and the directory when it is left empty.
"""

from __future__ import annotations

import os
import shlex
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

from ..fsio import atomic_write
from .jsonfile import backup_path

#: The line that marks a skill file as ours (an HTML comment: invisible when rendered).
MARKER = "<!-- installed by reflect-jobs: `reflect-jobs install hooks --uninstall` removes it -->"
NAMES = ("reflect", "handoff")

_REFLECT = """\
---
name: reflect
description: End-of-session retrospective for this repository's Reflection Store. Use when the person asks to reflect, wrap up, or close out a session - lists the open items, closes what this session finished (with evidence), and records follow-ups.
---
{marker}

# Reflect on this session

The Reflection Store holds this repository's open actions, questions and handoffs. Keep it
true before the session ends.

1. List the open items: `{cli} list --json` (add `--status all` to see closed ones).
2. For each item this session **finished**, close it with its evidence — what shows it is
   done (the passing test, the commit, the person's words):
   `{cli} done ID --note "tests green: 5 passed; committed abc123" --by skill`
   Close only what the session shows; never guess.
3. An item that no longer applies: `{cli} drop ID --note "why" --by skill`.
4. Record what is left for later, one item each (check the list first: no twins):
   `{cli} add --kind action --title "One line" --body "What and why" --by skill`
   (kinds: action, question, handoff; learning, decision, gotcha, idea, note for knowledge).
5. Tell the person, in a few lines, what was closed, dropped and added, with the ids.
"""

_HANDOFF = """\
---
name: handoff
description: Write a portable handoff prompt for another session or agent and record it in the Reflection Store so the receiving session sees it first and closes it. Use when the person asks for a handoff, to continue elsewhere, or to pass the work on.
---
{marker}

# Hand this work off

1. Write a self-contained handoff prompt the receiving session can act on without this
   conversation: the goal; what is done (with evidence: commits, tests); what is left, in
   order; the files and commands that matter; open questions and traps found.
2. Record it as an open handoff item (the receiving session is shown handoffs first):
   `{cli} add --kind handoff --title "Handoff: <topic in a few words>" --body "<the prompt>" --by skill`
   It prints the item's id.
3. Show the person the prompt and the id. The receiving session closes it when it has
   picked the work up: `{cli} done ID --note "picked up in <session>" --by skill`.
"""

_TEXTS = {"reflect": _REFLECT, "handoff": _HANDOFF}


def reflections_cli() -> str:
    """The ``reflections`` command beside this interpreter, shell-quoted (absolute).

    Returns:
        The command the skills tell the agent to run.
    """
    return shlex.quote(str(Path(os.path.abspath(sys.executable)).parent / "reflections"))


def skill_text(name: str) -> str:
    """The ``SKILL.md`` we install for ``name``.

    Args:
        name: ``reflect`` or ``handoff``.

    Returns:
        The file's text, with our marker and the ``reflections`` command's absolute path.
    """
    return _TEXTS[name].format(marker=MARKER, cli=reflections_cli())


def skills_dir(harness: str, environ: dict[str, str] | None = None) -> Path | None:
    """Where a harness reads personal skills (None: a harness without skills of this shape).

    Args:
        harness: ``claude``, ``codex`` or ``copilot``.
        environ: The environment (``None``: ``os.environ``).

    Returns:
        Claude Code's ``<config dir>/skills``, Codex's ``$HOME/.agents/skills``, else None.
    """
    env = os.environ if environ is None else environ
    if harness == "claude":
        from .hook_paths import harness_home

        return harness_home("claude", env) / "skills"
    if harness == "codex":
        home = env.get("HOME") or os.path.expanduser("~")
        return Path(home) / ".agents" / "skills"
    return None


@dataclass
class SkillChange:
    """What happened to one skill file: ``installed``, ``unchanged``, ``replaced``,
    ``kept`` (a person's own), ``removed``, ``absent``; the backup made, if any."""

    name: str
    path: Path
    action: str
    backup: Path | None = None


def _read(path: Path) -> str | None:
    """The file's text, or None when absent; a link or non-file is refused (OSError)."""
    if path.is_symlink() or (path.exists() and not path.is_file()):
        raise OSError(f"{path}: not a regular file; left untouched")
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return None


def apply_skills(
    harness: str,
    *,
    uninstall: bool = False,
    dry_run: bool = False,
    environ: dict[str, str] | None = None,
    base: Path | None = None,
) -> list[SkillChange]:
    """Install (or remove) the reflect and handoff skills for a harness.

    Args:
        harness: The harness (a harness without a skills directory gets nothing).
        uninstall: Remove ours instead.
        dry_run: Decide and report; write nothing.
        environ: The environment.
        base: The skills directory to use instead of the harness's (``--skills-dir``).

    Returns:
        One change per skill.

    Raises:
        OSError: A file could not be read, backed up or written.
    """
    default = skills_dir(harness, environ)
    base = base or default
    if base is None:
        return []
    out = []
    for name in NAMES:
        path = base / name / "SKILL.md"
        current = _read(path)
        ours = skill_text(name)
        if current is None:
            out.append(SkillChange(name, path, "absent" if uninstall else "installed"))
            if not uninstall and not dry_run:
                path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
                atomic_write(path, ours, mode=0o600)
            continue
        if MARKER not in current:
            out.append(SkillChange(name, path, "kept"))  # the person's own skill
            continue
        backup = None
        if current != ours and not dry_run:
            backup = backup_path(path)
            shutil.copy2(path, backup)  # an edited (or other install's) copy is kept
        if uninstall:
            if not dry_run:
                path.unlink()
                if not any(path.parent.iterdir()):
                    path.parent.rmdir()
            out.append(SkillChange(name, path, "removed", backup))
        elif current == ours:
            out.append(SkillChange(name, path, "unchanged"))
        else:
            if not dry_run:
                atomic_write(path, ours, mode=0o600)
            out.append(SkillChange(name, path, "replaced", backup))
    if uninstall and not dry_run:
        # The directories we made and left empty: skills/ (and Codex's ~/.agents).
        dirs = [base] + ([base.parent] if harness == "codex" and base == default else [])
        for d in dirs:
            if d.is_dir() and not d.is_symlink() and not any(d.iterdir()):
                d.rmdir()
    return out
