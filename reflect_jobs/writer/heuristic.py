"""Rule-based learnings for machines with no model (the ``heuristic`` backend, ARCHITECTURE §5).

It only trusts EXPLICIT corrections and rules in the dialogue ("no, …", "never …", "don't
…", "always …", "the root cause was …", "use X not Y", "I already told you …": the signal
detector's kinds, ``cascade/signals.py``) and turns each into a rule a person would keep
(``writer/correction.py``): "Wrong, I already told you: use pnpm install from the repo root,
npm rewrites the lockfile" is stored as "Use pnpm install from the repo root; npm rewrites
the lockfile." — the person's words go to ``evidence`` (verbatim, ≤ 300 characters), never
into the rule. A correction that yields no imperative yields no learning. Learnings get a
low confidence (0.35), so they wait for review and a later model pass can confirm or retire
them. It answers in the same ``{"actions": [...]}`` JSON as a model, so everything downstream
is shared. Deterministic: the same slice always yields the same actions.
"""

from __future__ import annotations

import re
from typing import Any

from reflect_jobs.cascade.slicing import CONTEXT_MARK, GAP
from reflect_jobs.markers import CHILD_MARKER
from reflect_jobs.writer.correction import Rule, rule_from_line

CONFIDENCE = 0.35
MAX_HEURISTIC_CREATES = 5
#: Longest line of the slice quoted in a learning's body (context, not the rule).
BODY_LINE_CHARS = 500

# The slice ends with machine-written blocks full of "always"/"never" prose of our own.
_TRAILING_BLOCKS = (
    "## Related existing learnings (belief revision)",
    "## Consolidated observations",
    "## Reflection items (candidates)",
)
_CATEGORY_WORDS = (
    ("Security", re.compile(r"password|secret|credential|token|vulnerab|inject|sanitiz", re.I)),
    ("Tools", re.compile(r"\b(?:cli|npm|pnpm|yarn|pip|git|docker|shell|terminal|config)\b", re.I)),
    ("Process", re.compile(r"\b(?:commit|branch|merge|review|deploy|release|workflow)\b", re.I)),
)


def _dialogue_lines(slice_text: str) -> list[str]:
    """The slice's dialogue lines, stripped; headers, gaps and our revision blocks left out.

    Lines already reflected on (``CONTEXT_MARK``) are kept as context, marked, so that
    they never become a learning again.
    """
    cut = len(slice_text)
    for marker in _TRAILING_BLOCKS:
        pos = slice_text.find(marker)
        if pos >= 0:
            cut = min(cut, pos)
    out = []
    for raw in slice_text[:cut].splitlines():
        line = raw.strip()
        if not line or line.startswith("# ") or line == GAP or line.startswith(GAP):
            continue
        if CHILD_MARKER in line:
            continue
        out.append(line)
    return out


def _category(text: str, kind: str) -> str:
    for name, pattern in _CATEGORY_WORDS:
        if pattern.search(text):
            return name
    return "New Skill" if kind == "root_cause" else "Unknown"


def _quote(line: str) -> str:
    line = " ".join(line.removeprefix(CONTEXT_MARK).split())
    if len(line) <= BODY_LINE_CHARS:
        return line
    cut = line[:BODY_LINE_CHARS]
    return (cut[: cut.rfind(" ")] if " " in cut else cut) + " \u2026"


def _learning(rule: Rule, window: tuple[str, str, str]) -> dict[str, Any]:
    """The learning of ``rule``; ``window`` is the line before it, its line and the one after
    (what the agent had done, the correction, what it did then), quoted as context."""
    line = window[1]
    context = "\n".join(_quote(x) for x in window if x)
    return {
        "title": rule.title,
        "category": _category(line, rule.kind),
        "key_insight": rule.text,
        "problem": "",
        "root_cause": rule.root_cause,
        "fix": "",
        "rule": rule.text,
        "confidence_num": CONFIDENCE,
        "tags": ["heuristic", rule.kind],
        "entities": [],
        "causal_relations": [],
        "scope": "repo",
        # the correction verbatim, as the slice has it: evidence or nothing (ARCHITECTURE §6)
        "evidence": rule.evidence,
        "body": f"## Context\n{context}\n\n(Extracted by the heuristic backend: no model was used.)",
    }


def heuristic_actions(slice_text: str) -> list[dict[str, Any]]:
    """CREATE actions for the first explicit corrections in a slice (at most five).

    The slice carries no roles, so a correction-shaped sentence an agent wrote is read too;
    only what turns into an imperative rule is kept.

    Args:
        slice_text: The slice as ``prepare`` built it; its ``# `` header lines, ``…`` gap
            lines and trailing revision block are skipped, and lines marked as already
            reflected on (``[context] ``) are read only as context.

    Returns:
        Up to ``MAX_HEURISTIC_CREATES`` CREATE actions in slice order, one per distinct
        title, each learning with confidence 0.35, tags ``["heuristic", <kind>]``, an
        imperative ``rule`` (also its ``key_insight``), a ``title`` cut only at a boundary,
        and ``evidence``: the correction verbatim as it occurs in the slice.
    """
    actions: list[dict[str, Any]] = []
    seen: set[str] = set()
    lines = _dialogue_lines(slice_text)
    for i, line in enumerate(lines):
        if line.startswith(CONTEXT_MARK):
            continue
        rule = rule_from_line(line)
        if rule is None:
            continue
        key = rule.title.lower()
        if key in seen or rule.text.lower() in seen:
            continue
        seen.update((key, rule.text.lower()))
        window = (
            lines[i - 1] if i > 0 else "",
            line,
            lines[i + 1] if i + 1 < len(lines) else "",
        )
        actions.append(
            {
                "action": "CREATE",
                "reason": f"explicit {rule.kind.replace('_', ' ')} in the session",
                "learning": _learning(rule, window),
            }
        )
        if len(actions) >= MAX_HEURISTIC_CREATES:
            return actions
    return actions
