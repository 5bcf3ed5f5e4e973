"""Parse the extract writer's ``{"actions": [...]}`` answer and turn it into a safe plan.

Everything the model says is hostile input: it has read a transcript that may contain prompt
injection. So the plan is built defensively (ARCHITECTURE §6): revision ids are honoured only if
the revision block listed them, at most ``MAX_CREATES`` notes, types coerced (a string ``tags``
becomes ``[tags]``, not its characters), causal types from a closed enum. Benign drops are
reported in ``notes`` and are NOT failures; only unparseable output is retryable.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from reflect_jobs.invisible import strip_invisible
from reflect_jobs.lifecycle import normalise_causal_type
from reflect_jobs.sanitize import clean_text
from reflect_jobs.writer.evidence import EVIDENCE_MAX_CHARS, SCAN_CHARS, SentSlice, quote_key
from reflect_jobs.writer.forget_after import model_forget_after

MAX_CREATES = 12
DEFAULT_CONFIDENCE = 0.6
ACTION_NAMES = ("CREATE", "UPDATE", "DELETE")
STRING_FIELDS = ("title", "category", "key_insight", "problem", "root_cause", "fix", "rule", "body")
#: ``applies_to``: the stack a learning is about (which repositories it fits);
#: ``applies_when``: the tasks or symptoms it matters in, in a person's words (what a later
#: prompt, a compaction's last prompts or a search is matched against, ``recall/relevance``).
LIST_FIELDS = ("tags", "entities", "applies_to", "applies_when")
#: ``scope`` of a CREATE: the repository it was learned in (default) or every repository.
SCOPES = ("repo", "global")
DEFAULT_SCOPE = "repo"
_NOTE_SNIPPET = 60

#: Largest size, in characters, each model-written string field may have. A hostile or
#: runaway answer (a 5 MB title) is cut here, with a note, before anything is written: the
#: note, the job's stored plan and the ledger row all stay bounded (ARCHITECTURE §6).
FIELD_MAX_CHARS: dict[str, int] = {
    "title": 200,
    "category": 64,
    "key_insight": 2_000,
    "problem": 4_000,
    "root_cause": 4_000,
    "fix": 4_000,
    "rule": 1_000,
    "body": 20_000,
}
#: At most this many items per list field; items beyond it are dropped with a note.
LIST_MAX_ITEMS: dict[str, int] = {
    "tags": 20,
    "entities": 50,
    "applies_to": 12,
    "applies_when": 3,
    "causal_relations": 50,
}
#: Longest single list item (a tag, an entity name, a relation endpoint), in characters.
ITEM_MAX_CHARS = 200
#: … but an ``applies_when`` phrase names one task in a few words (the contract says under
#: 80): longer is a list of every word of a stack, which would have the learning told for
#: any prompt that shares two of them (a hostile answer's way to be told everywhere).
PHRASE_MAX_CHARS = 80
#: Longest UPDATE/DELETE reason kept (it lands in the ledger history and the note).
REASON_MAX_CHARS = 1_000
TRUNCATION_MARK = "…"
#: At most this many drop/cut notes are kept on a plan (the rest are counted in one note).
MAX_NOTES = 50


class UnparseableOutput(ValueError):
    """The answer holds no ``{"actions": [...]}`` object. Retryable (the model may do better)."""


@dataclass
class ActionPlan:
    """What survived the safety checks, plus why anything else was dropped."""

    creates: list[dict[str, Any]] = field(default_factory=list)
    updates: list[dict[str, Any]] = field(default_factory=list)
    deletes: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    skipped_over_cap: int = 0
    #: CREATEs dropped because their evidence is missing or not in the sent slice (§6).
    dropped_unevidenced: int = 0
    #: CREATE ``forget_after`` values dropped (unreadable, past or out of range); the
    #: learning itself is kept, without a TTL.
    dropped_forget_after: int = 0
    #: The answer's reflection-store plan (``writer/items.py``), ``None`` when not parsed.
    items: dict[str, Any] | None = None
    #: The backend that answered (``ModelResult.backend``); ``heuristic`` means no model.
    writer: str = ""

    @property
    def empty(self) -> bool:
        """True when nothing survived: no create, no update, no delete."""
        return not (self.creates or self.updates or self.deletes)


def strip_fence(text: str) -> str:
    """``text`` without a leading ````` ```json ````` / ````` ``` ````` and a trailing fence.

    Args:
        text: Stripped model output.

    Returns:
        The inside of the fence, stripped (the text itself when there is none).
    """
    if text.startswith("```json"):
        text = text[len("```json") :]
    elif text.startswith("```"):
        text = text[3:]
    if text.endswith("```"):
        text = text[:-3]
    return text.strip()


def parse_actions(text: Any) -> list[Any]:
    """SPEC-drain §4.2 parsing: strip, drop a fence, take first ``{`` .. last ``}``.

    Raises ``UnparseableOutput`` (a ``ValueError``) for anything else; never another exception,
    even for pathological nesting (``RecursionError`` is converted).

    Args:
        text: The model's result text (any value: a non-string is unparseable).

    Returns:
        The ``actions`` value, a list whose items are not checked yet (see
        :func:`plan_actions`); ``[]`` when the object has no ``actions`` key.

    Raises:
        UnparseableOutput: Not a string, no ``{...}`` span, invalid or too deeply nested
            JSON, not an object, or ``actions`` not a list.
    """
    if not isinstance(text, str):
        raise UnparseableOutput(f"model output is {type(text).__name__}, not text")
    body = strip_fence(text.strip())
    start, end = body.find("{"), body.rfind("}")
    if start < 0 or end <= start:
        raise UnparseableOutput("no JSON object in model output")
    try:
        obj = json.loads(body[start : end + 1])
    except (ValueError, RecursionError) as exc:
        raise UnparseableOutput(f"invalid JSON in model output: {str(exc)[:120]}") from None
    if not isinstance(obj, dict):
        raise UnparseableOutput("model output JSON is not an object")
    actions = obj.get("actions", [])
    if not isinstance(actions, list):
        raise UnparseableOutput(f"'actions' is {type(actions).__name__}, not a list")
    return actions


def _snippet(value: Any) -> str:
    try:
        text = value if isinstance(value, str) else repr(value)
    except Exception:  # deep nesting makes repr() raise RecursionError
        text = "?"
    text = " ".join(text.split())
    return text[:_NOTE_SNIPPET] + ("…" if len(text) > _NOTE_SNIPPET else "")


def _to_str(value: Any) -> str:
    """Scalars become their text, containers their JSON; ``None`` becomes ``""``.

    Always storable (``clean_text``): a lone surrogate from a ``\\ud800`` escape or a NUL
    in the model's answer would otherwise fail the note write or the ledger commit. And
    never hiding anything (``strip_invisible``): tag characters, bidi overrides and
    zero-width characters a hostile transcript steered into the answer are dropped here, at
    the write boundary, so no note, ledger row or block carries them (issue 24)."""
    if value is None:
        return ""
    if isinstance(value, str):
        return strip_invisible(clean_text(value))
    if isinstance(value, bool | int | float):
        return str(value)
    try:
        return strip_invisible(clean_text(json.dumps(value, ensure_ascii=False)))
    except (TypeError, ValueError, RecursionError):
        return ""


def _to_str_list(value: Any) -> list[str]:
    """A string is ONE item (the original iterated its characters); empties and dups dropped."""
    if isinstance(value, str | int | float) and not isinstance(value, bool):
        items: list[Any] = [value]
    elif isinstance(value, list | tuple):
        items = list(value)
    else:
        items = []
    out: dict[str, None] = {}  # ordered and O(1) membership: a hostile list can be huge
    for item in items:
        if isinstance(item, bool) or not isinstance(item, str | int | float):
            continue
        text = strip_invisible(clean_text(str(item))).strip()
        if text:
            out.setdefault(text)
    return list(out)


def _confidence(value: Any) -> float:
    """Clamp to 0..1; non-numeric (bools, garbage, NaN) -> 0.6 like the original renderer."""
    if isinstance(value, bool):
        return DEFAULT_CONFIDENCE
    num: float | None = None
    if isinstance(value, int | float):
        num = float(value)
    elif isinstance(value, str):
        try:
            num = float(value.strip())
        except ValueError:
            num = None
    if num is None or math.isnan(num):
        return DEFAULT_CONFIDENCE
    return min(1.0, max(0.0, num))


def _relations(value: Any) -> list[dict[str, Any]]:
    if isinstance(value, dict):
        value = [value]
    if not isinstance(value, list):
        return []
    out: list[dict[str, Any]] = []
    for rel in value:
        if not isinstance(rel, dict):
            continue
        source, target = _to_str(rel.get("source")).strip(), _to_str(rel.get("target")).strip()
        if source and target:
            out.append(
                {"source": source, "target": target, "type": normalise_causal_type(rel.get("type"))}
            )
    return out


def normalise_scope(value: Any) -> str:
    """A CREATE's ``scope``: ``repo`` or ``global``; anything else is ``repo``.

    Args:
        value: What the model wrote (any case and surrounding space accepted).

    Returns:
        ``"global"`` for a general lesson, else ``"repo"`` (the default: a lesson is
        about the repository it was learned in unless the model says otherwise).
    """
    norm = value.strip().lower() if isinstance(value, str) else ""
    return norm if norm in SCOPES else DEFAULT_SCOPE


def normalise_learning(learning: dict[str, Any], scope: Any = None) -> dict[str, Any]:
    """Every learning field present with the right type; values otherwise untouched.

    Args:
        learning: A CREATE action's ``learning`` object, as the model wrote it.
        scope: The action's own ``scope``, which wins over ``learning["scope"]``.

    Returns:
        A new dict: each of ``STRING_FIELDS`` as a string (a container as its JSON, a missing
        one ``""``; ``title`` stripped; an empty ``category`` becomes ``"Unknown"``),
        ``confidence_num`` clamped to 0..1 (0.6 when not a number), ``tags``,
        ``entities``, ``applies_to`` and ``applies_when`` as lists of distinct non-empty
        strings, ``causal_relations`` as ``{source, target, type}`` dicts with a type from
        ``CAUSAL_TYPES`` (else ``relates_to``), ``scope`` from :func:`normalise_scope`.
        Other keys are dropped.
    """
    out: dict[str, Any] = {name: _to_str(learning.get(name)) for name in STRING_FIELDS}
    out["scope"] = normalise_scope(scope if scope is not None else learning.get("scope"))
    out["title"] = out["title"].strip()
    if not out["category"].strip():
        out["category"] = "Unknown"
    out["confidence_num"] = _confidence(learning.get("confidence_num"))
    for name in LIST_FIELDS:
        out[name] = _to_str_list(learning.get(name))
    out["causal_relations"] = _relations(learning.get("causal_relations"))
    return out


def _cut(text: str, limit: int) -> str:
    """``text`` shortened to ``limit`` characters, the last one a truncation mark."""
    return text if len(text) <= limit else text[: limit - 1] + TRUNCATION_MARK


def cap_learning(learning: dict[str, Any]) -> list[str]:
    """Bound every field of a normalised learning in place; say what was cut.

    Model strings are hostile input of any size: without a bound a 5 MB title became a
    15.8 MB note and 63 MB of ledger growth. Strings longer than :data:`FIELD_MAX_CHARS`
    are truncated (ending in ``…``), list fields keep their first :data:`LIST_MAX_ITEMS`
    items, and each item (tag, entity, relation endpoint) is cut to
    :data:`ITEM_MAX_CHARS`. Nothing is dropped silently: each cut is one reason.

    Args:
        learning: What :func:`normalise_learning` returned; modified in place.

    Returns:
        One reason per cut field, e.g. ``"title cut from 5000000 to 200 chars"``; empty
        when everything was within bounds.
    """
    reasons: list[str] = []
    for name, limit in FIELD_MAX_CHARS.items():
        value = learning.get(name)
        if isinstance(value, str) and len(value) > limit:
            learning[name] = _cut(value, limit)
            reasons.append(f"{name} cut from {len(value)} to {limit} chars")
    for name in LIST_FIELDS:
        learning[name] = cap_list(name, learning.get(name) or [], reasons)
    rels = learning.get("causal_relations") or []
    capped = [
        {
            **rel,
            "source": _cut(rel["source"], ITEM_MAX_CHARS),
            "target": _cut(rel["target"], ITEM_MAX_CHARS),
        }
        for rel in rels
    ]
    if capped != rels:
        reasons.append(f"causal_relations: endpoints cut to {ITEM_MAX_CHARS} chars")
    limit = LIST_MAX_ITEMS["causal_relations"]
    if len(capped) > limit:
        reasons.append(f"causal_relations: kept {limit} of {len(capped)}")
        capped = capped[:limit]
    learning["causal_relations"] = capped
    return reasons


def cap_list(name: str, items: list[str], reasons: list[str]) -> list[str]:
    """One list field bounded: each item cut to its length (:data:`PHRASE_MAX_CHARS` for
    ``applies_when``, else :data:`ITEM_MAX_CHARS`), the first :data:`LIST_MAX_ITEMS` kept,
    duplicates dropped; each cut appended to ``reasons``.

    Args:
        name: One of :data:`LIST_FIELDS`.
        items: Its normalised items.
        reasons: Where each cut is said.

    Returns:
        The bounded items.
    """
    longest = PHRASE_MAX_CHARS if name == "applies_when" else ITEM_MAX_CHARS
    cut = [_cut(item, longest) for item in items]
    if cut != items:
        reasons.append(f"{name}: items cut to {longest} chars")
    limit = LIST_MAX_ITEMS[name]
    if len(cut) > limit:
        reasons.append(f"{name}: kept {limit} of {len(cut)} items")
        cut = cut[:limit]
    return list(dict.fromkeys(cut))


def _update_phrases(action: dict[str, Any], index: int, notes: list[str]) -> list[str]:
    """An UPDATE's ``applies_when`` (the confirming session's words for the task), bounded
    as a CREATE's are; a cut is one note."""
    reasons: list[str] = []
    phrases = cap_list("applies_when", _to_str_list(action.get("applies_when")), reasons)
    notes += [f"action #{index}: {reason}" for reason in reasons]
    return phrases


def _action_name(action: dict[str, Any], index: int, notes: list[str]) -> str | None:
    name = action.get("action")
    if isinstance(name, str):
        if name in ACTION_NAMES:
            return name
        norm = name.strip().upper()
        if norm in ACTION_NAMES:
            notes.append(f"action #{index}: accepted {name!r} as {norm}")
            return norm
    notes.append(f"action #{index}: ignored unknown action {_snippet(name)!r}")
    return None


def _evidence_of(action: dict[str, Any], learning: dict[str, Any] | None) -> Any:
    """The quote a CREATE or UPDATE gives: ``learning.evidence``, else the action's own."""
    if isinstance(learning, dict) and learning.get("evidence") is not None:
        return learning.get("evidence")
    return action.get("evidence")


def _unchecked_evidence(raw: Any) -> str:
    """A quote kept as written, bounded, when no sent slice is given to check it against."""
    text = _to_str(raw[:SCAN_CHARS] if isinstance(raw, str) else raw)
    return _cut(" ".join(text.split()), EVIDENCE_MAX_CHARS)


def _check_create(
    learning: dict[str, Any], raw: Any, sent: SentSlice | None, index: int, notes: list[str]
) -> bool:
    """Put the CREATE's checked evidence on ``learning``; False when it must be dropped."""
    if sent is None:
        learning["evidence"] = _unchecked_evidence(raw)
        learning["evidence_origin"] = ""
        return True
    found = sent.find(raw)
    if found is None:
        why = "no evidence" if quote_key(raw) is None else "evidence not in the slice"
        notes.append(f"action #{index}: dropped CREATE {_snippet(learning['title'])!r}: {why}")
        return False
    if isinstance(raw, str) and len(raw) > EVIDENCE_MAX_CHARS:
        notes.append(f"action #{index}: evidence cut from {len(raw)} to {EVIDENCE_MAX_CHARS} chars")
    learning["evidence"] = found.quote
    learning["evidence_origin"] = found.origin
    return True


def plan_actions(
    actions: Any,
    *,
    allowed_ids: set[str],
    sent: SentSlice | None = None,
    now: datetime | None = None,
) -> ActionPlan:
    """Turn parsed actions into an ``ActionPlan``. Total: never raises.

    ``allowed_ids`` must be the ids the revision block listed, in the same format; a target id
    is honoured only on an exact match, so an id the transcript *mentions* cannot be revised.

    Args:
        actions: What :func:`parse_actions` returned (any value: a non-list gives an empty
            plan with a note).
        allowed_ids: The ids the revision block listed; non-string members are ignored.
        sent: The slice the prompt held (:func:`reflect_jobs.writer.evidence.sent_slice`).
            Given (the write stage always gives it), a CREATE is kept only when its
            ``evidence`` occurs in it, and an UPDATE's evidence is kept only then; ``None``
            keeps every CREATE with its evidence unchecked (for callers that check later).
        now: What a CREATE's ``forget_after`` TTL counts from (default now).

    Returns:
        The :class:`ActionPlan`: normalised CREATEs with every field bounded
        (:func:`cap_learning`; the first ``MAX_CREATES``, the rest counted in
        ``skipped_over_cap``) and ``evidence``/``evidence_origin`` set, ``{target_id,
        reason}`` UPDATEs (with ``evidence``/``evidence_origin`` when their quote was found)
        and DELETEs for listed ids, ``dropped_unevidenced``, and one note per dropped, cut
        or corrected action (an action name in the wrong case is accepted with a note; a
        field over its size bound is truncated with a note naming it). A CREATE's optional
        ``forget_after`` is kept as an absolute ISO time (``writer/forget_after.py``); a bad
        one is dropped, counted in ``dropped_forget_after`` and noted.
    """
    plan = ActionPlan()
    when = now or datetime.now(UTC)
    allowed = {i for i in (allowed_ids or ()) if isinstance(i, str)}
    if not isinstance(actions, list):
        plan.notes.append(f"actions is {type(actions).__name__}, not a list: ignored")
        return plan
    creates: list[dict[str, Any]] = []
    for index, action in enumerate(actions):
        if not isinstance(action, dict):
            plan.notes.append(f"action #{index}: dropped non-object {type(action).__name__}")
            continue
        name = _action_name(action, index, plan.notes)
        if name is None:
            continue
        if name == "CREATE":
            learning = action.get("learning")
            if not isinstance(learning, dict) or not _to_str(learning.get("title")).strip():
                plan.notes.append(f"action #{index}: CREATE missing learning.title")
                continue
            normalised = normalise_learning(learning, action.get("scope"))
            raw = _evidence_of(action, learning)
            if not _check_create(normalised, raw, sent, index, plan.notes):
                plan.dropped_unevidenced += 1
                continue
            for reason in cap_learning(normalised):
                plan.notes.append(f"action #{index}: {reason}")
            expires, why = model_forget_after(learning.get("forget_after"), when)
            if expires is not None:
                normalised["forget_after"] = expires
            elif why is not None:
                plan.dropped_forget_after += 1
                plan.notes.append(f"action #{index}: {why}: dropped (the learning is kept)")
            creates.append(normalised)
            continue
        target = action.get("target_id")
        if not isinstance(target, str) or target not in allowed:
            plan.notes.append(f"dropped {name} for unlisted id {_snippet(target)!r}")
            continue
        reason = _to_str(action.get("reason"))
        if len(reason) > REASON_MAX_CHARS:
            plan.notes.append(
                f"action #{index}: reason cut from {len(reason)} to {REASON_MAX_CHARS} chars"
            )
            reason = _cut(reason, REASON_MAX_CHARS)
        rev: dict[str, Any] = {"target_id": target, "reason": reason}
        if name == "UPDATE" and (phrases := _update_phrases(action, index, plan.notes)):
            rev["applies_when"] = phrases
        if name == "UPDATE" and (raw := _evidence_of(action, action.get("learning"))):
            found = sent.find(raw) if sent is not None else None
            if found is not None:
                rev["evidence"], rev["evidence_origin"] = found.quote, found.origin
            elif sent is not None:
                plan.notes.append(f"action #{index}: UPDATE evidence not in the slice: ignored")
        (plan.updates if name == "UPDATE" else plan.deletes).append(rev)
    if len(creates) > MAX_CREATES:
        plan.skipped_over_cap = len(creates) - MAX_CREATES
        plan.notes.append(
            f"over cap: kept {MAX_CREATES}, dropped {plan.skipped_over_cap} CREATE(s)"
        )
        creates = creates[:MAX_CREATES]
    plan.creates = creates
    if len(plan.notes) > MAX_NOTES:  # a million junk actions must not store a million notes
        extra = len(plan.notes) - MAX_NOTES
        plan.notes = [*plan.notes[:MAX_NOTES], f"… and {extra} more note(s)"]
    return plan
