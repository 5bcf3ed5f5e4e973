"""The SessionStart block: a repository's learnings verified, the fitting globals, its items.

:func:`session_block` is what ``reflect-jobs-hook`` tells at session start (:mod:`.hook`)
and what ``reflect-jobs context`` previews: the repository's learnings checked against the
working tree first (``recall/verify.py``; stale ones withheld and, at a real session start,
counted towards :data:`reflect_jobs.lifecycle.STALE_AFTER`), the global learnings whose
``applies_to`` fits the repository's profile, and its open reflection items.

Stdlib only, and nothing beyond :mod:`.hook_inputs` at module load: the store, the block and
the verification are imported when a block is actually built.
"""

from __future__ import annotations

from .hook_inputs import is_ignored, log, open_items_for, repo_profile

#: The worker task that takes learnings stale at STALE_AFTER session starts out of circulation.
STALE_TASK = "reflect_jobs.tasks.stale_anchors"


class Told:
    """What one block told: its text, the learning ids on it, and what it withheld."""

    __slots__ = ("item_ids", "learning_ids", "task", "task_from", "text", "verdicts", "withheld")

    def __init__(
        self,
        text: str,
        verdicts: dict,
        withheld: list[str],
        task: str = "",
        task_from: str = "",
    ) -> None:
        """Hold the block and read the told ids off its lines.

        Args:
            text: The block (``""``: nothing told).
            verdicts: ``id -> Verdict`` of the learnings checked.
            withheld: The ids withheld as stale.
            task: The words it was ranked for (``""``: by strength and fit alone).
            task_from: Where they came from (``the last prompts``, ``the branch's words``,
                ``handoff #a1b2``; ``""`` with no task).
        """
        self.text = text
        self.task = task
        self.task_from = task_from
        self.verdicts = verdicts
        self.withheld = withheld
        self.learning_ids = [
            x[3 : x.index("]")] for x in text.splitlines() if x.startswith("- [") and "]" in x
        ]
        self.item_ids = [x[2:].split(" ", 1)[0] for x in text.splitlines() if x.startswith("- #")]


def session_context(cwd: object, *, max_chars: int, kb_root: str | None = None) -> str:
    """The recall block for a working directory (``""`` when there is nothing to tell).

    Args:
        cwd: The session's working directory (anything unusable means no repository).
        max_chars: The block's budget.
        kb_root: The KB root (default ``$GLOBAL_LEARNINGS_PATH``).

    Returns:
        The block text, or ``""`` (no context store yet, or no learnings).

    Raises:
        sqlite3.Error: The store is locked past its timeout or damaged.
    """
    return session_block(cwd, max_chars=max_chars, kb_root=kb_root).text


def session_block(
    cwd: object,
    *,
    max_chars: int,
    kb_root: str | None = None,
    session_id: str | None = None,
    everything: bool = False,
    task: str | None = None,
) -> Told:
    """The recall block for a working directory, its repository learnings verified first.

    The repository's learnings are checked against the working tree in rank order until
    enough may be told (``recall/verify.py``; global ones name files of other
    repositories and are told as they are): a stale one is withheld and counted in the
    last line, a partial one is marked. With a ``session_id`` (a real session start) the
    verdicts count into the stale streaks, and a learning stale at
    :data:`reflect_jobs.lifecycle.STALE_AFTER` consecutive session starts is handed to the
    worker (:data:`STALE_TASK`), which takes it out of circulation.

    Args:
        cwd: The session's working directory (anything unusable means no repository).
        max_chars: The block's budget.
        kb_root: The KB root (default ``$GLOBAL_LEARNINGS_PATH``).
        session_id: The session starting (``None``: a preview, nothing is counted).
        everything: Every learning that qualifies, without caps (``context --all``).
        task: What the session is doing, when that is known (after a compaction or a
            resume: its last prompts, ``recall/task_query.py``): the learnings it needs are
            ranked first in both sections (:func:`_task_hits`); ``None`` (a fresh start)
            takes the words of the checkout's branch (``task_query.branch_task``), else the
            open handoff a person or the ``/handoff`` skill left (``task_query.handoff_task``);
            ``""`` keeps the order by strength and fit.

    Returns:
        The :class:`Told`.

    Raises:
        sqlite3.Error: The store is locked past its timeout or damaged.
    """
    import time

    from reflect_jobs.envpaths import kb_root_str
    from reflect_jobs.repo import repo_for

    from . import block, fading, profile, store

    ref = repo_for(cwd if isinstance(cwd, str) else None)
    if is_ignored(ref):
        return Told("", {}, [])  # `reflect-jobs ignore`: told nothing, nothing read from it
    open_now, open_total = open_items_for(cwd, kb_root)
    task_from = "the last prompts" if task else ""
    if task is None:  # a fresh start: the branch made for the task, else the handoff, names it
        from .task_query import branch_task, handoff_task

        root = ref.root if ref is not None and ref.in_git and not everything else None
        task = branch_task(root) if root else ""
        task_from = "the branch's words" if task else ""
        if root and not task:
            task, handoff = handoff_task(open_now)
            task_from = f"handoff {handoff}" if task else ""
    conn = store.open_for_read(store.store_path(kb_root or kb_root_str()))
    repo: list[dict] = []
    general: list[dict] = []
    hits: list[dict] = []
    qualifying = 0
    now = time.time()
    days = fading.unused_days()
    # Dormant learnings (nobody confirmed them for `days`) are not told; `context --all`
    # lists them, marked.
    since = None if everything else fading.awake_since(days, now)
    if conn is not None:
        try:
            limit = 1_000_000 if everything else 60
            key = ref.key if ref else None
            if ref:
                repo = block.ranked(store.repo_rows(conn, ref.key, limit, awake_since=since), now)
            prof = repo_profile(ref)  # one profile read for both sections
            terms = profile.profile_terms(prof)
            side = profile.side_languages(prof)
            general = _fitting_general(conn, terms, everything, since, side)
            if task and not everything:
                root = kb_root or kb_root_str()
                hits = _task_hits(conn, task, ref, terms, root)
            repo = _task_first(repo, hits, "repo")
            general = _task_first(general, hits, "global")
            qualifying = store.count_rows(conn, key, awake_since=since)
            # A dormant learning the task asks for qualifies too (not in that count).
            qualifying += sum(fading.is_dormant(h.get("awake_ts"), days, now) for h in hits)
        finally:
            conn.close()
    verdicts = _verify(ref.root if ref else None, repo, session_id, everything) if repo else {}
    withheld = [i for i, v in verdicts.items() if not v.told]
    if verdicts:
        # What the verification found ranks too (partial below ok: block.rank_score).
        repo = block.ranked(
            [
                {**r, "verdict": verdicts[str(r["id"])].status}
                for r in repo
                if str(r.get("id")) in verdicts and verdicts[str(r["id"])].told
            ],
            now,
        )
        repo = _task_first(repo, hits, "repo", add=False)  # re-ranked by strength: task first
    marks = {i: v.mark() for i, v in verdicts.items() if v.mark()}
    text = block.render(
        ref.display if ref else None,
        repo,
        general,
        max_chars=max_chars,
        items=open_now,
        items_total=open_total,
        marks=marks,
        dormant_days=days,  # told only when a task asked for them, or by `context --all`
        withheld=len(withheld),
        qualifying=qualifying,
        now=now,
        caps=(None, None) if everything else (block.REPO_ITEMS, block.GLOBAL_ITEMS),
    )
    return Told(text, verdicts, withheld, task, task_from)


def _verify(root: str | None, rows: list[dict], session_id: str | None, everything: bool) -> dict:
    """Verdicts for the repository's ranked rows; the cache and streaks when they open.

    The verification store is a cache: when it cannot be opened (a read-only home, a lock)
    the check runs without it and the problem is logged, never raised.
    """
    from reflect_jobs.envpaths import home_dir_str
    from reflect_jobs.lifecycle import STALE_AFTER

    from . import block, verify

    cache: VerifyStore | verify.MemoryCache
    try:
        from .verify_store import VerifyStore, store_path

        cache = VerifyStore(store_path(home_dir_str()))
    except Exception as exc:  # noqa: BLE001 - the block is told without the cache
        log(f"verify store: {type(exc).__name__}: {exc}")
        cache = verify.MemoryCache()
    if everything:
        verdicts = verify.check_many(root, rows, cache, total=verify.TOTAL_SEC * 10)
    else:
        verdicts = verify.check_many(root, rows, cache, want=block.REPO_ITEMS)
    if isinstance(cache, verify.MemoryCache):
        return verdicts
    if not verdicts.settled:  # a check is stuck (a hung mount): leave its connection alone
        return verdicts
    try:
        cache.flush()
        if session_id is not None:
            reached = cache.record(session_id, verdicts, stale_after=STALE_AFTER)
            if reached:
                _hand_over(reached)
    except Exception as exc:  # noqa: BLE001 - the block is still told
        log(f"verify store: {type(exc).__name__}: {exc}")
    finally:
        cache.close()
    return verdicts


def _hand_over(reached: list[tuple[str, list[str]]]) -> None:
    """Ask the worker to take learnings stale for STALE_AFTER sessions out of circulation."""
    from reflect_jobs import fastqueue
    from reflect_jobs.envpaths import queue_url

    url = queue_url()
    if url.startswith("sqlite:///"):
        import os

        os.makedirs(os.path.dirname(url[len("sqlite:///") :]) or ".", mode=0o700, exist_ok=True)
    fastqueue.enqueue(url, STALE_TASK, ([[i, m] for i, m in reached],), timeout=0.25)


def _fitting_general(
    conn: object,
    terms: list[str],
    everything: bool,
    awake_since: float | None = None,
    side: frozenset[str] = frozenset(),
) -> list[dict]:
    """The global learnings that fit the repository's profile, best fit first (issue 25).

    Only globals whose ``applies_to`` fits the profile (``recall/profile.py``,
    ``recall/relevance.py:fitting_globals``): none rather than another stack's rules. The
    fitting pass reads a covering index of the strongest :data:`relevance.GLOBAL_SCAN`
    globals; only the few told are read whole. ``terms`` is the repository's profile
    (``hook_inputs.repo_profile``); ``awake_since`` leaves the dormant out; a rule about
    one of the ``side`` languages ranks after those about the main ones.
    """
    from . import block, relevance, store

    fitting = relevance.fitting_globals(
        store.global_stack_rows(conn, relevance.GLOBAL_SCAN, awake_since=awake_since),  # type: ignore[arg-type]
        terms,
        block.rank_score,
        per_fit=relevance.GLOBAL_SCAN if everything else 40,
        side=side,
    )
    if not everything:
        fitting = fitting[: block.GLOBAL_ITEMS * 2]
    full = {r["rid"]: r for r in store.rows_by_rid(conn, [r["rid"] for r in fitting])}  # type: ignore[arg-type]
    return [full[r["rid"]] for r in fitting if r["rid"] in full]


#: The task's ranking may take this long (seconds); past it the block keeps today's order.
TASK_BUDGET = 0.5
#: At most this many learnings the task needs move to the top of the block.
TASK_LIMIT = 8
#: Of those above the relevance floor, only the ones within this share of the best.
TASK_RELATIVE = 0.0


def _task_hits(
    conn: object,
    task: str,
    ref: object,
    terms: list[str],
    root: str,
) -> list[dict]:
    """The learnings a known task needs, best first; ``[]`` on any problem or past budget.

    The same ranking per-prompt recall uses (``recall/relevance.py:rank_for_prompt``, the
    relevance floor included: the repository's learnings and the globals that fit it, scored
    against the task's words), with the running worker's cosines when they come within
    their budget (``recall/warm_rank.py``, as per-prompt recall asks). The store's queries
    are cut off at :data:`TASK_BUDGET` by SQLite's progress handler; any failure is logged
    and the block keeps its order by strength. A dormant learning the task needs is kept
    (``block.render`` marks it): the order by strength leaves dormant learnings out, but a
    task asking for one is what should bring it back, as per-prompt recall and search find
    it (after a compaction: what per-prompt recall told before it). ``terms`` is the
    repository's profile (read once by the caller for both sections).
    """
    import time

    from . import relevance, warm_rank

    deadline = time.monotonic() + TASK_BUDGET
    try:
        semantic = warm_rank.similar(relevance.prompt_text(task), root)
        conn.set_progress_handler(lambda: int(time.monotonic() > deadline), 1000)  # type: ignore[attr-defined]
        try:
            hits = relevance.rank_for_prompt(
                conn,  # type: ignore[arg-type]
                task,
                repo_key=getattr(ref, "key", None),
                profile_terms=terms,
                semantic=semantic,
                limit=TASK_LIMIT,
                relative=TASK_RELATIVE,
            )
        finally:
            conn.set_progress_handler(None, 0)  # type: ignore[attr-defined]
    except Exception as exc:  # noqa: BLE001 - the block is told in today's order
        log(f"task recall: {type(exc).__name__}: {exc}")
        return []
    if time.monotonic() > deadline:
        log("task recall: over its time budget; the block keeps its order")
        return []
    return hits


def _task_first(rows: list[dict], hits: list[dict], scope: str, *, add: bool = True) -> list[dict]:
    """``rows`` with the task's learnings of ``scope`` first (best first), the rest after
    in their order; a task learning missing from ``rows`` (beyond the strongest read) is
    added, unless ``add`` is false (after the verification, which withheld some)."""
    first = [h for h in hits if (h.get("scope") == "repo") == (scope == "repo")]
    if not first:
        return rows
    ids = {str(h["id"]) for h in first}
    by_id = {str(r.get("id")): r for r in rows}
    head = [by_id.get(str(h["id"]), h) for h in first if add or str(h["id"]) in by_id]
    return head + [r for r in rows if str(r.get("id")) not in ids]
