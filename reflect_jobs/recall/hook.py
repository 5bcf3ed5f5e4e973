"""The recall branch of ``reflect-jobs-hook``: SessionStart context and per-prompt recall.

``reflect-jobs-hook claude|codex`` on a SessionStart payload prints the harness's own JSON,
``{"hookSpecificOutput": {"hookEventName": "SessionStart", "additionalContext": …}}``, for
the payload's ``cwd``, and enqueues nothing (no transcript is needed, and at startup it may
not exist yet). With ``REFLECT_RECALL_ON_PROMPT=1`` a UserPromptSubmit payload gets at most
three strongly matching learnings the same way; without it the event is ignored.

``reflect-jobs-hook copilot --event sessionStart`` prints ``{"additionalContext": …}``, the
shape Copilot CLI injects since 1.0.11 (ARCHITECTURE §13; before, it discarded sessionStart
output). Copilot's prompt event is not answered (the CLI reads no context from it).

A repository the user ignores (``reflect-jobs ignore``: the config file's ``ignore`` list,
read at the cost of one ``stat``) is told nothing, and nothing is read from or written into
it. Any problem raises to
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
#: Harnesses whose SessionStart/UserPromptSubmit output is read as hook JSON.
JSON_HARNESSES = ("claude", "codex")
#: Harnesses told at session start only, in the Copilot SDK's ``{"additionalContext"}``.
START_ONLY_HARNESSES = ("copilot",)
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
    from reflect_jobs.envpaths import kb_root_str
    from reflect_jobs.repo import repo_for

    from . import block, store

    ref = repo_for(cwd if isinstance(cwd, str) else None)
    if is_ignored(ref):
        return ""  # `reflect-jobs ignore`: told nothing, nothing read from the repository
    open_now, open_total = _open_items(cwd, kb_root)
    conn = store.open_for_read(store.store_path(kb_root or kb_root_str()))
    repo: list[dict] = []
    general: list[dict] = []
    if conn is not None:
        try:
            repo = block.ranked(store.repo_rows(conn, ref.key)) if ref else []
            general = block.ranked(store.global_rows(conn))
        finally:
            conn.close()
    return block.render(
        ref.display if ref else None,
        repo,
        general,
        max_chars=max_chars,
        items=open_now,
        items_total=open_total,
    )


def is_ignored(ref: object) -> bool:
    """Whether the user asked never to tell (nor capture) this repository.

    Args:
        ref: A :class:`reflect_jobs.repo.Repo`, or ``None``.

    Returns:
        True when the config file's ``ignore`` list names it (``reflect_jobs.repo.listed``).
    """
    if ref is None:
        return False
    from reflect_jobs.repo import listed
    from reflect_jobs.userconfig import ignored

    entries = ignored()
    return bool(entries) and listed(ref, entries)  # type: ignore[arg-type]


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
    """The block of at most three learnings a prompt matches strongly, or ``""``.

    Args:
        cwd: The session's working directory.
        prompt: The user's prompt text.
        max_chars: The block's budget.
        kb_root: The KB root (default ``$GLOBAL_LEARNINGS_PATH``).

    Returns:
        The block text, or ``""`` when nothing matches strongly.

    Raises:
        sqlite3.Error: The store is locked past its timeout or damaged.
    """
    from reflect_jobs.envpaths import kb_root_str
    from reflect_jobs.repo import repo_for

    from . import block, store

    terms = block.prompt_terms(prompt if isinstance(prompt, str) else "")
    query = block.fts_query(terms)
    if query is None:
        return ""
    conn = store.open_for_read(store.store_path(kb_root or kb_root_str()))
    if conn is None:
        return ""
    try:
        rows = store.match_rows(conn, query, limit=12)
    finally:
        conn.close()
    ref = repo_for(cwd if isinstance(cwd, str) else None)
    if is_ignored(ref):
        return ""
    hits = block.strong_matches(terms, rows, ref.key if ref else None)
    if not hits:
        return ""
    return block.render(
        None,
        [],
        hits,
        max_chars=max_chars,
        heading="Earlier learnings that match this prompt (reflect-jobs)",
    )


def handle(argv: list[str], stdin_text: str, out: TextIOBase | None = None) -> bool:
    """Answer a recall event; tell the caller whether the payload was one.

    Args:
        argv: The hook's arguments (harness first, optionally ``--event NAME``).
        stdin_text: The payload text.
        out: Where to print (default ``sys.stdout``).

    Returns:
        True when the payload was a SessionStart or UserPromptSubmit event of Claude Code or
        Codex, or Copilot's sessionStart (answered, or deliberately ignored): the caller
        then enqueues nothing. False for every other payload — another event, Copilot's
        prompt event, one that is not JSON (the capture path reports that).

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
    start_only = harness in START_ONLY_HARNESSES
    if harness not in JSON_HARNESSES and not (start_only and kind == "session_start"):
        return False  # not a recall event of this harness: the capture path decides
    from . import block

    if kind == "session_start":
        text = session_context(payload.get("cwd"), max_chars=block.DEFAULT_MAX_CHARS)
        name = "SessionStart"
    else:
        from reflect_jobs.envpaths import get, is_truthy

        if not is_truthy(get(PROMPT_ENV)):  # the variable, else the config file's key
            return True
        text = prompt_context(
            payload.get("cwd"), payload.get("prompt"), max_chars=block.DEFAULT_MAX_CHARS // 3
        )
        name = "UserPromptSubmit"
    if text:
        answer = block.formatted(text, harness) if start_only else block.hook_json(name, text)
        answer += "\n"
        if out is None:
            import sys

            out = sys.stdout
        out.write(answer)
        out.flush()
    return True
