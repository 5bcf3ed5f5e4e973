"""The nightly report: one dated markdown file, per-repository sections, indexed for search.

``$GLOBAL_LEARNINGS_PATH/reports/<yyyy-mm-dd>.md`` (0600) is rewritten whole by every run of
that day (so a re-run or a resumed run ends in the same file), and its sections go into a
small FTS5 index, ``index/reports.db`` (derived: rebuilt from the files when damaged), which
``reflections search`` asks beside the items and the learnings. The diary
(``reports/diary/<repo>.md``) gets one dated paragraph per run, replaced when the day's
paragraph is already the last one.
"""

from __future__ import annotations

import contextlib
import re
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from reflect_jobs.fsio import atomic_write
from reflect_jobs.recall.block import inert

__all__ = ["RepoSection", "index_report", "render", "search_reports", "write_diary", "write_report"]


@dataclass
class RepoSection:
    """What the nightly pass found and did for one repository."""

    key: str
    since: str
    sessions: list[str] = field(default_factory=list)
    repeated: list[dict[str, Any]] = field(default_factory=list)
    unfinished: list[dict[str, Any]] = field(default_factory=list)
    candidates: list[dict[str, Any]] = field(default_factory=list)
    memory: dict[str, Any] = field(default_factory=dict)
    reverts: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    observations: list[str] = field(default_factory=list)

    def markdown(self) -> str:
        """The section as markdown (every value from a session made inert: one line, no tags).

        Returns:
            The section, starting with ``## <repository key>``.
        """
        out = [f"## {inert(self.key, 300)}", ""]
        out.append(f"Sessions since {self.since}: {len(self.sessions)}")
        out += ["", "### Repeated corrections"]
        out += [
            f"- {inert(r['title'], 160)} (`{', '.join(r['ids'])}`): {r['how']} in "
            f"{len(r['sessions'])} sessions: {', '.join(inert(s, 80) for s in r['sessions'])}"
            for r in self.repeated
        ] or ["- none"]
        out += ["", "### Unfinished work"]
        out += [
            f"- session {inert(u['session'], 80)} ({u['harness']}): {', '.join(u['reasons'])}"
            + (f" → item {u['item']}" if u.get("item") else "")
            for u in self.unfinished
        ] or ["- none"]
        out += ["", "### Memory candidates"]
        out += [
            f"- {inert(c['title'], 160)} (`{c['id']}`, proof {c['proof_count']})"
            for c in self.candidates
        ] or ["- none"]
        out += ["", "### MEMORY.md"]
        m = self.memory
        line = f"- {m.get('status', 'skipped')}"
        if m.get("path"):
            line += f": {m['path']}"
        if m.get("ids") is not None and m.get("status") in ("written", "unchanged", "dry_run"):
            line += f" ({len(m['ids'])} learnings)"
        if m.get("detail"):
            line += f" — {m['detail']}"
        out.append(line)
        if m.get("repaired"):
            out.append(f"- repaired: {m['repaired']}")
        out += ["", "### Reverts"]
        out += [
            f"- commit {r['commit']} (session {inert(r['session'], 80)}) reverted by "
            f"{r['reverted_by'][:12]}: demoted {', '.join(r['ids']) or 'nothing'}"
            for r in self.reverts
        ] or ["- none"]
        if self.observations:
            out += ["", "### Observations (weekly synthesis)"]
            out += [f"- {inert(o, 300)}" for o in self.observations]
        if self.notes:
            out += ["", "### Notes"]
            out += [f"- {inert(n, 300)}" for n in self.notes]
        return "\n".join(out) + "\n"


def render(date: str, sections: list[RepoSection]) -> str:
    """The whole report for ``date`` (repositories sorted by key).

    Args:
        date: ``yyyy-mm-dd``.
        sections: One per repository.

    Returns:
        The markdown.
    """
    head = f"# Nightly report {date}\n\n"
    if not sections:
        return head + "No repository had sessions in the window.\n"
    return head + "\n".join(s.markdown() for s in sorted(sections, key=lambda s: s.key))


def write_report(kb_path: Path, date: str, text: str) -> Path:
    """Write ``reports/<date>.md`` (0600, in a 0700 directory) and index its sections.

    Args:
        kb_path: The KB.
        date: ``yyyy-mm-dd``.
        text: The report.

    Returns:
        The report's path.
    """
    reports = kb_path / "reports"
    reports.mkdir(parents=True, exist_ok=True, mode=0o700)
    path = reports / f"{date}.md"
    atomic_write(path, text, mode=0o600)
    index_report(kb_path, date, text)
    return path


def _db(kb_path: Path) -> sqlite3.Connection:
    index = kb_path / "index"
    index.mkdir(parents=True, exist_ok=True, mode=0o700)
    path = index / "reports.db"
    if not path.exists():
        path.touch(mode=0o600)
    conn = sqlite3.connect(path)
    conn.execute(
        "CREATE VIRTUAL TABLE IF NOT EXISTS sections USING fts5(date UNINDEXED, repo, body, "
        "tokenize='porter unicode61 remove_diacritics 2')"
    )
    return conn


def index_report(kb_path: Path, date: str, text: str) -> None:
    """Replace ``date``'s rows in ``index/reports.db`` with the report's sections.

    Args:
        kb_path: The KB.
        date: The report's day.
        text: The report.
    """
    parts = re.split(r"(?m)^## ", text)
    rows = [(date, p.split("\n", 1)[0].strip(), "## " + p) for p in parts[1:]]
    for attempt in (1, 2):
        try:
            conn = _db(kb_path)
            with contextlib.closing(conn), conn:
                conn.execute("DELETE FROM sections WHERE date = ?", (date,))
                conn.executemany("INSERT INTO sections VALUES (?, ?, ?)", rows)
            return
        except sqlite3.DatabaseError:
            if attempt == 2:
                raise
            (kb_path / "index" / "reports.db").unlink(missing_ok=True)  # derived: rebuild
            for old in sorted((kb_path / "reports").glob("*.md")):
                if old.stem != date:
                    index_report(kb_path, old.stem, old.read_text(encoding="utf-8"))


def search_reports(kb_path: Path, query: str, k: int = 5) -> list[dict[str, str]]:
    """Report sections matching ``query`` (every word a quoted phrase, OR-ed), best first.

    Args:
        kb_path: The KB.
        query: Free text.
        k: At most this many.

    Returns:
        ``[{"date", "repo", "path", "snippet"}]``; empty without an index.
    """
    path = kb_path / "index" / "reports.db"
    words = [w for w in re.findall(r"\w+", query)][:32]
    if not path.is_file() or not words:
        return []
    match = " OR ".join('"' + w.replace('"', '""') + '"' for w in words)
    try:
        with contextlib.closing(sqlite3.connect(path)) as conn:
            rows = conn.execute(
                "SELECT date, repo, snippet(sections, 2, '', '', '…', 12) FROM sections "
                "WHERE sections MATCH ? ORDER BY rank LIMIT ?",
                (match, k),
            ).fetchall()
    except sqlite3.DatabaseError:
        return []
    return [
        {"date": d, "repo": r, "path": str(kb_path / "reports" / f"{d}.md"), "snippet": s}
        for d, r, s in rows
    ]


def write_diary(kb_path: Path, name: str, date: str, paragraph: str) -> Path:
    """Append the day's paragraph to ``reports/diary/<name>.md`` (replacing today's, if last).

    Args:
        kb_path: The KB.
        name: The repository's file-safe name (``repo.Repo.name``).
        date: ``yyyy-mm-dd``.
        paragraph: One short narrative paragraph.

    Returns:
        The diary's path.
    """
    diary = kb_path / "reports" / "diary"
    diary.mkdir(parents=True, exist_ok=True, mode=0o700)
    path = diary / f"{name}.md"
    old = path.read_text(encoding="utf-8") if path.is_file() else ""
    head = f"## {date}\n"
    cut = old.rfind(head)
    if cut != -1 and "\n## " not in old[cut + len(head) :]:
        old = old[:cut]  # today's paragraph is the last one: replaced, not repeated
    text = old + head + paragraph.strip() + "\n\n"
    atomic_write(path, text, mode=0o600)
    return path
