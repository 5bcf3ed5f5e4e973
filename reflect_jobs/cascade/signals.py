"""Our signal detector: the original's levels, kinds and categories, made precise.

Why it differs from the original (SPEC-drain §1.5, §10 B16), which flags ~20–25% of
technical lines ("let me check" is Code Style because of ``let``):

* A line is a signal only when a *kind* pattern matches. Categories describe a signal; they
  never create one (the original kept any line that merely hit a category word).
* Corrections are read from USER turns, and only in directive shape: "never/don't/stop/avoid"
  at the start of a clause or after "please/you/we/but…", not inside "I don't know".
  "wrong" counts as "that's wrong"/"the wrong file", not as "what's wrong with CI?".
* Assistant turns narrate ("Let me check…", "I must run the tests"): only the strong,
  knowledge-bearing kinds count there — root_cause, fix_confirmed, breakthrough,
  docs_vs_reality. An agent stating a root cause is exactly what a learning records.
* LOW kinds (maybe, seems like, interesting…) are never signals: they were the bulk of the
  original's noise and never carry a correction by themselves.
* Approval (MEDIUM) must *open* a user line ("Perfect, that's it"); "the perfect hash"
  is not approval.
* A person interrupting the agent or rejecting a tool call (the readers' fixed
  ``INTERRUPTED``/``REJECTED`` lines) is feedback on the turn it cut short: a MEDIUM signal
  of kind ``interruption``/``tool_rejection`` placed on that turn's last line, so its slice
  window shows what was interrupted. The gate never reflects on these alone.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable

from reflect_jobs.cascade.categories import categorize
from reflect_jobs.cascade.model import Signal
from reflect_jobs.transcripts.model import Turn
from reflect_jobs.transcripts.noise import INTERRUPTED, REJECTED

MAX_SIGNAL_TEXT = 500  # a signal's text is for hashing/recall, not the slice; cap it


def _rx(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern, re.IGNORECASE)


# A clause start: line start, after punctuation, or after a softener/subject word.
_CLAUSE = r"(?:^|[.!?;:,(—–-]\s*|\b(?:please|and|but|so|also|then|just|you|we|again|now|here)\s+)"
_NOT_DIRECTIVE_VERB = (
    r"(?!know\b|think\b|see\b|understand\b|have\b|worry\b|mind\b|care\b|really\b|get\b|"
    r"seem\b|recall\b|remember\b|want\b|like\b|agree\b|believe\b|expect\b|need to worry\b)"
)

STRONG_KINDS = frozenset({"root_cause", "fix_confirmed", "breakthrough", "docs_vs_reality"})
#: A person's interruption / tool rejection: real feedback, never enough on its own.
FEEDBACK_KINDS = frozenset({"interruption", "tool_rejection"})
_FEEDBACK_LINES = {INTERRUPTED: "interruption", REJECTED: "tool_rejection"}
FEEDBACK_LEVEL = "MEDIUM"

# (level, kind, pattern), first match wins; order = the original's precedence.
RULES: list[tuple[str, str, re.Pattern[str]]] = [
    (
        "HIGH",
        "frustration",
        _rx(
            r"\bi (?:already|just|literally) (?:told|said|asked)\b|\bhow many times\b|"
            r"\bnot again\b|\bagain\?|\bi said (?:not|no|to)\b|\bas i said\b"
        ),
    ),
    (
        "HIGH",
        "explicit_rule",
        _rx(
            r"\bthe rule is\b|\bremember (?:that|to)\b|\bdon'?t forget\b|\byou should know\b|"
            r"\bkeep in mind\b|\b(?:the|our) convention is\b|\bfrom now on\b|\bgoing forward\b|"
            r"\bin this (?:repo|project|codebase|team),? (?:we|you)\b"
        ),
    ),
    (
        "HIGH",
        "prohibition",
        _rx(r"\b(?:should ?n[o']?t|must ?n[o']?t|must not|should not|shall not|may not)\b"),
    ),
    (
        "HIGH",
        "correction",
        _rx(
            r"^\s*(?:no|nope|nah)\s*(?:[,.!;:—–-]|$)|"
            r"^\s*(?:wrong|incorrect)\b|"
            r"\b(?:that'?s|this is|it'?s|you'?re|that was|this was|is) (?:still )?"
            r"(?:wrong|incorrect|not (?:right|correct|what i (?:asked|wanted|meant)))\b|"
            r"\bthe wrong (?:file|branch|function|approach|way|place|directory|dir|version|"
            r"one|module|class|method|name|path|order|api|table|column|key|value)\b|"
            r"\bnot like that\b|\bthat'?s not (?:it|how|the way)\b|"
            + _CLAUSE
            + r"(?:never|don'?t|dont|do not|avoid)\s+"
            + _NOT_DIRECTIVE_VERB
            + r"|\bstop \w+ing\b|"
            r"\b(?:revert|undo|roll back) (?:that|this|it|the|your)\b|"
            r"\bwhy (?:did|do|would) you\b|"
            r"\byou (?:broke|deleted|removed|ignored|forgot|missed|skipped)\b|"
            r"\binstead of\b|\buse \S+(?: \S+){0,4} instead\b|"
            r"\b(?:it|this|that|these|those|they|you|we|the \w+|\w+s) should (?:be|use|have been|go|live|"
            r"return|call|raise|not)\b"
        ),
    ),
    (
        "HIGH",
        "requirement",
        _rx(
            _CLAUSE + r"(?:always|must)\b|\b(?:is|are) required\b|\bthe (?:correct|right) way\b|"
            r"\bprefer \S+(?: \S+){0,4} (?:over|to)\b|\bwe (?:use|prefer|want) \S+(?: \S+){0,4}"
            r",? not\b"
        ),
    ),
    (
        "HIGH",
        "root_cause",
        _rx(
            r"\broot cause\b|\bthe (?:real |actual )?(?:issue|problem|bug|error|culprit|cause) "
            r"(?:was|is) (?:that|because|caused|due|a |an |the |in )|\b(?:was|is|were) caused by\b|"
            r"\bfailed because\b|\bfails because\b"
        ),
    ),
    (
        "HIGH",
        "fix_confirmed",
        _rx(
            r"\b(?:fixed|resolved|solved) (?:it |this |that )?by\b|"
            r"\bthe (?:fix|solution|workaround) (?:was|is)\b|\bthat (?:fixed|solved) it\b|"
            r"\bthat worked\b"
        ),
    ),
    (
        "HIGH",
        "explicit_decision",
        _rx(
            r"\bdecided to\b|\b(?:we'?ll|let'?s|we will|i'?ll) go with\b|\bwent with\b|"
            r"\b(?:we|i) chose\b|\bchose \S+ over\b"
        ),
    ),
    (
        "HIGH",
        "breakthrough",
        _rx(
            r"\bturns out\b|\bturned out\b|\bfigured (?:it )?out\b|\bfound it\b|\bthe trick (?:is|was)\b"
        ),
    ),
    (
        "MEDIUM",
        "approval",
        _rx(
            r"^\s*(?:perfect|exactly|that'?s (?:right|it|correct|perfect)|"
            r"yes,? (?:exactly|like that|that'?s it|perfect)|correct[.!]?\s*$|"
            r"great,? (?:that|this) works|this is (?:exactly|perfect)|lgtm|well done|"
            r"nice work|good job|great job)\b"
        ),
    ),
    ("MEDIUM", "continuation", _rx(r"\bkeep doing\b|\bcontinue with\b|\bstick with\b")),
    (
        "MEDIUM",
        "time_investment",
        _rx(r"\b(?:spent|took|wasted) \d+\s*(?:hours?|mins?|minutes?|days?|h|m)\b"),
    ),
    (
        "MEDIUM",
        "docs_vs_reality",
        _rx(r"\bthe docs (?:say|said)\b.*\bbut\b|\bundocumented\b|\bmisleading error\b"),
    ),
    (
        "MEDIUM",
        "env_gotcha",
        _rx(
            r"\bmake sure (?:to|that|you)\b|\bonly works (?:with|on|if|when)\b|\brequires \S+(?: \S+)? installed\b"
        ),
    ),
]


def classify_line(line: str, role: str) -> tuple[str, str] | None:
    """``(level, kind)`` if ``line`` is a signal when said by ``role``, else ``None``.

    Args:
        line: One dialogue line (stripped); a typographic apostrophe counts as ``'``.
        role: ``"user"`` is checked against every rule, any other role only against the
            ``STRONG_KINDS``.

    Returns:
        The level (``"HIGH"`` or ``"MEDIUM"``) and kind of the first matching rule in
        ``RULES`` order, or ``None``.
    """
    text = line.replace("\u2019", "'")
    for level, kind, pattern in RULES:
        if role != "user" and kind not in STRONG_KINDS:
            continue
        if pattern.search(text):
            return level, kind
    return None


def detect_signals(turns: list[Turn]) -> list[Signal]:
    """Signals of a dialogue; ``line_number`` indexes ``Transcript.lines()`` (1-based).

    Args:
        turns: The turns, already privacy-filtered (``prepare.filter_turns``).

    Returns:
        One :class:`Signal` per signal line, in order. ``line_number`` counts the lines of
        ``turns`` (each turn's text split on newlines; the lines ``prepare`` slices), so it
        indexes ``Transcript.lines()`` of a transcript with these turns. ``text`` is the
        stripped line cut to ``MAX_SIGNAL_TEXT``; lines shorter than 2 characters are
        never signals. An interruption/rejection line is a signal on the agent's last line
        before it (its text names both), so the list is sorted by line number.
    """
    signals: list[Signal] = []
    number = 0
    last_agent: tuple[int, str] | None = None  # (line number, text) of the agent's last line
    for turn in turns:
        for line in turn.text.split("\n"):
            number += 1
            stripped = line.strip()
            if len(stripped) < 2:
                continue
            feedback = _FEEDBACK_LINES.get(stripped) if turn.role == "user" else None
            if feedback is not None:
                signals.append(_feedback_signal(feedback, stripped, number, last_agent))
                continue
            if turn.role != "user":
                last_agent = (number, stripped)
            hit = classify_line(stripped, turn.role)
            if hit is None:
                continue
            level, kind = hit
            text = stripped[:MAX_SIGNAL_TEXT]
            signals.append(Signal(number, level, kind, categorize(text), text, turn.role))
    signals.sort(key=lambda sig: sig.line_number)
    return signals


def _feedback_signal(
    kind: str, line: str, number: int, last_agent: tuple[int, str] | None
) -> Signal:
    """The signal of an interruption/rejection, placed on the agent line it cut short."""
    if last_agent is None:
        return Signal(number, FEEDBACK_LEVEL, kind, "Process", line, "user")
    at, said = last_agent
    text = f"{line} after: {said}"[:MAX_SIGNAL_TEXT]
    return Signal(at, FEEDBACK_LEVEL, kind, categorize(said), text, "user")


def signal_set_hash(signals: Iterable[Signal]) -> str:
    """SPEC-drain §1.6: 16 hex of sha256 over the sorted set of lowercased, stripped signal texts.

    Order- and duplicate-insensitive, so the same findings in a re-captured transcript hash
    the same and the dup-signal-hash skip can fire.

    Args:
        signals: The transcript's signals (only their text is hashed).

    Returns:
        16 lowercase hex characters; no signals at all hash to a fixed value, not ``""``.
    """
    payload = {"signals": sorted({s.text.strip().lower() for s in signals})}
    blob = json.dumps(payload, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()[:16]
