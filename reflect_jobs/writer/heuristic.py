"""Rule-based learnings for machines with no model (the ``heuristic`` backend, ARCHITECTURE §5).

It only trusts EXPLICIT human corrections ("no, …", "never …", "don't …", "always …",
"the root cause was …", "use X not Y", "I already told you …") and gives them a low confidence
(0.35), so a later model pass can confirm or retire them. It answers in the same
``{"actions": [...]}`` JSON as a model, so everything downstream is shared. Deterministic:
the same slice always yields the same actions.
"""

from __future__ import annotations

import re

from reflect_jobs.markers import CHILD_MARKER

CONFIDENCE = 0.35
MAX_HEURISTIC_CREATES = 5
MAX_TITLE_WORDS = 12
MAX_RULE_CHARS = 300

# The slice ends with machine-written blocks full of "always"/"never" prose of our own.
_TRAILING_BLOCKS = (
    "## Related existing learnings (belief revision)",
    "## Consolidated observations",
    "## Reflection items (candidates)",
)
_APOS = "['\u2019]"
_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("frustration", re.compile(r"\bi already told you\b", re.I)),
    ("root_cause", re.compile(r"\bthe (?:root cause|real cause|actual cause) (?:was|is)\b", re.I)),
    (
        "preference",
        re.compile(
            r"\buse\s+[\w.+/-]+(?:\s+[\w.+/-]+)?\s+(?:not|instead of|rather than)\s+\w", re.I
        ),
    ),
    ("correction", re.compile(r"^no\b\s*[,.!:;\u2014-]", re.I)),
    (
        "rule",
        re.compile(
            rf"^(?:please\s+)?(?:always|never|don{_APOS}?t|do not)\b"
            r"|\byou (?:should|must) (?:always|never|not)\b",
            re.I,
        ),
    ),
)
_SENTENCE_SPLIT = re.compile(r"(?<=[.!?])\s+")
_LEAD = re.compile(r"^(?:no\b\s*[,.!:;\u2014-]\s*|please\s+)+", re.I)
_CATEGORY_WORDS = (
    ("Security", re.compile(r"password|secret|credential|token|vulnerab|inject|sanitiz", re.I)),
    ("Tools", re.compile(r"\b(?:cli|npm|pnpm|yarn|pip|git|docker|shell|terminal|config)\b", re.I)),
    ("Process", re.compile(r"\b(?:commit|branch|merge|review|deploy|release|workflow)\b", re.I)),
)


def _dialogue_lines(slice_text: str) -> list[str]:
    cut = len(slice_text)
    for marker in _TRAILING_BLOCKS:
        pos = slice_text.find(marker)
        if pos >= 0:
            cut = min(cut, pos)
    out = []
    for raw in slice_text[:cut].splitlines():
        line = " ".join(raw.split())
        if not line or line.startswith("# ") or line.startswith("\u2026"):
            continue
        if CHILD_MARKER in line:
            continue
        out.append(line)
    return out


def _match(sentence: str) -> str:
    for kind, pattern in _PATTERNS:
        if pattern.search(sentence):
            return kind
    return ""


def _title(sentence: str) -> str:
    words = _LEAD.sub("", sentence).split()[:MAX_TITLE_WORDS]
    title = " ".join(words).rstrip(".,;:!?")
    return title[:1].upper() + title[1:]


def _category(text: str, kind: str) -> str:
    for name, pattern in _CATEGORY_WORDS:
        if pattern.search(text):
            return name
    return "New Skill" if kind == "root_cause" else "Unknown"


def _learning(sentence: str, line: str, kind: str) -> dict:
    rule = _LEAD.sub("", sentence)[:MAX_RULE_CHARS]
    rule = rule[:1].upper() + rule[1:]
    context = line[: MAX_RULE_CHARS * 2]
    return {
        "title": _title(sentence),
        "category": _category(line, kind),
        "key_insight": rule,
        "problem": "",
        "root_cause": rule if kind == "root_cause" else "",
        "fix": "",
        "rule": rule,
        "confidence_num": CONFIDENCE,
        "tags": ["heuristic", kind],
        "entities": [],
        "causal_relations": [],
        "scope": "repo",
        "body": f"## Context\n{context}\n\n(Extracted by the heuristic backend: no model was used.)",
        # the sentence itself, as the slice has it: evidence or nothing (ARCHITECTURE §6)
        "evidence": sentence[:MAX_RULE_CHARS],
    }


def heuristic_actions(slice_text: str) -> list[dict]:
    """CREATE actions for the first explicit corrections in a slice (at most five).

    The slice carries no roles, so a correction-shaped sentence an agent wrote matches too.

    Args:
        slice_text: The slice as ``prepare`` built it; its ``# `` header lines, ``…`` gap
            lines and trailing revision block are skipped.

    Returns:
        Up to ``MAX_HEURISTIC_CREATES`` CREATE actions in slice order, one per distinct
        title, each learning with confidence 0.35 and tags ``["heuristic", <kind>]``.
    """
    actions: list[dict] = []
    seen: set[str] = set()
    for line in _dialogue_lines(slice_text):
        for sentence in _SENTENCE_SPLIT.split(line):
            kind = _match(sentence)
            if not kind:
                continue
            learning = _learning(sentence, line, kind)
            key = learning["title"].lower()
            if not key or key in seen:
                continue
            seen.add(key)
            actions.append(
                {
                    "action": "CREATE",
                    "reason": f"explicit {kind.replace('_', ' ')} in the session",
                    "learning": learning,
                }
            )
            if len(actions) >= MAX_HEURISTIC_CREATES:
                return actions
    return actions
