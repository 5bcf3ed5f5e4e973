"""The recall block: what a new session is told, ranked, bounded, and unforgeable (stdlib only).

The block is plain text between two marker lines, ``<reflect-jobs-context>`` and
``</reflect-jobs-context>``, each learning on one line with its id so an agent can ask for
the full note (the MCP ``get`` tool, ``reflect-jobs search``). The cascade drops everything
between the markers wherever it meets them later (``transcripts/noise.py``), so what we
inject is never learned again. Every note string is made inert first (:func:`inert`):
whitespace (newlines included) collapsed and ``<``/``>`` replaced, so no title, rule or
path can close the block early, open a second one, or smuggle markup into the agent's
context.
"""

from __future__ import annotations

import json
import math
import re
import time

OPEN = "<reflect-jobs-context>"
CLOSE = "</reflect-jobs-context>"
MARKER_TAG = "reflect-jobs-context"
DEFAULT_MAX_CHARS = 6000
MAX_ITEM_CHARS = 360
REPO_ITEMS = 10
GLOBAL_ITEMS = 6
#: The share of the block (after its fixed lines) the open reflection items may take at most.
ITEMS_SHARE = 1 / 3
RECENCY_DAYS = 90.0
FORMATS = ("text", "claude", "codex", "copilot")
_CONTROL = re.compile(r"[\x00-\x1f\x7f\u2028\u2029]")


def inert(text: object, limit: int = MAX_ITEM_CHARS) -> str:
    """A note string made safe to place inside the block.

    Args:
        text: Any value from a note (``None`` is ``""``).
        limit: Cut to this many characters (an ellipsis marks the cut).

    Returns:
        One line: control characters and newlines become spaces, runs of whitespace one
        space, ``<`` and ``>`` become ``‹`` and ``›`` (so neither marker nor any tag can
        appear), then cut to ``limit``.
    """
    s = "" if text is None else str(text)
    s = _CONTROL.sub(" ", s).replace("<", "\u2039").replace(">", "\u203a")
    s = " ".join(s.split())
    return s if len(s) <= limit else s[: max(limit - 1, 0)].rstrip() + "\u2026"


def rank_score(row: dict, now: float | None = None) -> float:
    """How strongly a learning should be told: proof, then confidence, then recency.

    Args:
        row: A context-store row (``proof_count``, ``confidence``, ``updated_ts``).
        now: The current Unix time (default ``time.time()``).

    Returns:
        ``2·ln(1+proof) + confidence + 0.5·e^(−age/90 days)``: a learning confirmed by three
        sessions outranks a fresh one seen once; among equals the newer wins.
    """
    now = time.time() if now is None else now
    proof = max(int(row.get("proof_count") or 1), 1)
    age_days = max(now - float(row.get("updated_ts") or 0.0), 0.0) / 86400.0
    return (
        2.0 * math.log1p(proof)
        + float(row.get("confidence") or 0.0)
        + 0.5 * math.exp(-age_days / RECENCY_DAYS)
    )


def ranked(rows: list[dict], now: float | None = None) -> list[dict]:
    """Rows best first by :func:`rank_score` (ties by id, so the order is stable).

    Args:
        rows: Context-store rows.
        now: The current Unix time.

    Returns:
        A new sorted list.
    """
    return sorted(rows, key=lambda r: (-rank_score(r, now), str(r.get("id"))))


def item_line(row: dict) -> str:
    """One learning as one line: ``- [id] title — rule``.

    Args:
        row: A context-store row.

    Returns:
        The line, at most about :data:`MAX_ITEM_CHARS` characters, inert.
    """
    title = inert(row.get("title"), 160)
    rule = inert(row.get("rule") or row.get("key_insight"), MAX_ITEM_CHARS - len(title))
    ident = inert(row.get("id"), 120)
    proof = int(row.get("proof_count") or 1)
    seen = f" (confirmed {proof}×)" if proof > 1 else ""
    body = f"{title} — {rule}" if rule and rule.lower() != title.lower() else title
    return f"- [{ident}] {body}{seen}"


def open_item_line(item: dict) -> str:
    """One open reflection item as one line: ``- #id [kind] title — body excerpt``.

    Args:
        item: ``{"id", "kind", "title", "body"}`` (:func:`reflect_jobs.recall.items.open_items`).

    Returns:
        The line, inert (an item's title is as hostile as a note's), at most about
        :data:`MAX_ITEM_CHARS` characters.
    """
    ident = inert(item.get("id"), 40)
    kind = inert(item.get("kind"), 20)
    title = inert(item.get("title"), 200)
    body = inert(item.get("body"), max(MAX_ITEM_CHARS - len(title) - len(ident) - 16, 0))
    return f"- {ident} [{kind}] {title}" + (f" — {body}" if body else "")


def _items_section(items: list[dict], total: int, budget: int) -> tuple[list[str], int]:
    """The open-items lines that fit ``budget`` characters, with their cost."""
    if not items:
        return [], 0
    title = "## Open items in this repository (close with evidence: `reflections done ID --note …`)"
    lines = [title]
    cost = len(title) + 1
    shown = 0
    for item in items:
        line = open_item_line(item)
        if cost + len(line) + 1 > budget:
            continue
        lines.append(line)
        cost += len(line) + 1
        shown += 1
    if not shown:
        return [], 0
    if total > shown:
        more = f"… and {total - shown} more open: `reflections list`"
        if cost + len(more) + 1 <= budget:
            lines.append(more)
            cost += len(more) + 1
    return lines, cost


def render(
    repo_key: str | None,
    repo: list[dict],
    general: list[dict],
    *,
    max_chars: int = DEFAULT_MAX_CHARS,
    heading: str = "Learnings from your earlier sessions (reflect-jobs)",
    items: list[dict] | None = None,
    items_total: int | None = None,
) -> str:
    """The whole block within ``max_chars``, or ``""`` when there is nothing to tell.

    The repository's open reflection items come first (handoffs first, newest first, each
    with its ``#id``), within at most :data:`ITEMS_SHARE` of the budget after the fixed
    lines, so a long to-do list cannot crowd out every learning; whatever they leave unused
    goes to the learnings, and with no learnings to tell the items may use all of it.
    Then repository learnings (the ones no general rule covers), then the global ones; an
    entry that does not fit is skipped and a shorter later one may still fit.

    Args:
        repo_key: The repository's key, named in its section heading; ``None`` for none.
        repo: Ranked rows of the repository's learnings.
        general: Ranked rows of the global learnings.
        max_chars: The budget for the whole block, markers included.
        heading: The first line inside the block.
        items: The repository's open items in context order (``None`` or empty: none).
        items_total: How many items are open in all (default ``len(items)``).

    Returns:
        The block (marker lines included, newline-terminated) or ``""``.
    """
    head = [
        OPEN,
        inert(heading, 200),
        "Each line is one learning; ask for a full note by its id "
        "(MCP tool `get`, or `reflect-jobs search`).",
    ]
    tail = [CLOSE]
    used = sum(len(x) + 1 for x in head + tail)
    items = items or []
    item_lines, item_cost = _items_section(
        items,
        len(items) if items_total is None else items_total,
        int(max(max_chars - used, 0) * (ITEMS_SHARE if repo or general else 1.0)),
    )
    lines: list[str] = list(item_lines)
    used += item_cost
    told = len(item_lines)
    for title, rows, cap in (
        (f"## This repository ({inert(repo_key, 200)})" if repo_key else "", repo, REPO_ITEMS),
        ("## General", general, GLOBAL_ITEMS),
    ):
        if not rows or not title:
            continue
        section: list[str] = []
        cost = len(title) + 1
        for row in rows[:cap]:
            line = item_line(row)
            if used + cost + len(line) + 1 > max_chars:
                continue
            section.append(line)
            cost += len(line) + 1
        if section:
            lines += [title, *section]
            used += cost
            told += len(section)
    if not told:
        return ""
    return "\n".join(head + lines + tail) + "\n"


def hook_json(event: str, block: str) -> str:
    """The Claude Code / Codex hook answer carrying the block.

    Args:
        event: ``SessionStart`` or ``UserPromptSubmit``.
        block: The block text.

    Returns:
        ``{"hookSpecificOutput": {"hookEventName": event, "additionalContext": block}}``
        as one JSON line.
    """
    return json.dumps(
        {"hookSpecificOutput": {"hookEventName": event, "additionalContext": block}},
        ensure_ascii=False,
    )


def formatted(block: str, fmt: str, event: str = "SessionStart") -> str:
    """The block in the shape one consumer reads.

    Args:
        block: The block text (may be ``""``).
        fmt: ``text`` (the block), ``claude`` / ``codex`` (their hook JSON) or ``copilot``
            (``{"additionalContext": …}``: the Copilot SDK's shape, which Copilot CLI
            injects from a sessionStart hook since 1.0.11, ARCHITECTURE §13).
        event: The hook event named in the JSON shapes.

    Returns:
        The text to print; ``""`` when ``block`` is empty.

    Raises:
        ValueError: Unknown ``fmt``.
    """
    if fmt not in FORMATS:
        raise ValueError(f"unknown format {fmt!r}; expected one of {', '.join(FORMATS)}")
    if not block:
        return ""
    if fmt == "text":
        return block
    if fmt == "copilot":
        return json.dumps({"additionalContext": block}, ensure_ascii=False)
    return hook_json(event, block)


# --- per-prompt recall (REFLECT_RECALL_ON_PROMPT=1) ----------------------------------------

PROMPT_MAX_ITEMS = 3
PROMPT_MIN_TERMS = 2
_WORD = re.compile(r"[A-Za-z][A-Za-z0-9_]{2,}")
STOPWORDS = frozenset(
    [
        "about",
        "above",
        "after",
        "again",
        "against",
        "also",
        "always",
        "another",
        "because",
        "been",
        "before",
        "being",
        "below",
        "between",
        "both",
        "cannot",
        "could",
        "does",
        "doing",
        "down",
        "during",
        "each",
        "every",
        "from",
        "further",
        "have",
        "having",
        "here",
        "into",
        "itself",
        "just",
        "more",
        "most",
        "must",
        "need",
        "never",
        "only",
        "other",
        "ought",
        "over",
        "please",
        "same",
        "should",
        "some",
        "such",
        "than",
        "that",
        "their",
        "theirs",
        "them",
        "then",
        "there",
        "these",
        "they",
        "this",
        "those",
        "through",
        "under",
        "until",
        "very",
        "want",
        "what",
        "when",
        "where",
        "which",
        "while",
        "will",
        "with",
        "would",
        "your",
        "yours",
        "the",
        "and",
        "for",
        "are",
        "but",
        "not",
        "you",
        "all",
        "any",
        "can",
        "had",
        "her",
        "was",
        "one",
        "our",
        "out",
        "has",
        "his",
        "how",
        "its",
        "let",
        "may",
        "new",
        "now",
        "old",
        "see",
        "two",
        "way",
        "who",
        "did",
        "get",
        "got",
        "use",
        "using",
        "make",
        "sure",
        "like",
        "thing",
        "things",
        "code",
        "file",
        "files",
        "fix",
        "test",
        "tests",
        "work",
        "working",
        "run",
        "running",
        "add",
        "change",
    ]
)


def prompt_terms(prompt: str, limit: int = 16) -> list[str]:
    """The distinct content words of a prompt, lower-cased, in order.

    Args:
        prompt: The user's prompt.
        limit: At most this many terms.

    Returns:
        Words of 3+ characters that are not :data:`STOPWORDS`.
    """
    out: dict[str, None] = {}
    for word in _WORD.findall(prompt[:4000]):
        w = word.lower()
        if w not in STOPWORDS:
            out[w] = None
        if len(out) >= limit:
            break
    return list(out)


def fts_query(terms: list[str]) -> str | None:
    """An FTS5 expression OR-ing each term as a quoted phrase (no user text is syntax).

    Args:
        terms: From :func:`prompt_terms`.

    Returns:
        The expression, or ``None`` for no terms.
    """
    if not terms:
        return None
    return " OR ".join('"' + t.replace('"', '""') + '"' for t in terms)


def _stem(word: str) -> str:
    return word[:5] if len(word) > 5 else word


def matched_terms(terms: list[str], row: dict) -> int:
    """How many distinct prompt terms a learning's title/rule/insight contain (crude stems).

    Args:
        terms: From :func:`prompt_terms`.
        row: A context-store row.

    Returns:
        The count; a term matches a note word sharing its first five letters.
    """
    text = " ".join(str(row.get(k) or "") for k in ("title", "rule", "key_insight"))
    stems = {_stem(w.lower()) for w in _WORD.findall(text)}
    return sum(1 for t in terms if _stem(t) in stems)


def strong_matches(terms: list[str], rows: list[dict], repo_key: str | None) -> list[dict]:
    """The learnings a prompt matches strongly enough to be worth interrupting for.

    Strong means: at least :data:`PROMPT_MIN_TERMS` distinct prompt terms appear in the
    learning's title, rule or key insight, and it is global or this repository's.

    Args:
        terms: From :func:`prompt_terms`.
        rows: FTS candidates, best first.
        repo_key: The session's repository key, or ``None``.

    Returns:
        At most :data:`PROMPT_MAX_ITEMS` rows.
    """
    out = []
    for row in rows:
        if row.get("scope") == "repo" and row.get("repo_key") != repo_key:
            continue
        if matched_terms(terms, row) >= PROMPT_MIN_TERMS:
            out.append(row)
        if len(out) >= PROMPT_MAX_ITEMS:
            break
    return out
