"""Parse the optional ``items`` and ``summary`` keys of an extract answer (hostile input).

Beside ``actions`` the one paid call may keep the Reflection Store true (docs/REFLECTIONS.md,
"The reflector"): ``"items": {"update": [{"id", "status", "note"}], "new": [{"kind",
"title", "body"}]}`` and ``"summary": "…"``. The model has read a transcript that may carry
prompt injection, so this is bounded like the actions (ARCHITECTURE §6): unknown kinds and
statuses are dropped, ``done``/``dropped`` need a note, fields are cut to their caps, at most
:data:`MAX_ITEM_UPDATES` updates and :data:`MAX_ITEM_NEW` new items per answer. Whether an id
was *offered* is not decided here but in the add stage, against the ids the job recorded.
A missing ``items`` key (an older answer, the heuristic writer) is an empty plan; nothing
here ever fails the attempt.
"""

from __future__ import annotations

import json
import re
from typing import Any

from reflect_jobs.invisible import strip_invisible
from reflect_jobs.sanitize import clean_text
from reflect_jobs.writer.evidence import SentSlice

#: What an answer's ``items.new`` may create (``summary`` has its own key).
ITEM_KINDS = ("action", "question", "handoff", "learning", "decision", "gotcha", "idea", "note")
ITEM_STATUSES = ("done", "dropped", "open")
MAX_ITEM_UPDATES = 20
#: Half the block's ten item lines (``recall/items.py:MAX_ITEMS``): one pass of a model that
#: read a hostile page never fills the open list on its own (issue 24).
MAX_ITEM_NEW = 5
ITEM_TITLE_MAX = 200
ITEM_BODY_MAX = 4_000
ITEM_NOTE_MAX = 1_000
SUMMARY_MAX = 2_000
_ID = re.compile(r"^#?([0-9a-f]{4,16})$")
#: How much of a model's evidence quote is kept for the check (``writer/evidence.py``).
EVIDENCE_SCAN = 1_200

__all__ = [
    "ITEM_KINDS",
    "MAX_ITEM_NEW",
    "MAX_ITEM_UPDATES",
    "answer_object",
    "evidenced",
    "plan_items",
]


def answer_object(text: Any) -> dict[str, Any]:
    """The answer's JSON object (the ``parse_actions`` rules), or ``{}`` when there is none.

    Args:
        text: The model's result text.

    Returns:
        The decoded object; ``{}`` for anything unparseable (the actions parser reports that).
    """
    if not isinstance(text, str):
        return {}
    body = text.strip()
    start, end = body.find("{"), body.rfind("}")
    if start < 0 or end <= start:
        return {}
    try:
        obj = json.loads(body[start : end + 1])
    except (ValueError, RecursionError):
        return {}
    return obj if isinstance(obj, dict) else {}


def _text(value: Any, limit: int) -> tuple[str, bool]:
    """A string field cleaned (invisible characters stripped), whitespace-trimmed and cut to
    ``limit`` (and whether it was)."""
    if not isinstance(value, str):
        return "", False
    text = strip_invisible(clean_text(value)).strip()
    if len(text) > limit:
        return text[: limit - 1] + "…", True
    return text, False


def _update(raw: Any, n: int, notes: list[str]) -> dict[str, str] | None:
    if not isinstance(raw, dict):
        notes.append(f"items.update #{n}: not an object")
        return None
    ident = raw.get("id")
    m = _ID.match(ident.strip().lower()) if isinstance(ident, str) else None
    if m is None:
        notes.append(f"items.update #{n}: not an item id")
        return None
    out: dict[str, str] = {"id": "#" + m.group(1)}
    status = raw.get("status")
    status = status.strip().lower() if isinstance(status, str) else None
    if status and status not in ITEM_STATUSES:
        notes.append(f"items.update #{n}: unknown status")
        return None
    note, cut = _text(raw.get("note"), ITEM_NOTE_MAX)
    title, cut_t = _text(raw.get("title"), ITEM_TITLE_MAX)
    body, cut_b = _text(raw.get("body"), ITEM_BODY_MAX)
    if cut or cut_t or cut_b:
        notes.append(f"items.update #{n}: field cut to its cap")
    if status in ("done", "dropped") and not note:
        notes.append(f"items.update #{n}: {status} without a note")
        return None
    if not status and not (title or body):
        notes.append(f"items.update #{n}: no status and nothing to edit")
        return None
    if status:
        out["status"] = status
    for key, value in (("note", note), ("title", " ".join(title.split())), ("body", body)):
        if value:
            out[key] = value
    if isinstance(raw.get("evidence"), str):
        out["evidence"] = raw["evidence"][:EVIDENCE_SCAN]
    return out


def _new(raw: Any, n: int, notes: list[str]) -> dict[str, str] | None:
    if not isinstance(raw, dict):
        notes.append(f"items.new #{n}: not an object")
        return None
    kind = raw.get("kind")
    kind = kind.strip().lower() if isinstance(kind, str) else ""
    if kind not in ITEM_KINDS:
        notes.append(f"items.new #{n}: unknown kind")
        return None
    title, cut_t = _text(raw.get("title"), ITEM_TITLE_MAX)
    title = " ".join(title.split())
    if not title:
        notes.append(f"items.new #{n}: no title")
        return None
    body, cut_b = _text(raw.get("body"), ITEM_BODY_MAX)
    if cut_t or cut_b:
        notes.append(f"items.new #{n}: field cut to its cap")
    out = {"kind": kind, "title": title, "body": body}
    if isinstance(raw.get("evidence"), str):
        out["evidence"] = raw["evidence"][:EVIDENCE_SCAN]
    return out


def plan_items(obj: Any) -> dict[str, Any]:
    """The bounded items plan of an answer object. Total: never raises.

    Args:
        obj: What :func:`answer_object` returned (any value).

    Returns:
        ``{"update": [...], "new": [...], "summary": str | None, "notes": [...]}``: updates
        ``{"id": "#hex", "status"?, "note"?, "title"?, "body"?}``, new items ``{"kind",
        "title", "body"}``, the summary cut to :data:`SUMMARY_MAX`, one note per drop or cut.
    """
    plan: dict[str, Any] = {"update": [], "new": [], "summary": None, "notes": []}
    if not isinstance(obj, dict):
        return plan
    notes: list[str] = plan["notes"]
    items = obj.get("items")
    if items is not None and not isinstance(items, dict):
        notes.append("items is not an object: ignored")
        items = None
    items = items or {}
    for key, cap, one in (("update", MAX_ITEM_UPDATES, _update), ("new", MAX_ITEM_NEW, _new)):
        raw = items.get(key) or []
        if not isinstance(raw, list):
            notes.append(f"items.{key} is not a list: ignored")
            continue
        if len(raw) > cap:
            notes.append(f"items.{key}: kept {cap} of {len(raw)}")
            raw = raw[:cap]
        for n, entry in enumerate(raw):
            parsed = one(entry, n, notes)
            if parsed is not None:
                plan[key].append(parsed)
    summary, cut = _text(obj.get("summary"), SUMMARY_MAX)
    if cut:
        notes.append(f"summary cut to {SUMMARY_MAX} chars")
    plan["summary"] = summary or None
    return plan


def evidenced(plan: dict[str, Any], sent: SentSlice) -> dict[str, Any]:
    """The plan keeping only closes, drops and new items whose evidence the slice holds.

    Evidence or nothing, as for learnings (ARCHITECTURE §6): the model read a transcript and
    may claim work was finished that never was. Every ``done``/``dropped`` update and every
    new item must quote the sent slice's dialogue or condensed-transcript lines
    (``SentSlice.find``: the same normalised, verbatim, bounded match); the stored note then
    carries the slice's own text of the quote. Reopens and edits need none.

    Args:
        plan: What :func:`plan_items` returned.
        sent: The slice exactly as the prompt held it.

    Returns:
        The same plan, changed in place: unproven entries dropped (a note each,
        ``"unevidenced"`` counts them), proven ones carrying ``note`` with the quote.
    """
    notes: list[str] = plan.setdefault("notes", [])
    dropped = 0
    kept_updates = []
    for n, upd in enumerate(plan.get("update") or []):
        quote = upd.pop("evidence", None)
        if upd.get("status") not in ("done", "dropped"):
            kept_updates.append(upd)
            continue
        found = sent.find(quote)
        if found is None:
            dropped += 1
            notes.append(f"items.update #{n}: evidence not found in the session: dropped")
            continue
        upd["note"] = f'{upd.get("note") or upd["status"]} [evidence: "{found.quote}"]'
        kept_updates.append(upd)
    kept_new = []
    for n, new in enumerate(plan.get("new") or []):
        found = sent.find(new.pop("evidence", None))
        if found is None:
            dropped += 1
            notes.append(f"items.new #{n}: evidence not found in the session: dropped")
            continue
        new["note"] = f'evidence: "{found.quote}"'
        kept_new.append(new)
    plan["update"], plan["new"] = kept_updates, kept_new
    plan["unevidenced"] = dropped
    return plan
