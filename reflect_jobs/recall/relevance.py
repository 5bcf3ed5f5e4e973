"""Which learnings to tell: the block's fitting globals and the task's matches (stdlib only).

Two questions, both answered on the hook's path (no heavy import):

* **Which global learnings fit this repository?** (:func:`fitting_globals`) Only those whose
  ``applies_to`` fits the repository's profile (``recall/stack.py``, ``recall/profile.py``),
  ranked by fit — a rule about the repository's framework before one about its language,
  before one about anything — then by strength. None rather than unrelated ones.
* **Which learnings does this prompt need?** (:func:`rank_for_prompt`) The repository's own
  learnings, the fitting globals and the open items, scored against the prompt's content
  words with inverse document frequencies from the context store (a word every note has
  says nothing; an identifier one note has says a lot), the title and rule weighing more
  than the insight. Only candidates above a relevance floor are told, at most three, and
  never one the session was already told (``recall/session_told.py``). When the running worker answers
  within a strict budget its embedding similarity joins the score (``recall/warm_rank.py``);
  otherwise this lexical score decides alone.
"""

from __future__ import annotations

import math
import sqlite3

from . import stack

#: The prompt read for terms: its head and its tail (a 100 KB paste costs what 8 KB does).
PROMPT_HEAD = 6000
PROMPT_TAIL = 2000
MAX_TERMS = 24
#: Told at most per prompt.
PROMPT_MAX = 3
#: Global learnings read for fitting, strongest first (bounds the hook at any KB size).
GLOBAL_SCAN = 3000
#: The fit of a rule about a side language: below any rule about the main language (1.0),
#: above a rule for any repository (``stack.UNIVERSAL_FIT``), even with its framework.
SIDE_FIT = 0.1
#: The relevance floor and its shape (tuned on the dev split of bench_recall_eval; a grid
#: of these and the cosine settings below: `bench/recall_eval_prompt_tune.py`).
FLOOR = 1.1
MIN_MATCHED = 2
#: One matched term this rare (idf) is enough on its own (an identifier, a tool's name).
RARE_IDF = 0.8
#: The least a matched term weighs: in a small store most notes share the words of its
#: one topic, and idf alone would then say nothing ever matches. A third of the floor, so
#: three such terms pass it (at 2,390 notes the same dev figures as 0.3).
MIN_WEIGHT = FLOOR / 3
#: A candidate must score at least this share of the best candidate's score.
RELATIVE = 0.9
#: The worker's cosine: what it adds above its base, and what passes on its own (tuned on
#: dev with in-domain prompts that need nothing: 6 above 0.5 told more, and more precisely,
#: than 2.5 above 0.3 — hit 0.896 → 0.910, precision 0.833 → 0.884).
SEM_WEIGHT = 6.0
SEM_BASE = 0.5
SEM_ALONE = 0.6
#: Ranking (not the floor) multiplies a score by ``1 + TITLE_SHARE × the share of the
#: title's words the prompt names`` (:func:`title_share`; tuned on dev with RELATIVE).
TITLE_SHARE = 1.0
#: The repository's own learnings over a fitting global at equal evidence.
OWN_BOOST = 1.1
#: Notes read and scored per prompt at most (those holding the most term weight).
CANDIDATES = 300
#: What each field of a learning weighs when it holds a prompt's term: the title and rule say
#: what the learning is, the insight why; ``applies_when`` names the tasks it matters in, in
#: a person's words (the writer's, ``writer/prompt.py``) — the words a later prompt uses.
FIELD_WEIGHT = {"title": 1.0, "rule": 1.0, "key_insight": 0.6, "applies_when": 0.8}

# --- the block's general section ------------------------------------------------------------


def fitting_globals(
    rows: list[dict],
    profile_terms: list[str],
    rank_score,
    now: float | None = None,
    *,
    per_fit: int = 40,
    side: frozenset[str] = frozenset(),
) -> list[dict]:
    """The global learnings that fit a repository, best fit first, then strongest.

    A learning whose languages are all the repository's side languages
    (``profile.side_languages``) fits :data:`SIDE_FIT` as well: a C++ project whose
    conversion scripts use numpy is told its C++ rules before the numpy ones.

    Args:
        rows: Global context-store rows, strongest first (``applies_to`` a space-separated
            string).
        profile_terms: The repository's terms (:func:`reflect_jobs.recall.profile.profile_terms`).
        rank_score: The strength score (:func:`reflect_jobs.recall.block.rank_score`).
        now: The current time (recency).
        side: The repository's side languages.
        per_fit: Rows kept per fit value before the fine ranking (the rows come strongest
            first, so thousands of globals cost one pass, not a sort of all of them).

    Returns:
        The fitting rows, each with ``fit`` set; a row about another stack is left out.
    """
    profile = list(profile_terms)
    fits: dict[str, float | None] = {}
    buckets: dict[float, list[dict]] = {}
    for row in rows:
        key = str(row.get("applies_to") or "")
        if key not in fits:
            terms = stack.loads(key)
            fitted = stack.fit(terms, profile)
            langs = [t for t in terms if stack.KIND.get(t) == stack.LANGUAGE]
            if fitted is not None and langs and all(t in side for t in langs):
                fitted *= SIDE_FIT
            fits[key] = fitted
        f = fits[key]
        if f is None:
            continue
        bucket = buckets.setdefault(f, [])
        if len(bucket) < per_fit:
            bucket.append({**row, "fit": f})
    out: list[dict] = []
    for f in sorted(buckets, reverse=True):
        out += sorted(buckets[f], key=lambda r: (-rank_score(r, now), str(r.get("id"))))
    return out


# --- the prompt ------------------------------------------------------------------------------


def prompt_text(prompt: object) -> str:
    """The part of a prompt that is read: its head and tail, bounded.

    Args:
        prompt: The payload's prompt (anything that is not a string reads as empty).

    Returns:
        At most ``PROMPT_HEAD + PROMPT_TAIL`` characters plus a joining space.
    """
    text = prompt if isinstance(prompt, str) else ""
    if len(text) > PROMPT_HEAD + PROMPT_TAIL:
        text = text[:PROMPT_HEAD] + " " + text[-PROMPT_TAIL:]
    return text


def words(text: str) -> list[str]:
    """Lower-cased words of a text, identifiers split too (the code-aware tokeniser's
    words, ``index/tokens.py``: ``retryUntil`` → ``retryuntil``, ``retry``, ``until``).

    Args:
        text: Free text.

    Returns:
        The words, in order, stop words dropped.
    """
    from reflect_jobs.index.tokens import words as token_words

    return token_words(text)


def terms(prompt: object, limit: int = MAX_TERMS) -> list[str]:
    """Distinct content words and compound identifiers of a prompt.

    The words of the code-aware tokeniser (its one stop-word list, ``index/tokens.py``
    :data:`~reflect_jobs.index.tokens.STOP_WORDS`, holds the conversational words too:
    ``please``, ``thanks``…) without one-letter words and numbers; then the compound
    identifiers it finds (``os.environ``, ``find_each``, ``golang.org/x/net``) as written,
    lower-cased.

    Args:
        prompt: The prompt (anything but a string has none).
        limit: At most this many.

    Returns:
        The terms, words first, in order of first appearance.
    """
    from reflect_jobs.index.tokens import identifiers

    text = prompt_text(prompt)
    out: dict[str, None] = {}
    for w in words(text):
        if len(w) < 2 or w.isdigit():
            continue
        out[w] = None
    for ident in identifiers(text):
        out[ident] = None
    return list(out)[:limit]


def is_identifier(term: str) -> bool:
    """Whether a term is code (``find_each``, ``os.environ``, ``UV_INDEX_URL``): one such
    term, rare in the store, is enough to tell a learning; one rare prose word is not.

    Args:
        term: One word of the prompt.

    Returns:
        True when it holds ``_ . / : \\`` or a digit.
    """
    return any(c in term for c in "_./:\\") or any(c.isdigit() for c in term)


def _phrase(term: str) -> str:
    return '"' + term.replace('"', '""') + '"'


def idf(
    conn: sqlite3.Connection, term_list: list[str]
) -> tuple[dict[str, float], dict[str, set[int]]]:
    """Each term's inverse document frequency in the store and the notes that hold it.

    Args:
        conn: A context-store connection.
        term_list: From :func:`terms`.

    Returns:
        ``({term: idf}, {term: {rid…}})`` — BM25's idf, ``ln(1 + (N − df + ½)/(df + ½))``,
        divided by the idf of a term only one note holds, so a weight is in (0, 1] at any
        size of the store (the floor means the same with 20 notes and 20,000); a term no
        note holds is left out (it can match nothing).
    """
    total = int(conn.execute("SELECT count(*) FROM notes").fetchone()[0]) or 1
    top = math.log(1.0 + (total - 0.5) / 1.5)
    weights: dict[str, float] = {}
    holders: dict[str, set[int]] = {}
    for t in term_list:
        try:
            rids = {
                r[0]
                for r in conn.execute(
                    "SELECT rowid FROM notes_fts WHERE notes_fts MATCH ?", (_phrase(t),)
                )
            }
        except sqlite3.OperationalError:
            continue  # a term FTS5 cannot take as a phrase: it matches nothing
        if rids:
            df = len(rids)
            raw = math.log(1.0 + (total - df + 0.5) / (df + 0.5)) / top
            weights[t] = max(raw, MIN_WEIGHT)
            holders[t] = rids
    return weights, holders


def _stem(word: str) -> str:
    """A crude stem for matching a term inside an open item (no index there)."""
    for suffix in ("ing", "ed", "es", "s"):
        if len(word) > len(suffix) + 3 and word.endswith(suffix):
            return word[: -len(suffix)]
    return word


def score_text(weights: dict[str, float], fields: dict[str, str]) -> tuple[float, int]:
    """Score free text (an open item) against weighted terms.

    Args:
        weights: Term → its weight (idf) from the prompt.
        fields: Field name → text (``title``, ``body``…; an unknown field weighs 0.6).

    Returns:
        ``(score, matched terms)``: each matched term's weight times its best field's.
    """
    score, matched = 0.0, 0
    stems = {name: {_stem(w) for w in words(text)} for name, text in fields.items()}
    for t, w in weights.items():
        st = _stem(t)
        best = max((FIELD_WEIGHT.get(n, 0.6) for n, s in stems.items() if st in s), default=0.0)
        if best:
            score += w * best
            matched += 1
    return score, matched


def score_note(weights: dict[str, float], row: dict) -> tuple[float, int]:
    """Score a note the index says holds these terms: each term's idf times the weight of
    the best field it appears in (a substring test of its crude stem: the index already
    said the note holds it, this only says where; the insight's weight when unseen).

    Args:
        weights: Term → its weight (idf) from the prompt.
        row: The context store's row of the note (title, rule, key_insight…).

    Returns:
        ``(score, matched terms)``; every term counts as matched (the index matched it).
    """
    fields = {k: str(row.get(k) or "").lower() for k in FIELD_WEIGHT}
    score = 0.0
    for t, w in weights.items():
        st = _stem(t)
        score += w * max(
            (FIELD_WEIGHT[k] for k, text in fields.items() if st in text),
            default=FIELD_WEIGHT["key_insight"],
        )
    return score, len(weights)


def title_share(term_list: list[str], title: object) -> float:
    """The share of a title's words the prompt names (its crude stems).

    A learning's title says what it is about in a few words; a prompt naming most of them
    is about that learning, one sharing a word or two of a long title with it only brushes
    past (``Test PPR with __NEXT_CACHE_COMPONENTS=true`` for a prompt about a flaky e2e
    test). Ranking by this share too puts the learning the prompt is about before its
    neighbours that share the repository's vocabulary.

    Args:
        term_list: The prompt's terms the note holds.
        title: The note's title.

    Returns:
        In [0, 1]; 0 for an empty title.
    """
    title_words = [_stem(w) for w in words(str(title or "")) if len(w) > 1]
    if not title_words:
        return 0.0
    stems = {_stem(t) for t in term_list}
    return sum(w in stems for w in title_words) / len(title_words)


def rows_for_ids(conn: sqlite3.Connection, ids: list[str]) -> list[int]:
    """The row ids of notes by note id (the worker's similarity answers name notes).

    Args:
        conn: The context store.
        ids: Note ids (unknown ones are left out).

    Returns:
        The ``rid`` of each note found, queried 500 at a time.
    """
    out: list[int] = []
    for i in range(0, len(ids), 500):
        chunk = [str(x) for x in ids[i : i + 500]]
        out += [
            r[0]
            for r in conn.execute(
                f"SELECT rid FROM notes WHERE id IN ({', '.join('?' for _ in chunk)})", chunk
            )
        ]
    return out


def passes(score: float, matched: int, best_idf: float) -> bool:
    """The relevance floor: a clear score from two terms, or one rare identifier.

    Args:
        score: The note's score.
        matched: How many prompt terms it matched.
        best_idf: The highest idf among its matched terms.

    Returns:
        True when the score reaches ``FLOOR`` with ``MIN_MATCHED`` terms or a rare one.
    """
    if round(score, 6) < FLOOR:  # float sums: 3 × (FLOOR / 3) may fall a hair short
        return False
    return matched >= MIN_MATCHED or best_idf >= RARE_IDF


def rank_for_prompt(
    conn: sqlite3.Connection,
    prompt: object,
    *,
    repo_key: str | None,
    profile_terms: list[str],
    items: list[dict] | None = None,
    told: set[str] | frozenset[str] = frozenset(),
    semantic: dict[str, float] | None = None,
    limit: int = PROMPT_MAX,
    relative: float | None = None,
) -> list[dict]:
    """The learnings (and open items) a prompt needs, best first, above the floor.

    Candidates: this repository's learnings and the global ones that fit its profile (a
    global about another stack is never told), and the open items. Each is scored by the
    idf of the prompt's terms it holds (title and rule count whole, the insight 0.6);
    ``semantic`` (note id → cosine from the worker) adds
    ``SEM_WEIGHT·max(0, cos − SEM_BASE)``, and a cosine of :data:`SEM_ALONE` passes alone.
    Those that pass the floor are ordered by that score times ``1 + TITLE_SHARE ×``
    :func:`title_share` (the learning the prompt is about before its neighbours), and only
    those within :data:`RELATIVE` of the best are told.

    Args:
        conn: A context-store connection.
        prompt: The user's prompt.
        repo_key: The session's repository key, or ``None``.
        profile_terms: The repository's profile terms.
        items: The repository's open items (``{"id", "kind", "title", "body"}``).
        told: Ids already told in this session (never told again).
        semantic: Optional cosine similarities from the worker's model.
        limit: At most this many.
        relative: Keep only candidates scoring this share of the best (default
            :data:`RELATIVE`; the MCP ``context`` tool lists more).

    Returns:
        Rows (learnings: context-store rows; items: with ``"item": True``), each with
        ``relevance``; empty when nothing passes the floor.
    """
    term_list = terms(prompt)
    if not term_list:
        return []
    weights, holders = idf(conn, term_list)
    semantic = semantic or {}
    if not weights and not semantic:
        return []
    rid_terms: dict[int, list[str]] = {}
    for t, rids in holders.items():
        for rid in rids:
            rid_terms.setdefault(rid, []).append(t)
    # Bounded at any KB size: the CANDIDATES notes holding the most weight are read.
    rough = sorted(rid_terms, key=lambda r: -sum(weights[t] for t in rid_terms[r]))
    wanted = set(rough[:CANDIDATES])
    if semantic:
        wanted |= set(rows_for_ids(conn, list(semantic)))
    from .store import rows_by_rid

    scored: list[dict] = []
    for row in rows_by_rid(conn, list(wanted)):
        if row["id"] in told:
            continue
        if row["scope"] == "repo":
            if row.get("repo_key") != repo_key:
                continue
        elif stack.fit(stack.loads(row.get("applies_to")), profile_terms) is None:
            continue
        held = rid_terms.get(row["rid"], [])
        score, matched = score_note({t: weights[t] for t in held}, row)
        best = max((weights[t] for t in held if is_identifier(t)), default=0.0)
        cos = semantic.get(str(row["id"]), 0.0)
        score += SEM_WEIGHT * max(0.0, cos - SEM_BASE)
        if row["scope"] == "repo":
            score *= OWN_BOOST  # the repository's own rule before a general one at equal relevance
        # The floor decides on the evidence (so whether anything is told is the title's
        # business not at all); the title share only orders what passed.
        if passes(score, matched, best) or cos >= SEM_ALONE:
            ranked = score * (1.0 + TITLE_SHARE * title_share(held, row.get("title")))
            scored.append({**row, "relevance": round(ranked, 3)})
    for item in items or []:
        ident = str(item.get("id"))
        if ident in told:
            continue
        score, matched = score_text(
            weights,
            {"title": str(item.get("title") or ""), "key_insight": str(item.get("body") or "")},
        )
        if passes(score, matched, 0.0):
            scored.append({**item, "item": True, "relevance": round(score, 3)})
    if not scored:
        return []
    scored.sort(key=lambda r: (-r["relevance"], str(r.get("id"))))
    top = scored[0]["relevance"]
    share = RELATIVE if relative is None else relative
    return [r for r in scored if r["relevance"] >= share * top][:limit]
