"""Belief revision: which existing learnings a slice may UPDATE or DELETE (SPEC-drain §3.5).

The block lists each related learning by its KB id (``lrn-<slug>-<hash6>``), the same id
format the writer's whitelist accepts — the original listed ledger uuids while its writer
only accepted ``lrn-`` ids, so no UPDATE/DELETE ever landed (§10 B1). Our writer executes
the actions itself, so the block names no shell command.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable

from reflect_jobs.cascade.model import RelatedCandidate, Signal
from reflect_jobs.lifecycle import is_retired
from reflect_jobs.redaction import redact

REVISION_MARKER = "\n\n## Related existing learnings (belief revision)\n"
MIN_SCORE = 0.5
_TOKEN = re.compile(r"[a-z0-9_+./-]+")
STOPWORDS = frozenset(
    [
        "a",
        "an",
        "the",
        "and",
        "or",
        "but",
        "if",
        "then",
        "else",
        "of",
        "to",
        "in",
        "on",
        "at",
        "by",
        "for",
        "with",
        "from",
        "as",
        "is",
        "are",
        "was",
        "were",
        "be",
        "been",
        "it",
        "this",
        "that",
        "these",
        "those",
        "not",
        "no",
        "do",
        "does",
        "did",
        "you",
        "we",
        "i",
        "they",
        "he",
        "she",
        "use",
        "using",
    ]
)


def tokens(text: str) -> set[str]:
    """Content tokens: lowercased ``[a-z0-9_+./-]+`` runs of ≥2 chars, minus stopwords.

    Args:
        text: A learning title or a signal line.

    Returns:
        The distinct tokens.
    """
    return {t for t in _TOKEN.findall(text.lower()) if len(t) >= 2 and t not in STOPWORDS}


def related_learnings(
    signals: Iterable[Signal], candidates: list[RelatedCandidate], limit: int = 5
) -> list[tuple[RelatedCandidate, float]]:
    """Candidates whose title overlaps a signal (overlap coefficient ≥ 0.5), best first.

    score = max over signals of |title ∩ signal| / min(|title|, |signal|); ties go to the
    older learning (it has had more chance to collect proof). Retired learnings never come
    back: a DELETEd rule must not be offered for UPDATE.

    Args:
        signals: The transcript's signals.
        candidates: Ledger learnings, any status (retired ones are skipped here).
        limit: The most pairs returned; 0 or less returns none.

    Returns:
        ``(candidate, score)`` pairs with the score rounded to 4 decimals, in [0.5, 1],
        best first, ties broken by ascending ``created_at``.
    """
    signal_sets = [s_tokens for s in signals if (s_tokens := tokens(s.text))]
    if not signal_sets or limit <= 0:
        return []
    scored: list[tuple[RelatedCandidate, float]] = []
    for cand in candidates:
        if is_retired(cand.status):
            continue
        title = tokens(cand.title)
        if not title:
            continue
        best = max(len(title & sig) / min(len(title), len(sig)) for sig in signal_sets)
        if best >= MIN_SCORE:
            scored.append((cand, round(best, 4)))
    scored.sort(key=lambda pair: (-pair[1], pair[0].created_at))
    return scored[:limit]


_CONTRACT = """\
These learnings already exist in the knowledge base and look related to this session.
Emit exactly one action per finding in your {"actions": [...]} answer:
- {"action": "UPDATE", "target_id": "<id>", "reason": "<one sentence>", "evidence":
  "<verbatim quote of this session>"} when a finding confirms an existing learning (adds
  proof and this transcript as a source).
- {"action": "DELETE", "target_id": "<id>", "reason": "<one sentence>"} only when this
  session directly contradicts or supersedes it (it is retired, not erased). Be conservative.
- {"action": "CREATE", "learning": {..., "evidence": "<verbatim quote>"}} only for a
  genuinely new finding.
PREFER UPDATE OVER CREATE. Match the specific rule, not the topic.
target_id must be one of the ids listed below, copied exactly; any other id is ignored.
"""


def revision_block(related: list[tuple[RelatedCandidate, float]]) -> str:
    """The block appended after the slice; ``""`` when nothing is related.

    Args:
        related: ``(candidate, score)`` pairs in the order to list them.

    Returns:
        ``REVISION_MARKER``, the UPDATE/DELETE/CREATE contract and a JSON listing of each
        candidate's id, title, category, status, proof count, creation time and score.
    """
    if not related:
        return ""
    items = [
        {
            "id": cand.id,
            # Titles come from the ledger; one recorded before answers were redacted must
            # not carry a secret into the next prompt.
            "title": redact(cand.title),
            "category": redact(cand.category),
            "status": cand.status,
            "proof_count": cand.proof_count,
            "created_at": cand.created_at,
            "score": score,
        }
        for cand, score in related
    ]
    listing = json.dumps(items, indent=2, sort_keys=True, ensure_ascii=False)
    return f"{REVISION_MARKER}{_CONTRACT}\nRelated learnings:\n{listing}\n"
