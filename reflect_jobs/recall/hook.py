"""The recall branch of ``reflect-jobs-hook``: SessionStart context and per-prompt recall.

``reflect-jobs-hook claude|codex`` on a SessionStart payload prints the harness's own JSON,
``{"hookSpecificOutput": {"hookEventName": "SessionStart", "additionalContext": …}}``, for
the payload's ``cwd``, and enqueues nothing (no transcript is needed, and at startup it may
not exist yet). With ``REFLECT_RECALL_ON_PROMPT=1`` a UserPromptSubmit payload gets at most
three strongly matching learnings the same way; without it the event is ignored.

Copilot CLI runs ``sessionStart`` hooks fire-and-forget and discards their output
(ARCHITECTURE §13), so for ``copilot`` this does nothing and the payload takes the capture
path as before. Any problem raises to
:func:`reflect_jobs.hook.main`, which logs it: since the answer is built completely before
anything is written, a failure prints nothing, never half a JSON document.

Only ``json`` and ``os`` are imported at module load: the Stop/PreCompact path imports this
module too and must not pay for ``sqlite3``; the store and the block are imported when a
recall event actually arrives.
"""

from __future__ import annotations

import json
from io import TextIOBase  # not typing: the hook path never imports it (startup cost)

PROMPT_ENV = "REFLECT_RECALL_ON_PROMPT"
#: Used when neither the variable nor the config file says (settings_spec's default).
PROMPT_DEFAULT = "0"
#: Harnesses whose SessionStart/UserPromptSubmit output is read as hook JSON.
JSON_HARNESSES = ("claude", "codex")
_PROMPT_EVENTS = ("userpromptsubmit", "userpromptsubmitted")


def event_kind(event: object) -> str:
    """``"session_start"``, ``"prompt"`` or ``""`` for a hook event name in any spelling.

    Args:
        event: The event name (``SessionStart``, ``sessionStart``, ``UserPromptSubmit``,
            ``userPromptSubmitted``…).

    Returns:
        The kind of recall event, or ``""`` for every other event.
    """
    norm = str(event or "").replace("_", "").replace("-", "").lower()
    if norm == "sessionstart":
        return "session_start"
    if norm in _PROMPT_EVENTS:
        return "prompt"
    return ""


def _event_arg(argv: list[str]) -> str | None:
    if "--event" in argv:
        idx = argv.index("--event")
        return argv[idx + 1] if idx + 1 < len(argv) else None
    return None


def session_context(
    cwd: object,
    *,
    max_chars: int,
    kb_root: str | None = None,
    told: list[str] | None = None,
) -> str:
    """The recall block for a working directory (``""`` when there is nothing to tell).

    The general section holds only the global learnings that fit the repository's profile
    (``recall/profile.py``), best fit first (``recall/relevance.py:fitting_globals``); with
    none that fits it is left out rather than filled with another stack's rules.

    Args:
        cwd: The session's working directory (anything unusable means no repository).
        max_chars: The block's budget.
        kb_root: The KB root (default ``$GLOBAL_LEARNINGS_PATH``).
        told: When a list, the ids of the learnings the block tells are appended to it.

    Returns:
        The block text, or ``""`` (no context store yet, or no learnings).

    Raises:
        sqlite3.Error: The store is locked past its timeout or damaged.
    """
    from reflect_jobs.envpaths import kb_root_str
    from reflect_jobs.repo import repo_for

    from . import block, relevance, store

    ref = repo_for(cwd if isinstance(cwd, str) else None)
    open_now, open_total = _open_items(cwd, kb_root)
    conn = store.open_for_read(store.store_path(kb_root or kb_root_str()))
    repo: list[dict] = []
    general: list[dict] = []
    if conn is not None:
        try:
            repo = block.ranked(store.repo_rows(conn, ref.key)) if ref else []
            fitting = relevance.fitting_globals(
                store.global_stack_rows(conn, relevance.GLOBAL_SCAN),
                _profile_terms(ref),
                block.rank_score,
            )[: block.GLOBAL_ITEMS * 2]
            full = {r["rid"]: r for r in store.rows_by_rid(conn, [r["rid"] for r in fitting])}
            general = [full[r["rid"]] for r in fitting if r["rid"] in full]
        finally:
            conn.close()
    text = block.render(
        ref.display if ref else None,
        repo,
        general,
        max_chars=max_chars,
        items=open_now,
        items_total=open_total,
    )
    if told is not None and text:
        told += [i for i, _ in _told_lines(text)]
    return text


def _told_lines(text: str) -> list[tuple[str, str]]:
    """``(id, line)`` of every learning line (``- [id] …``) of a block."""
    out = []
    for line in text.splitlines():
        if line.startswith("- [") and "]" in line:
            out.append((line[3 : line.index("]")], line))
    return out


def _profile_terms(ref: object, home: str | None = None) -> list[str]:
    """The repository's profile terms; a failure reading it only logs (no general rules)."""
    from . import profile

    root = getattr(ref, "root", None)
    try:
        return profile.profile_terms(profile.profile(root, home))
    except Exception as exc:  # noqa: BLE001 - a profile is an aid; the session goes on
        from reflect_jobs.hook_log import log_error

        log_error(f"repository profile: {type(exc).__name__}: {exc}")
        return []


def _open_items(cwd: object, kb_root: str | None) -> tuple[list[dict], int]:
    """The repository's open reflection items for the block; a failure there only logs.

    The items are a second source beside the context store: a bad memory-home mapping or a
    locked reflection index must not cost the session its learnings, so the problem goes to
    ``hook-errors.log`` and the block is built without items. The default memory homes live
    under the same KB root as the learnings (``kb_root``, when given).
    """
    from reflect_jobs.envpaths import environ as merged_environ

    from . import items

    env = merged_environ()
    if kb_root:
        env["GLOBAL_LEARNINGS_PATH"] = str(kb_root)
    try:
        _, found, total = items.open_items(cwd, env)
    except Exception as exc:  # noqa: BLE001 - logged; the learnings are still told
        from reflect_jobs.hook_log import log_error

        log_error(f"open items: {type(exc).__name__}: {exc}")
        return [], 0
    return found, total


def prompt_context(
    cwd: object, prompt: object, *, max_chars: int, kb_root: str | None = None
) -> str:
    """The block of the learnings a prompt needs, or ``""`` (:func:`prompt_recall`'s text).

    Args:
        cwd: The session's working directory.
        prompt: The user's prompt text.
        max_chars: The block's budget.
        kb_root: The KB root (default ``$GLOBAL_LEARNINGS_PATH``).

    Returns:
        The block text, or ``""`` when nothing passes the relevance floor.

    Raises:
        sqlite3.Error: The store is locked past its timeout or damaged.
    """
    return prompt_recall(cwd, prompt, max_chars=max_chars, kb_root=kb_root)[0]


def prompt_recall(
    cwd: object,
    prompt: object,
    *,
    max_chars: int,
    kb_root: str | None = None,
    told: set[str] | None = None,
    limit: int = 3,
    heading: str = "Earlier learnings that match this prompt (reflect-jobs)",
    relative: float | None = None,
) -> tuple[str, list[str]]:
    """The block of the learnings (and open items) a prompt needs, or ``""``.

    Ranked by ``recall/relevance.py:rank_for_prompt`` over the repository's learnings, the
    globals that fit it and its open items; the running worker's model joins in when it
    answers within its budget (``recall/warm_rank.py``), else the lexical score decides.

    Args:
        cwd: The session's working directory.
        prompt: The user's prompt text (or an MCP ``context`` query).
        max_chars: The block's budget.
        kb_root: The KB root (default ``$GLOBAL_LEARNINGS_PATH``).
        told: Ids already told in this session (never told again).
        limit: At most this many.
        heading: The block's first line.
        relative: The share of the best score a candidate needs (default: the tuned one).

    Returns:
        ``(block, ids told)``; ``("", [])`` when nothing passes the relevance floor.

    Raises:
        sqlite3.Error: The store is locked past its timeout or damaged.
    """
    from reflect_jobs.envpaths import kb_root_str
    from reflect_jobs.repo import repo_for

    from . import block, relevance, store, warm_rank

    if not relevance.terms(prompt):
        return "", []
    root = kb_root or kb_root_str()
    conn = store.open_for_read(store.store_path(root))
    if conn is None:
        return "", []
    ref = repo_for(cwd if isinstance(cwd, str) else None)
    items, _ = _open_items(cwd, kb_root)
    try:
        semantic = warm_rank.similar(relevance.prompt_text(prompt), root)
        hits = relevance.rank_for_prompt(
            conn,
            prompt,
            repo_key=ref.key if ref else None,
            profile_terms=_profile_terms(ref),
            items=items,
            told=told or set(),
            semantic=semantic,
            limit=limit,
            relative=relative,
        )
    finally:
        conn.close()
    if not hits:
        return "", []
    learnings = [h for h in hits if not h.get("item")]
    found = [h for h in hits if h.get("item")]
    text = block.render(None, [], learnings, max_chars=max_chars, heading=heading, items=found)
    return text, [str(h["id"]) for h in hits] if text else []


def handle(argv: list[str], stdin_text: str, out: TextIOBase | None = None) -> bool:
    """Answer a recall event; tell the caller whether the payload was one.

    Args:
        argv: The hook's arguments (harness first, optionally ``--event NAME``).
        stdin_text: The payload text.
        out: Where to print (default ``sys.stdout``).

    Returns:
        True when the payload was a SessionStart or UserPromptSubmit event of Claude Code or
        Codex (answered, or deliberately ignored): the caller then enqueues nothing. False
        for every other payload — another event, any Copilot payload (its CLI discards the
        output), one that is not JSON (the capture path reports that).

    Raises:
        sqlite3.Error: The context store is locked or damaged (nothing was printed).
        OSError: Printing failed.
    """
    try:
        payload = json.loads(stdin_text) if stdin_text.strip() else None
    except ValueError:
        return False
    if not isinstance(payload, dict):
        return False
    event = _event_arg(argv) or payload.get("hook_event_name") or payload.get("hookEventName")
    kind = event_kind(event)
    if not kind:
        return False
    harness = argv[0] if argv else ""
    if harness not in JSON_HARNESSES:
        return False  # Copilot discards the output (ARCHITECTURE §13): its path is unchanged
    from reflect_jobs.envpaths import home_dir_str

    from . import block
    from .relevance import Told

    told = Told(home_dir_str(), harness, payload.get("session_id"))
    if kind == "session_start":
        ids: list[str] = []
        text = session_context(payload.get("cwd"), max_chars=block.DEFAULT_MAX_CHARS, told=ids)
        told.write(ids, replace=True)
        name = "SessionStart"
    else:
        from reflect_jobs.envpaths import get, is_truthy

        if not is_truthy(get(PROMPT_ENV) or PROMPT_DEFAULT):  # variable, else config file
            return True
        text, ids = prompt_recall(
            payload.get("cwd"),
            payload.get("prompt"),
            max_chars=block.DEFAULT_MAX_CHARS // 3,
            told=told.read(),
        )
        if ids:
            told.write(ids)
        name = "UserPromptSubmit"
    if text:
        answer = block.hook_json(name, text) + "\n"
        if out is None:
            import sys

            out = sys.stdout
        out.write(answer)
        out.flush()
    return True
