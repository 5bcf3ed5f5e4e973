"""The recall branch of ``reflect-jobs-hook``: SessionStart context and per-prompt recall.

``reflect-jobs-hook claude|codex`` on a SessionStart payload prints the harness's own JSON,
``{"hookSpecificOutput": {"hookEventName": "SessionStart", "additionalContext": …}}``, for
the payload's ``cwd``, and enqueues nothing. At a fresh start (``source`` ``startup`` or
``clear``) no transcript is read (it may not exist yet); after a ``compact`` or a ``resume``
the tail of the payload's ``transcript_path`` gives the task's last prompts, and the block
ranks the learnings they need first (``recall/task_query.py``). With ``REFLECT_RECALL_ON_PROMPT=1`` a UserPromptSubmit payload gets at most
three strongly matching learnings the same way; without it the event is ignored.

``reflect-jobs-hook copilot --event sessionStart`` prints ``{"additionalContext": …}``, the
shape Copilot CLI injects since 1.0.11 (ARCHITECTURE §13; before, it discarded sessionStart
output). Copilot's prompt event is not answered (the CLI reads no context from it).

A repository the user ignores (``reflect-jobs ignore``: the config file's ``ignore`` list,
read at the cost of one ``stat``) is told nothing, and nothing is read from or written into
it. Any problem raises to
:func:`reflect_jobs.hook.main`, which logs it: since the answer is built completely before
anything is written, a failure prints nothing, never half a JSON document.

This module reads the event and answers it; the blocks are built by
:mod:`.session_start` (SessionStart) and :mod:`.prompt_hook` (UserPromptSubmit).

Only ``json`` and ``os`` are imported at module load: the Stop/PreCompact path imports this
module too and must not pay for ``sqlite3``; the store and the block are imported when a
recall event actually arrives.
"""

from __future__ import annotations

import json

TYPE_CHECKING = False  # not ``typing.TYPE_CHECKING``: the hook path never imports typing
if TYPE_CHECKING:
    from typing import TextIO

    from .session_start import Told

PROMPT_ENV = "REFLECT_RECALL_ON_PROMPT"
#: Used when neither the variable nor the config file says (settings_spec's default).
PROMPT_DEFAULT = "0"
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


def handle(argv: list[str], stdin_text: str, out: TextIO | None = None) -> bool:
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
    from reflect_jobs.envpaths import home_dir_str

    from . import block
    from .session_start import Told, session_block
    from .session_told import SessionTold

    sid = payload.get("session_id") or payload.get("sessionId")
    said = SessionTold(home_dir_str(), harness, sid)
    if kind == "session_start":
        from .task_query import task_text

        told = session_block(
            payload.get("cwd"),
            max_chars=block.DEFAULT_MAX_CHARS,
            session_id=str(sid) if sid else "",
            # after a compaction or a resume: its prompts; else (None) the branch's words
            task=task_text(harness, payload) or None,
        )
        text = told.text
        said.write(told.learning_ids + told.item_ids, replace=True)
        name = "SessionStart"
    else:
        from reflect_jobs.envpaths import get, is_truthy

        from .prompt_hook import prompt_recall

        if not is_truthy(get(PROMPT_ENV) or PROMPT_DEFAULT):  # variable, else config file
            return True
        text, ids = prompt_recall(
            payload.get("cwd"),
            payload.get("prompt"),
            max_chars=block.DEFAULT_MAX_CHARS // 3,
            told=said.read(),
        )
        if ids:
            said.write(ids)
        name = "UserPromptSubmit"
    if text:
        answer = block.formatted(text, harness) if start_only else block.hook_json(name, text)
        answer += "\n"
        if out is None:
            import sys

            out = sys.stdout
        out.write(answer)
        out.flush()
    if kind == "session_start":
        _record(harness, name, payload, told)
    elif text:
        _record(harness, name, payload, Told(text, {}, []))
    return True


def _record(harness: str, event: str, payload: dict, told: Told) -> None:
    """Append what this session was told to the recall log (``recall/told_log.py``); a
    failure is logged, never raised (the answer is already printed)."""
    import time

    from reflect_jobs.envpaths import home_dir_str

    from . import block, told_log

    sid = payload.get("session_id") or payload.get("sessionId")
    cwd = payload.get("cwd")
    try:
        told_log.append(
            home_dir_str(),
            {
                "ts": round(time.time(), 3),
                "session": str(sid) if sid else "",
                "harness": harness,
                "event": event,
                "cwd": cwd if isinstance(cwd, str) else "",
                "learnings": told.learning_ids,
                "items": told.item_ids,
                "withheld": told.withheld,
                "chars": len(told.text),
                "tokens": block.estimate_tokens(told.text),
            },
        )
    except OSError as exc:
        from .hook_inputs import log

        log(f"recall log: {type(exc).__name__}: {exc}")
