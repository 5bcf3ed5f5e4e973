"""Search over the KB: lexical (FTS5/BM25), vector/graph (nano-graphrag), or both fused.

What the recall benchmark (``bench/bench_recall_eval.py``, issue 25) taught this module:

* **Scope first.** ``--repo`` / ``--global`` exclude the other repositories' learnings
  *inside* the lexical query and before the vector ranking is cut, so a repository's own
  learning ranked 197th in the whole KB is still found in its repository.
* **Own learnings first.** At equal relevance the repository's own learning beats a global
  one (:attr:`Fusion.own_boost`).
* **Hybrid is lexical, corrected.** The fused score is the lexical evidence (the IDF-weighted
  *coverage* of the query's terms, plus the BM25 score relative to the best) with the vector
  cosine added at a weight tuned on the benchmark's dev split, so the vector arm reorders
  and rescues near-misses without pushing a correct exact hit out.
* **A relevance floor.** A hit whose coverage and cosine are both below the floor is not
  returned; when nothing clears it the result is empty with a :attr:`SearchResult.reason`
  (``--json`` prints ``{"results": [], "reason": …}``). A query of only stop words or
  punctuation answers nothing at once, without loading the model.
* The graph modes (``local``, ``global``) rank by entity and community vectors; they are
  kept for explicit use and are not the default (their figures are in docs/BENCHMARKS.md).

Retired and superseded notes are filtered on every path (the lexical index filters by
status; vector hits are checked against the lexical index's metadata, which reindex keeps in
step with the notes).
"""

from __future__ import annotations

import math
import sqlite3
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from reflect_jobs import kb
from reflect_jobs.lifecycle import ACTIVE, PROPOSED

from . import tokens
from .fts_query import query_match
from .lexical import LexicalHit, LexicalIndex

RRF_K = 60
#: Modes ``search`` offers; ``hybrid`` is the default, the graph modes are explicit only.
MODES = ("hybrid", "lexical", "naive", "local", "global")
#: How many candidates each arm contributes before fusion.
CANDIDATES = 50
NO_TERMS = "the query holds no searchable word (only stop words or punctuation)"
BELOW_FLOOR = "nothing stored is relevant enough (every candidate is below the relevance floor)"
NO_MATCH = "no stored learning matches the query"


@dataclass(frozen=True)
class Fusion:
    """How lexical and vector evidence become one ranking, and the floor below it.

    Tuned on the benchmark's dev split (``bench/recall_eval_tune.py``); the test split is
    reported in docs/BENCHMARKS.md.
    """

    #: Weight of coverage (vs. BM25 relative to the best hit) in the lexical evidence.
    coverage_weight: float = 0.5
    #: Weight of the vector evidence added to the lexical evidence (hybrid). Larger weights
    #: won some dev figures and lost others; 0.2 is the best setting at or above lexical on
    #: every dev figure at 2,000 notes.
    vector_weight: float = 0.2
    #: Cosine at which the vector evidence starts counting.
    cosine_zero: float = 0.1
    #: Multiplier on the repository's own learnings (global ones at equal relevance lose).
    own_boost: float = 1.25
    #: A hit must reach this coverage (in a KB of :attr:`floor_docs` notes; see
    #: :meth:`sized`) …
    floor_coverage: float = 0.45
    #: … or this cosine (hybrid/vector modes) to be returned.
    floor_cosine: float = 0.6
    #: The KB size :attr:`floor_coverage` is set for, and how much the floor rises per
    #: tenfold more notes. The more notes, the more an unrelated query matches some of its
    #: words by chance: on the dev split the best-covered *irrelevant* query reached 0.31 at
    #: 248 notes and 0.38 at 2,342. Once notes carried ``applies_when`` and dev held 31
    #: in-domain tasks that need nothing, 0.45 (and a cosine of 0.6) answered ≥ 90 % of
    #: them with nothing in every scope and lost no relevant hit (0.40: 84 % unscoped).
    floor_docs: int = 2000
    floor_per_decade: float = 0.033
    #: A hit matching one plain word of a query of three or more terms
    #: (:attr:`LexicalHit.lone`) does not pass the floor on its coverage, however rare the
    #: word (a chance match: "systemd unit" for "write a unit test").
    lone_fails: bool = True

    def sized(self, docs: int) -> Fusion:
        """These settings with the coverage floor for a KB of ``docs`` notes.

        Args:
            docs: Notes in the lexical index.

        Returns:
            A copy whose :attr:`floor_coverage` is moved by :attr:`floor_per_decade` per
            tenfold from :attr:`floor_docs`, kept within [0.2, 0.6].
        """
        shift = self.floor_per_decade * math.log10(max(docs, 1) / self.floor_docs)
        return replace(self, floor_coverage=min(max(self.floor_coverage + shift, 0.2), 0.6))


FUSION = Fusion()


class SearchError(RuntimeError):
    """Search cannot answer; the message says what to run."""


@dataclass
class SearchResult:
    """What :func:`search` found: hits (``id``, ``title``, ``score``, ``path``) and warnings.

    ``reason`` says why there are no hits (stop words only, nothing matched, nothing above
    the relevance floor); ``None`` when there are hits.
    """

    hits: list[dict[str, Any]]
    warnings: list[str] = field(default_factory=list)
    reason: str | None = None


def rrf(rankings: list[list[str]], k: int = RRF_K) -> list[tuple[str, float]]:
    """Reciprocal-rank fusion: each ranking gives the document at rank r (from 1) ``1/(k+r)``.

    Args:
        rankings: Document ids, best first, one list per retriever.
        k: The damping constant; larger flattens the advantage of the top ranks.

    Returns:
        ``(doc_id, fused score)`` for every document in any ranking, best first (ties by id).
    """
    scores: dict[str, float] = {}
    for ranking in rankings:
        for rank, doc_id in enumerate(ranking):
            scores[doc_id] = scores.get(doc_id, 0.0) + 1.0 / (k + rank + 1)
    return sorted(scores.items(), key=lambda kv: (-kv[1], kv[0]))


def staleness(kb_path: Path) -> list[str]:
    """Warn when notes changed since the last reindex (SPEC "staleness"); O(1), not O(notes).

    Args:
        kb_path: The KB root.

    Returns:
        One warning line telling the user to reindex, or an empty list.
    """
    from .maintenance import index_lags

    if index_lags(kb_path):
        return [
            "the index lags the notes (notes changed since the last reindex): run `reflect-jobs reindex`"
        ]
    return []


def search(
    kb_path: Path,
    query: str,
    *,
    mode: str = "hybrid",
    k: int = 5,
    vectors: bool,
    embed_model: str | None = None,
    repo_key: str | None = None,
    only_global: bool = False,
    prefer_repo_key: str | None = None,
    fusion: Fusion = FUSION,
) -> SearchResult:
    """Search the KB's active notes; the vector leg fails open to lexical results.

    Args:
        kb_path: The KB root (its directories are created when missing).
        query: Free text (bounded: see :mod:`.tokens`).
        mode: ``hybrid`` (lexical corrected by naive vectors, :class:`Fusion`), ``lexical``
            (BM25 only), or a nano-graphrag mode, ``naive``, ``local`` or ``global``
            (vector/graph only, lexical when the vector index is unavailable).
        k: At most this many hits.
        vectors: ``Settings.index_vectors``; ``False`` makes every mode lexical.
        embed_model: ``Settings.embed_model``; ``None`` for the default model.
        repo_key: Keep only this repository's learnings and the global ones
            (``search --repo DIR``; ARCHITECTURE §13), scoped before candidates are taken.
        only_global: Keep only global learnings (``search --global``).
        prefer_repo_key: With neither of those, the repository the search is asked from
            (``search`` run inside a checkout): every learning stays, this repository's
            own go first at equal relevance (:attr:`Fusion.own_boost`), as in a scoped
            search.
        fusion: The fusion weights and relevance floor (the tuned :data:`FUSION`).

    Returns:
        Hits with ``id``, ``title``, ``score`` (``-bm25`` for ``lexical``, the fused score
        for ``hybrid``, the graph score otherwise) and ``path``, best first; warnings for a
        stale index or an unavailable vector index; a ``reason`` when there are none.

    Raises:
        SearchError: The lexical index is damaged (the message says to reindex).
    """
    if k <= 0 or query_match(query)[0] is None:
        return SearchResult([], [], NO_TERMS if k > 0 else NO_MATCH)
    try:
        return _search(
            kb_path,
            str(query)[: tokens.MAX_QUERY_CHARS],
            mode=mode,
            k=k,
            vectors=vectors,
            embed_model=embed_model,
            scope=scope_filter(kb_path, repo_key, only_global, prefer_repo_key),
            fusion=fusion,
        )
    except sqlite3.DatabaseError as exc:
        raise SearchError(
            f"the lexical index is damaged ({exc}): run `reflect-jobs reindex`"
        ) from None


@dataclass(frozen=True)
class Scope:
    """Which learnings a scoped search must not see, and which are the repository's own."""

    exclude: frozenset[str]
    own: frozenset[str]


def scope_filter(
    kb_path: Path, repo_key: str | None, only_global: bool, prefer_repo_key: str | None = None
) -> Scope | None:
    """The scopes a filtered search needs, read once from the context store.

    Args:
        kb_path: The KB root.
        repo_key: Keep this repository's learnings and the global ones.
        only_global: Keep only global learnings.
        prefer_repo_key: With neither filter: exclude nothing, but count this repository's
            learnings as the search's own.

    Returns:
        ``None`` when no filter or preference was asked for; else the other repositories'
        learnings (to exclude; none for a preference) and this repository's. An id the
        store does not know is treated as global (a note written before scopes existed).
    """
    filtering = repo_key is not None or only_global
    if not filtering and prefer_repo_key is None:
        return None
    mine = None if only_global else (repo_key if filtering else prefer_repo_key)
    from reflect_jobs.recall import store

    exclude: set[str] = set()
    own: set[str] = set()
    conn = store.open_for_read(store.store_path(kb_path))
    if conn is not None:
        try:
            for note_id, key in conn.execute("SELECT id, repo_key FROM notes WHERE scope='repo'"):
                if mine is not None and key == mine:
                    own.add(note_id)
                elif filtering:  # a preference excludes nothing
                    exclude.add(note_id)
        finally:
            conn.close()
    return Scope(frozenset(exclude), frozenset(own))


#: A rule shorter than this many words is not taken as one lesson's fingerprint.
LESSON_MIN_WORDS = 4


def lesson_key(rule: str) -> str:
    """What makes two results the same lesson: their rule's words, in order.

    An un-deduplicated KB records one lesson many times — once global, again in every
    repository that learned it ("watchdog: Feature flags must be additive", "indexer: …"),
    each with the same rule. An unscoped search would fill its five results with copies and
    push out the different learning that was asked for; the best-ranked copy stands for all.

    Args:
        rule: A result's rule text.

    Returns:
        Its lower-cased words joined by spaces (stop words included: "never" and "always"
        change a rule), or ``""`` when it has fewer than :data:`LESSON_MIN_WORDS` (no
        fingerprint: never merged).
    """
    found = [w.lower() for w in tokens.WORD.findall(rule)]
    return " ".join(found) if len(found) >= LESSON_MIN_WORDS else ""


def fuse(
    lexical: list[LexicalHit],
    vector: list[tuple[str, float]],
    own: frozenset[str] | set[str],
    fusion: Fusion,
    *,
    use_vector: bool = True,
) -> list[tuple[str, float]]:
    """One ranking from the lexical hits (with coverage) and the vector cosines; floored.

    Pure, so the tuning script runs exactly this on recorded candidates.

    Args:
        lexical: Lexical hits, best first, with coverage.
        vector: ``(id, cosine)`` of the vector arm (already scoped), any order.
        own: The repository's own learnings (boosted by :attr:`Fusion.own_boost`).
        fusion: The weights and floor.
        use_vector: ``False`` for lexical mode (the cosine neither ranks nor floors).

    Returns:
        ``(id, fused score)`` best first (ties by id), only hits above the floor.
    """
    top = max((h.score for h in lexical), default=0.0)
    lex = {
        h.doc_id: (
            fusion.coverage_weight * h.coverage
            + (1.0 - fusion.coverage_weight) * (h.score / top if top > 0 else 0.0),
            0.0 if h.lone and fusion.lone_fails else h.coverage,
        )
        for h in lexical
    }
    cos = dict(vector) if use_vector else {}
    out: list[tuple[str, float]] = []
    for doc_id in set(lex) | set(cos):
        evidence, coverage = lex.get(doc_id, (0.0, 0.0))
        cosine = cos.get(doc_id, 0.0)
        if coverage < fusion.floor_coverage and (not use_vector or cosine < fusion.floor_cosine):
            continue
        if use_vector:
            span = max(1e-9, 1.0 - fusion.cosine_zero)
            evidence += fusion.vector_weight * max(0.0, cosine - fusion.cosine_zero) / span
        if doc_id in own:
            evidence *= fusion.own_boost
        out.append((doc_id, evidence))
    return sorted(out, key=lambda kv: (-kv[1], kv[0]))


def _vector(
    kb_path: Path,
    query: str,
    mode: str,
    fetch: int,
    *,
    vectors: bool,
    embed_model: str | None,
) -> list[tuple[str, float]]:
    """The vector/graph arm's ``(id, score)``; raises when there is no vector index."""
    from .semantic import graph_index

    graph = graph_index(kb_path, vectors=vectors, embed_model=embed_model)
    if graph is None:
        raise LookupError("no vector index yet (or REFLECT_INDEX_VECTORS=0)")
    return graph.query(query, mode="naive" if mode == "hybrid" else mode, k=fetch)


def _search(
    kb_path: Path,
    query: str,
    *,
    mode: str,
    k: int,
    vectors: bool,
    embed_model: str | None,
    scope: Scope | None = None,
    fusion: Fusion = FUSION,
) -> SearchResult:
    paths = kb.kb_paths(kb_path)
    lex = LexicalIndex(paths.index / "lexical.db")
    warnings: list[str] = []
    exclude = scope.exclude if scope is not None else frozenset()
    own = scope.own if scope is not None else frozenset()
    try:
        warnings += staleness(kb_path)
        if lex.outdated:
            warnings.append("the lexical index predates this version: run `reflect-jobs reindex`")
        lexical = lex.scored(query, CANDIDATES, exclude=exclude, coverage=True)
        fusion = fusion.sized(lex.size())
        vector: list[tuple[str, float]] = []
        vector_ok = False
        if mode != "lexical":
            # A scoped ranking is cut after the other repositories are dropped: ask for enough.
            fetch = CANDIDATES + (len(exclude) if exclude else 0)
            try:
                vector = [
                    (d, s)
                    for d, s in _vector(
                        kb_path, query, mode, fetch, vectors=vectors, embed_model=embed_model
                    )
                    if d not in exclude
                ][:CANDIDATES]
                vector_ok = True
            except Exception as exc:  # noqa: BLE001 - lexical still answers
                warnings.append(
                    f"vector index unavailable ({type(exc).__name__}: {exc}); lexical results only"
                )
        if mode == "lexical" or not vector_ok:
            ranked = fuse(lexical, [], own, fusion, use_vector=False)
            raw = {h.doc_id: h.score for h in lexical}
            if mode == "lexical":
                ranked = [(d, raw[d]) for d, _ in ranked]
        elif mode == "hybrid":
            ranked = fuse(lexical, vector, own, fusion)
        else:  # naive / local / global: the graph's own ranking, floored like hybrid
            cover = {h.doc_id: 0.0 if h.lone and fusion.lone_fails else h.coverage for h in lexical}
            ranked = [
                (d, s)
                for d, s in vector
                if cover.get(d, 0.0) >= fusion.floor_coverage
                or (mode == "naive" and s >= fusion.floor_cosine)
            ]
        hits = []
        lessons: set[str] = set()
        for doc_id, score in ranked:
            meta = lex.lookup(doc_id)
            if meta is None or meta["status"] not in (ACTIVE, PROPOSED):
                continue  # unknown to the (status-aware) index, retired or superseded
            lesson = lesson_key(lex.rule_of(doc_id))
            if lesson in lessons:
                continue  # the same lesson, recorded again elsewhere: one result slot
            if lesson:
                lessons.add(lesson)
            hit = {
                "id": doc_id,
                "title": meta["title"],
                "score": round(float(score), 6),
                "path": meta["path"],
            }
            if meta["status"] == PROPOSED:  # found, but marked: no one vouched for it yet
                hit["status"] = PROPOSED
            hits.append(hit)
            if len(hits) >= k:
                break
        reason = None
        if not hits:
            reason = BELOW_FLOOR if (lexical or vector) else NO_MATCH
        return SearchResult(hits, warnings, reason)
    finally:
        lex.close()
