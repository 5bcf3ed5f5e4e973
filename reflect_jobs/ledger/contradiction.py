"""Contradiction demotion: a new learning whose title negates a similar older one demotes it.

Seed 003's rule, kept literally: the two titles' word sets agree with Jaccard above 0.9
once negation markers are set aside, and a negation marker is in exactly one of them. "Use
pnpm for installs" and "Do not use pnpm for installs" contradict; "Use pnpm for installs"
and "Use pnpm for the installs" do not (they say the same: the semantic-twin check makes the
second one proof of the first). The older learning is demoted in the ledger — ``is_latest =
0``, ``status = superseded``, ``superseded_by`` the new id — after a history snapshot (its
``status_change`` row names the learning that contradicted it), and its note follows
(``pipeline/note_edits.py``). Without this the older advice kept being told beside the new
one, and a session was told both "do X" and "never do X".

The title logic is pure (:func:`title_words`, :func:`contradicts`); :func:`demote` reads and
changes ledger rows in the caller's transaction (the add stage's commit, or ``reflect-jobs
add``'s).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from sqlalchemy import or_, select
from sqlalchemy.orm import Session

from ..lifecycle import ACTIVE, PROPOSED, SUPERSEDED
from .learnings import retire
from .models import Learning

#: Above this Jaccard similarity of the title words (markers aside) two titles are "similar".
JACCARD_ABOVE = 0.9
#: Words that negate what follows. ``n't`` contractions are matched by their ending.
NEGATIONS = frozenset(
    {"not", "no", "never", "none", "nothing", "neither", "nor", "cannot", "avoid", "without",
     "dont", "doesnt", "didnt", "isnt", "arent", "wasnt", "werent", "shouldnt", "wont",
     "mustnt", "cant", "couldnt", "wouldnt"}
)  # fmt: skip
#: Auxiliaries a negation brings along ("do not use" vs "use"): not content, set aside too.
AUXILIARIES = frozenset({"do", "does", "did"})
#: At most this many older learnings are compared with one new title (the longest title word
#: narrows them in SQL first).
MAX_CANDIDATES = 200
_WORD = re.compile(r"[a-z0-9_]+(?:['’][a-z]+)?")


@dataclass(frozen=True)
class TitleWords:
    """A title's content words and whether it carries a negation marker."""

    words: frozenset[str]
    negated: bool


def title_words(title: str) -> TitleWords:
    """The words two titles are compared on, and whether the title negates.

    Args:
        title: A learning's title.

    Returns:
        Lower-case words without the negation markers and the auxiliaries they bring
        (``do``/``does``/``did``); ``negated`` when a marker (``not``, ``never``, ``don't``…)
        was among them.
    """
    words: set[str] = set()
    negated = False
    for raw in _WORD.findall(str(title or "").lower()):
        word = raw.replace("’", "'")
        flat = word.replace("'", "")
        if flat in NEGATIONS or word.endswith("n't"):
            negated = True
        elif flat not in AUXILIARIES:
            words.add(flat)
    return TitleWords(frozenset(words), negated)


def jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    """The Jaccard similarity of two word sets.

    Args:
        a: One title's words.
        b: The other's.

    Returns:
        |a ∩ b| / |a ∪ b|; 0 for two empty sets (nothing to compare).
    """
    union = a | b
    return len(a & b) / len(union) if union else 0.0


def contradicts(new_title: str, old_title: str) -> bool:
    """Whether ``new_title`` negates ``old_title`` (seed 003).

    Args:
        new_title: The new learning's title.
        old_title: An older learning's title.

    Returns:
        True when their words (markers aside) have Jaccard > :data:`JACCARD_ABOVE` and a
        negation marker is in exactly one of them.
    """
    a, b = title_words(new_title), title_words(old_title)
    return a.negated != b.negated and jaccard(a.words, b.words) > JACCARD_ABOVE


def _candidates(
    session: Session, new_id: str, words: TitleWords, repo_key: str | None
) -> list[Learning]:
    """Older learnings in circulation that might be contradicted: same repository or global,
    narrowed in SQL by the new title's longest word (Jaccard > 0.9 needs it in both)."""
    if not words.words:
        return []
    longest = max(words.words, key=lambda w: (len(w), w))
    where = [
        Learning.id != new_id,
        Learning.status.in_((ACTIVE, PROPOSED)),
        Learning.is_latest.is_(True),
        Learning.title.ilike(f"%{longest}%"),
    ]
    scope = Learning.scope == "global"
    if repo_key:
        scope = or_(scope, Learning.repo_key == repo_key)
    return list(
        session.scalars(
            select(Learning)
            .where(*where, scope)
            .order_by(Learning.created_at, Learning.id)
            .limit(MAX_CANDIDATES)
        )
    )


def contradicted(session: Session, new_id: str, title: str, repo_key: str | None) -> list[str]:
    """The ids of the older learnings ``title`` contradicts (nothing is changed).

    Args:
        session: An open ledger session.
        new_id: The new learning's id (never its own contradiction).
        title: The new learning's title.
        repo_key: Its repository (``None`` for a global learning: only global ones are
            compared).

    Returns:
        The ids, oldest first.
    """
    words = title_words(title)
    return [
        row.id
        for row in _candidates(session, new_id, words, repo_key)
        if contradicts(title, row.title)
    ]


def demote(session: Session, old_id: str, *, new_id: str, job_id: str | None) -> bool:
    """Demote ``old_id``: ``is_latest = 0``, ``superseded``, ``superseded_by = new_id``.

    The history snapshot comes first (``learnings.retire``); its reason names the learning
    that contradicted it, so ``restore`` and a person reading the history know why.

    Args:
        session: An open write session (the caller's transaction).
        old_id: The older learning.
        new_id: The learning whose title negates it.
        job_id: The add job, or ``None`` for a person's ``reflect-jobs add``.

    Returns:
        True when the row changed (False: gone or already out of circulation).
    """
    reason = f"contradicted by {new_id} (its title negates this one's)"
    if not retire(
        session, old_id, reason=reason, status=SUPERSEDED, superseded_by=new_id, job_id=job_id
    ):
        return False
    row = session.get(Learning, old_id)
    assert row is not None
    row.is_latest = False
    return True


__all__ = ["JACCARD_ABOVE", "TitleWords", "contradicted", "contradicts", "demote", "title_words"]
