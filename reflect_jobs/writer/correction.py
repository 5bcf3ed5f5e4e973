"""From one line of a person's correction to a rule a person would keep — or to nothing.

The heuristic writer used to store the matched sentence as the rule, lead-ins and all
("Wrong, I already told you: this is a pnpm workspace."). A rule is an imperative sentence:
"Use pnpm install from the repo root; npm rewrites the lockfile." Made here from one line,
without a model (the clause-level rewriting is ``writer/imperative.py``):

1. The line is split into sentences, keeping their spans so the evidence stays verbatim. A
   sentence *triggers* when the signal detector calls it a correction (``classify_line``) or
   it reads as a prohibition/preference once cleaned. The rule is made from each trigger
   sentence and the one after it — a correction often names the fix next ("Wrong, I already
   told you: this is a pnpm workspace. Use pnpm install…") — so the other sentences of a long
   task prompt ("Port this project to Rust. …") never become rules.
2. Each sentence loses its lead-ins and filler and is split into clauses at ``;``, ``:``,
   dashes and the commas that start a new clause; each clause is rewritten to the
   imperative where it can be, and classed as a command, a reason, or a root cause. A
   clause that still speaks to or for a person (I, you…), a question, or a short command
   about the thing at hand ("revert that") is dropped.
3. The rule is at most two commands with the reason that follows them ("…; npm rewrites the
   lockfile"), else a reason stated just before ("Sleeping in tests is not a fix."), else a
   root cause given as a clause; one sentence per source sentence, capitalised, ending with
   a period, at most 300 characters. No command, no rule.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from reflect_jobs.cascade.signals import classify_line
from reflect_jobs.cascade.slicing import LINE_TRUNCATED
from reflect_jobs.writer.imperative import (
    PERSON,
    VERBS,
    is_imperative,
    make_title,
    points_at_the_thing_at_hand,
    strip_lead_ins,
    to_imperative,
)

RULE_MAX_CHARS = 300
EVIDENCE_MAX_CHARS = 300
#: At most this many commands in one rule (a third is usually the same point again).
MAX_COMMANDS = 2
#: A reason longer than this is a paragraph, not a reason.
REASON_MAX_CHARS = 160
#: Signal kinds that say nothing about what to do (they never trigger a rule).
_NOT_RULE_KINDS = frozenset({"approval", "time_investment", "continuation"})
_ABBREVIATIONS = ("e.g", "i.e", "etc", "vs", "cf", "incl", "approx", "esp")
#: Words that join a comma segment to the clause before it (a list, a condition, a contrast).
_CONTINUATION = frozenset(
    """
    and or but nor then so because since as unless until when whenever while if which who
    where not rather instead including especially except even e.g. i.e. like with without
    for from in on at by to into of via per than otherwise
    """.split()  # noqa: SIM905 - a word list
)
_POINTING = frozenset({"it", "that", "this", "these", "those", "they", "its"})
_RULE_SHAPE = re.compile(r"^(?:never|always|don't|do not|avoid|prefer|only)\b")
_PREFERENCE = re.compile(r"\b(?:instead of|rather than)\b|^use\s+\S+(?:\s+\S+){0,4}\s+not\s+\w")
_ROOT_CAUSE = re.compile(
    r"^(?:(?:so|and)\s+)?(?:the\s+)?(?:(?:root|real|actual|underlying)\s+)?"
    r"(?:cause|problem|issue|bug|culprit)\s+(?:was|is)\s+(?P<that>that\s+|because\s+)?"
    r"(?P<rest>.+)$",
    re.IGNORECASE,
)
_ROOT_CAUSE_MARK = re.compile(
    r"^(?:that'?s|this\s+is|it'?s|that\s+was)\s+(?:the\s+)?(?:root|real|actual)\s+"
    r"(?:cause|problem|issue)$",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class Rule:
    """A rule made from one line, and where it came from."""

    text: str
    title: str
    root_cause: str
    evidence: str
    kind: str


@dataclass(frozen=True)
class _Clause:
    text: str
    role: str  # "command" | "reason" | "cause" (a clause) | "cause_np" (a noun phrase)
    sentence: int


def _sentences(line: str) -> list[tuple[int, int]]:
    """Spans of the sentences of ``line``; a period inside a token or after "e.g." ends none."""
    spans: list[tuple[int, int]] = []
    start = 0
    for m in re.finditer(r"[.!?]+(?=\s|$)", line):
        before = line[start : m.start()].split()
        if before and before[-1].lower().rstrip(".") in _ABBREVIATIONS:
            continue
        spans.append((start, m.end()))
        start = m.end()
        while start < len(line) and line[start].isspace():
            start += 1
    if line[start:].strip():
        spans.append((start, len(line)))
    return spans


def _split(text: str) -> list[tuple[str, str]]:
    """``(piece, separator after it)`` at ``;``, ``,``, ``: ``, dashes, outside brackets/code."""
    out: list[tuple[str, str]] = []
    depth, tick, start, i = 0, False, 0, 0
    while i < len(text):
        ch, width, sep = text[i], 1, ""
        if ch == "`":
            tick = not tick
        elif not tick and ch in "([{":
            depth += 1
        elif not tick and ch in ")]}":
            depth = max(depth - 1, 0)
        elif not tick and depth == 0:
            if ch in ";," or (ch == ":" and text[i + 1 : i + 2] == " "):
                sep = ch
            elif ch in "\u2014\u2013":
                sep = "\u2014"
            elif text[i : i + 3] == " - ":
                sep, width = "\u2014", 3
        if sep:
            out.append((text[start:i], sep))
            start = i + width
        i += width
    out.append((text[start:], ""))
    return out


def _segments(text: str) -> list[str]:
    """``text``'s clauses: a comma piece that continues the clause before it stays joined."""
    merged: list[str] = []
    joiner = ""
    for piece, sep in _split(text):
        piece = piece.strip()
        if not piece:
            joiner = sep or joiner
            continue
        first = piece.split()[0].lower().strip("`,.")
        command = is_imperative(to_imperative(piece), strict=True)  # "not to X" is "don't X"
        continues = not command and (first in _CONTINUATION or len(piece.split()) < 3)
        if merged and joiner == "," and continues:
            merged[-1] = f"{merged[-1]}, {piece}"
        else:
            merged.append(piece)
        joiner = sep
    return merged


def _reason_ok(text: str, *, before: bool = False) -> bool:
    words = text.split()
    if len(words) < 3 or len(text) > REASON_MAX_CHARS or PERSON.search(text):
        return False
    if text.rstrip().endswith("?") or words[0].lower() in ("no", "wrong", "ok", "okay"):
        return False
    # A reason said *before* the rule that starts with "that"/"it" points at what the agent
    # did ("that makes builds slower"), not at the rule.
    return not (before and words[0].lower().strip(",") in _POINTING)


def _clauses(sentence: str, index: int) -> list[_Clause]:
    """The commands, reasons and causes of one sentence (none for a question)."""
    cleaned = strip_lead_ins(sentence)
    if not cleaned or sentence.rstrip().endswith("?"):
        return []
    out: list[_Clause] = []
    cause_follows = False
    for piece in _segments(cleaned.rstrip(".!")):
        piece = strip_lead_ins(piece)
        if not piece:
            continue
        if _ROOT_CAUSE_MARK.match(piece):
            cause_follows = True
            continue
        cause = _ROOT_CAUSE.match(piece)
        if cause:
            role = "cause" if cause.group("that") else "cause_np"
            out.append(_Clause(cause.group("rest").strip(), role, index))
            continue
        command = to_imperative(piece)
        if is_imperative(command):
            if not PERSON.search(command) and not points_at_the_thing_at_hand(command):
                out.append(_Clause(command, "command", index))
        elif cause_follows:
            out.append(_Clause(piece, "cause", index))
        elif _reason_ok(piece):
            out.append(_Clause(piece, "reason", index))
        cause_follows = False
    return out


def _trigger(sentence: str) -> str:
    """The signal kind that makes ``sentence`` a correction or a rule, or ``""``."""
    hit = classify_line(sentence.strip(), "user")
    if hit and hit[1] not in _NOT_RULE_KINDS:
        return hit[1]
    cleaned = to_imperative(strip_lead_ins(sentence)).lower()
    if _RULE_SHAPE.match(cleaned):
        return "rule"
    return "preference" if _PREFERENCE.search(cleaned) else ""


def _lower_first(text: str) -> str:
    """``Use X`` → ``use X`` after a semicolon; a name ("Docker", "CI") keeps its case."""
    first = text.split()[0]
    plain = first[:1].isupper() and first[1:].islower()
    if plain and first.lower().replace("'", "") in VERBS | {"never", "always", "dont", "only"}:
        return text[:1].lower() + text[1:]
    return text


def _join(parts: list[_Clause]) -> str:
    """Clauses of one sentence joined by ``;``; a reason from another sentence stays its own."""
    text = ""
    for n, part in enumerate(parts):
        if n == 0:
            text = part.text
        elif part.role == "reason" and part.sentence != parts[n - 1].sentence:
            text = f"{text.rstrip(' .;,')}. {part.text[:1].upper()}{part.text[1:]}"
        else:
            text = f"{text.rstrip(' .;,')}; {_lower_first(part.text)}"
    return text


def _finish(text: str) -> str:
    text = " ".join(text.split()).rstrip(" ,;:.!\u2014\u2013-")
    return text[:1].upper() + text[1:] + "." if text else ""


def _evidence(line: str, spans: list[tuple[int, int]], used: list[int]) -> str:
    """A verbatim piece of ``line`` of at most ``EVIDENCE_MAX_CHARS``: the line itself, else
    the sentences the rule was made from, else the first of them cut at a word boundary."""
    if len(line) <= EVIDENCE_MAX_CHARS:
        return line
    text = line[spans[used[0]][0] : spans[used[-1]][1]].strip()
    if len(text) <= EVIDENCE_MAX_CHARS:
        return text
    text = line[spans[used[0]][0] : spans[used[0]][1]].strip()[: EVIDENCE_MAX_CHARS + 1]
    if len(text) > EVIDENCE_MAX_CHARS:
        text = text[: text.rfind(" ")] if " " in text else text[:EVIDENCE_MAX_CHARS]
    return text.rstrip()


def _compose(clauses: list[_Clause], earlier: list[_Clause]) -> list[_Clause]:
    """The clauses a rule is made of: commands and the reasons after them, else a reason
    given before, else a root cause stated as a clause."""
    commands = [i for i, c in enumerate(clauses) if c.role == "command"]
    last = commands[min(MAX_COMMANDS, len(commands)) - 1]
    parts = [
        c
        for i, c in enumerate(clauses[: last + 2])
        if (c.role == "command" and i <= last) or (c.role == "reason" and i > commands[0])
    ]
    if not any(p.role == "reason" for p in parts):
        before = [c for c in earlier if c.role == "reason" and _reason_ok(c.text, before=True)]
        causes = [c for c in clauses if c.role == "cause"]
        if before:
            parts.append(before[-1])
        elif causes:
            parts.append(_Clause(causes[0].text, "reason", causes[0].sentence))
    return parts


def rule_from_line(line: str) -> Rule | None:
    """The rule one dialogue line states, or ``None`` when it states none a person would keep.

    Args:
        line: One line of the slice, stripped (a person's turn or an agent's).

    Returns:
        A :class:`Rule`: ``text`` an imperative sentence (or two, when a reason was its own
        sentence) of at most ``RULE_MAX_CHARS``; ``title`` its first command, at most 80
        characters, ended at a boundary; ``root_cause`` a stated cause or ``""``;
        ``evidence`` a verbatim substring of ``line``; ``kind`` the signal kind of the first
        trigger sentence.
    """
    truncated = line.endswith(LINE_TRUNCATED)
    if truncated:
        line = line[: -len(LINE_TRUNCATED)].rstrip()
    spans = _sentences(line)
    if truncated and spans and not re.search(r"[.!?]$", line[spans[-1][0] : spans[-1][1]]):
        spans = spans[:-1]  # the sentence the cut ended is incomplete
    sentences = [line[a:b] for a, b in spans]
    kinds = [_trigger(s) for s in sentences]
    selected = sorted({j for i, k in enumerate(kinds) if k for j in (i, i + 1) if j < len(spans)})
    clauses = [c for i in selected for c in _clauses(sentences[i], i)]
    commands = [c for c in clauses if c.role == "command"]
    if not commands:
        return None
    first = commands[0].sentence
    earlier = _clauses(sentences[first - 1], first - 1) if first > 0 else []
    parts = _compose(clauses, earlier)
    text = _finish(_join(parts))
    while len(text) > RULE_MAX_CHARS and len(parts) > 1:
        parts = parts[:-1]
        text = _finish(_join(parts))
    title = make_title(commands[0].text)
    if len(text) > RULE_MAX_CHARS or len(title.split()) < 2:
        return None
    causes = [c for c in clauses if c.role.startswith("cause")]
    return Rule(
        text=text,
        title=title,
        root_cause=_finish(causes[0].text) if causes else "",
        evidence=_evidence(line, spans, sorted({p.sentence for p in parts})),
        kind=next(kinds[i] for i in selected if kinds[i]),
    )
