"""The managed section of Claude Code's ``MEMORY.md``: where the file is, and the splice.

Claude Code loads ``<claude home>/projects/<project>/memory/MEMORY.md`` at every session
start — the first 200 lines or 25 KB, whichever comes first. ``<project>`` is the canonical
git root (the main working tree, so every worktree of a repository shares one memory) with
every character outside ``[A-Za-z0-9]`` replaced by ``-``; a name longer than 200 characters
is cut and suffixed with a hash we do not reproduce, so for such a path an existing
directory with that prefix is used, and none is guessed.

The splice (:func:`splice`, pure) rewrites only what lies between our two marker lines, in
place. The person's lines outside them are never changed or moved, apart from a newline
added after a last line that had none (so the marker starts a line). A half-deleted section
(one marker of the two, or two of one) is repaired without duplication: each orphaned marker
goes, with the adjacent lines that are recognisably ours (our heading, our bullets, which
end in the learning's id), and one whole section is written where the first marker was —
never deleting a line that is not ours. A file that is over Claude Code's limit already is
not written at all (it would only get worse); the caller reports it.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

BEGIN = "<!-- reflect-jobs:begin (managed by `reflect-jobs nightly`; edits inside are replaced) -->"
END = "<!-- reflect-jobs:end -->"
HEADING = "## Learned in this repository (reflect-jobs)"
_BEGIN_PREFIX, _END_PREFIX = "<!-- reflect-jobs:begin", "<!-- reflect-jobs:end"
#: Claude Code's load limits for MEMORY.md (docs: first 200 lines or 25 KB).
CLAUDE_MAX_LINES = 200
CLAUDE_MAX_BYTES = 25_000
#: The managed section's own ceilings, well inside those limits.
MAX_SECTION_LINES = 100
MAX_SECTION_BYTES = 10_000
#: A bullet we wrote: it ends with the learning's id in parentheses.
_OURS = re.compile(r"^- .+ \(lrn-[a-z0-9-]*[0-9a-f]{6}\)$")
_PROJECT_NAME_MAX = 200

__all__ = [
    "BEGIN",
    "END",
    "HEADING",
    "Splice",
    "bullet",
    "canonical_root",
    "memory_file",
    "project_name",
    "splice",
]


def project_name(root: str) -> str:
    """Claude Code's directory name for a project path (``/a/b.c`` → ``-a-b-c``).

    Args:
        root: The canonical git root.

    Returns:
        Every character outside ``[A-Za-z0-9]`` replaced by ``-``.
    """
    return re.sub(r"[^A-Za-z0-9]", "-", root)


def canonical_root(root: str) -> str:
    """The main working tree of the repository ``root`` belongs to (a worktree's is its main).

    Args:
        root: A working tree's root (``repo.Repo.root``).

    Returns:
        The main working tree when ``root/.git`` is a worktree's ``gitdir:`` file with a
        ``commondir``; else ``root``.
    """
    dotgit = os.path.join(root, ".git")
    if not os.path.isfile(dotgit):
        return root
    try:
        with open(dotgit, encoding="utf-8") as fh:
            line = fh.read(4096).strip()
        if not line.startswith("gitdir:"):
            return root
        gitdir = os.path.normpath(os.path.join(root, line[7:].strip()))
        with open(os.path.join(gitdir, "commondir"), encoding="utf-8") as fh:
            common = os.path.normpath(os.path.join(gitdir, fh.read(4096).strip()))
    except OSError:
        return root
    return os.path.dirname(common) if os.path.basename(common) == ".git" else root


def memory_file(claude_home: str, root: str) -> Path | None:
    """Where Claude Code keeps the repository's ``MEMORY.md``.

    Args:
        claude_home: Claude Code's home (``harnesses.home_of``: ``$CLAUDE_CONFIG_DIR`` or
            ``~/.claude``).
        root: The repository's working tree on this machine.

    Returns:
        The path, or ``None`` for a project path too long to name without Claude Code's own
        hash and no existing directory with its prefix.
    """
    projects = Path(claude_home) / "projects"
    name = project_name(canonical_root(os.path.abspath(root)))
    if len(name) > _PROJECT_NAME_MAX:
        prefix = name[:_PROJECT_NAME_MAX] + "-"
        try:
            found = [d for d in projects.iterdir() if d.name.startswith(prefix)]
        except OSError:
            return None
        if len(found) != 1:
            return None
        name = found[0].name
    return projects / name / "memory" / "MEMORY.md"


def bullet(text: str, learning_id: str) -> str:
    """One managed line: the learning's rule and its id (which marks the line as ours).

    Args:
        text: The rule (already one inert line).
        learning_id: The learning's id.

    Returns:
        ``- <text> (<id>)``.
    """
    return f"- {text} ({learning_id})"


def _is_ours(line: str) -> bool:
    s = line.strip()
    return s == HEADING or bool(_OURS.match(s))


def _marker(line: str) -> str:
    s = line.strip()
    if s.startswith(_BEGIN_PREFIX):
        return "begin"
    if s.startswith(_END_PREFIX):
        return "end"
    return ""


@dataclass(frozen=True)
class Splice:
    """The file as it should be, and what a person should know.

    Attributes:
        text: The new content (the old one when nothing may be written).
        changed: ``text`` differs from the file's content.
        lines: The managed section's lines written (bullets).
        repaired: Why the section was repaired (a half-deleted marker), else ``""``.
        refused: Why nothing was written (over Claude Code's limit), else ``""``.
    """

    text: str
    changed: bool
    lines: int = 0
    repaired: str = ""
    refused: str = ""


def _person_part(lines: list[str]) -> tuple[list[str], int, str]:
    """The person's lines (ours removed), where the section goes, and what was repaired."""
    marks = [(i, _marker(line)) for i, line in enumerate(lines) if _marker(line)]
    if not marks:
        return lines, len(lines), ""
    if [k for _, k in marks] == ["begin", "end"]:
        b, e = marks[0][0], marks[1][0]
        return lines[:b] + lines[e + 1 :], b, ""
    drop: set[int] = set()
    for i, kind in marks:
        drop.add(i)
        step = 1 if kind == "begin" else -1
        j = i + step
        while 0 <= j < len(lines) and not _marker(lines[j]) and _is_ours(lines[j]):
            drop.add(j)
            j += step
    first = marks[0][0]
    at = sum(1 for i in range(first) if i not in drop)
    kinds = ", ".join(k for _, k in marks)
    why = f"markers found: {kinds}; the section was rebuilt, the person's lines kept"
    return [line for i, line in enumerate(lines) if i not in drop], at, why


def _over(text: str) -> str:
    n, size = text.count("\n") + (0 if text.endswith("\n") or not text else 1), len(text.encode())
    if n > CLAUDE_MAX_LINES or size > CLAUDE_MAX_BYTES:
        return (
            f"MEMORY.md is over Claude Code's limit already ({n} lines, {size:,} bytes; it "
            f"loads {CLAUDE_MAX_LINES} lines or {CLAUDE_MAX_BYTES:,} bytes): not written"
        )
    return ""


def splice(current: str | None, bullets: list[str], *, max_lines: int) -> Splice:
    """The file with the managed section holding ``bullets`` (best first), in place.

    Args:
        current: The file's content, ``None`` when it does not exist.
        bullets: The section's lines (:func:`bullet`), best first.
        max_lines: The section's line budget (``REFLECT_MEMORY_LINES``; capped at
            :data:`MAX_SECTION_LINES`), markers and heading included.

    Returns:
        The :class:`Splice`. No section is written when there is nothing to promote and
        none was there (a file is never created empty).
    """
    text = current or ""
    lines = text.splitlines(keepends=True)
    person, at, repaired = _person_part(lines)
    refused = _over("".join(person))  # the person's own text: ours never makes it worse
    if refused:
        return Splice(text, False, refused=refused)
    budget = max(0, min(max_lines, MAX_SECTION_LINES) - 3)
    chosen = [b.replace("\n", " ") for b in bullets[:budget]]
    while chosen:
        block = "\n".join([BEGIN, HEADING, *chosen, END]) + "\n"
        head = person[:at]
        if head and not head[-1].endswith(("\n", "\r")):
            head = [*head[:-1], head[-1] + "\n"]
        # appended after the person's text: one blank line between (kept as theirs after)
        sep = ["\n"] if at == len(person) and head and head[-1].strip() else []
        new = "".join([*head, *sep, block, *person[at:]])
        if len(block.encode()) <= MAX_SECTION_BYTES and not _over(new):
            return Splice(new, new != text, len(chosen), repaired)
        chosen.pop()  # the lowest-ranked line goes until the file fits
    if not person and not current:
        return Splice(text, False)
    new = "".join(person)
    return Splice(new, new != text, 0, repaired)
