"""Benchmark baseline: a faithful re-implementation of the original liberal detector and
slicer (SPEC-drain §1.5, §3.2).

Not part of the package and never used on the live path. ``bench/bench_prepare.py`` and
``bench/bench_cost_model.py`` measure our detector and slicer against it (precision, slice
size, cost); ``tests/test_bench_original_signals.py`` checks that it still behaves like the
original, so those figures compare against the behaviour we replaced.
"""

from __future__ import annotations

import re

from reflect_jobs.cascade.categories import UNKNOWN, categorize
from reflect_jobs.cascade.model import Signal


def _table(spec: list[tuple[str, str]]) -> list[tuple[str, re.Pattern[str]]]:
    return [(name, re.compile(pattern, re.IGNORECASE)) for name, pattern in spec]


# The original's categories, including the over-broad English words (``let``, ``type``,
# ``step``, ``user``, ``error``…) that turn most technical lines into "signals".
ORIGINAL_CATEGORIES = _table(
    [
        (
            "Code Style",
            r"naming|convention|style|format|indent|\bcase\b|camelcase|"
            r"(variable|function|class|method|parameter) name|typescript|javascript|python|"
            r"\bgo\b|rust|java|\b(var|const|let|type|interface|enum)\b|semicolon|quote|"
            r"string|bracket|brace",
        ),
        (
            "Architecture",
            r"pattern|architecture|design|structure|module|component|separation|coupling|"
            r"cohesion|dependency|layer",
        ),
        (
            "Process",
            r"workflow|process|\bstep|procedure|protocol|commit|branch|merge|review|deploy",
        ),
        (
            "Domain",
            r"business|domain|logic|\brule|requirement|customer|\buser|client|account|order",
        ),
        (
            "Tools",
            r"\btool|\bcli\b|command|terminal|shell|\bgit\b|\bnpm\b|docker|config|setting|"
            r"environment|variable",
        ),
        (
            "Security",
            r"security|vulnerab|exploit|injection|\bxss\b|csrf|"
            r"(password|secret|credential|token|key).{0,20}(expos|leak|hardcod)|validation|"
            r"sanitiz|escap|encrypt|hash|owasp|\bcve\b|\brls\b",
        ),
        (
            "New Skill",
            r"workaround|trick|hack|solution|\bfix|debug|(error|bug|issue|problem) "
            r"(was|is|fixed|solved)|time spent",
        ),
    ]
)


def _rules(spec: list[tuple[str, str]]) -> list[tuple[str, re.Pattern[str]]]:
    return [(kind, re.compile(pattern, re.IGNORECASE)) for kind, pattern in spec]


HIGH_PATTERNS = _rules(
    [
        (
            "correction",
            r"\bnever\b|\bdon'?t\b|\bdo not\b|\bstop doing\b|\bwrong\b|not like that|\bincorrect\b",
        ),
        ("prohibition", r"should not|shouldn'?t|must not|mustn'?t"),
        ("requirement", r"\balways\b|\bmust\b|\brequired\b|the rule is|correct way"),
        ("frustration", r"i already told you|again\?|not again|how many times"),
        ("explicit_rule", r"the rule is|you should know|remember that|don'?t forget"),
        ("root_cause", r"root cause was|the (issue|problem|bug) was"),
        ("fix_confirmed", r"fixed by|the (fix|solution) was|resolved by|solved by"),
        ("explicit_decision", r"chose \w+ over|decided to|went with"),
        ("breakthrough", r"turns out|figured out|found it"),
    ]
)
MEDIUM_PATTERNS = _rules(
    [
        ("approval", r"\bperfect\b|\bexactly\b|that'?s right|yes,? like that|\bcorrect\b"),
        ("positive_feedback", r"\bgood\b|great job|well done|\bnice\b|\bexcellent\b"),
        ("continuation", r"keep doing|continue with|stick with"),
        ("time_investment", r"(spent|took) \d+ ?(hour|min|day|h\b|m\b)"),
        ("docs_vs_reality", r"the docs say.*but|undocumented|misleading error"),
        ("env_gotcha", r"make sure to|requires .* installed|only works"),
    ]
)
LOW_PATTERNS = _rules(
    [
        ("suggestion", r"\bmaybe\b|\bperhaps\b|might want to|\bconsider\b"),
        ("observation", r"seems like|appears to|looks like"),
        ("tentative", r"interesting|good idea|could work"),
        ("implicit_success", r"seems to work|this approach works|so far so good"),
        ("tool_discovery", r"discovered|switched (to|from)|replaced .* with"),
    ]
)
_PREFIX_1 = re.compile(r"^(you should|always|never|don't|do not|stop|remember to)\s+", re.I)
_PREFIX_2 = re.compile(r"^(the rule is|note that|keep in mind)\s+", re.I)


def _classify(line: str) -> tuple[str, str]:
    low = line.lower()
    for level, rules in (
        ("HIGH", HIGH_PATTERNS),
        ("MEDIUM", MEDIUM_PATTERNS),
        ("LOW", LOW_PATTERNS),
    ):
        for kind, pattern in rules:
            if pattern.search(low):
                return level, kind
    return "LOW", "observation"


def _clean(line: str) -> str:
    text = _PREFIX_2.sub("", _PREFIX_1.sub("", line.strip()))
    return text[:1].upper() + text[1:]


def detect_signals_original(dialogue: str) -> list[Signal]:
    """The original's rules: per non-empty line, first HIGH/MEDIUM/LOW match, deduplicated.

    A line matching no kind pattern still becomes a LOW ``observation`` signal as soon as it
    hits a category word (the over-flagging our detector removes); an observation without
    a category word is dropped. Duplicates are detected on the cleaned text, lowercased and
    whitespace-collapsed.

    Args:
        dialogue: The whole dialogue, turn texts joined by newlines.

    Returns:
        Signals in line order. ``role`` is always ``""`` (the original did not track it);
        ``text`` has a leading directive ("you should", "always", "the rule is", ...)
        removed and its first letter capitalised.
    """
    signals: list[Signal] = []
    seen: set[str] = set()
    for number, line in enumerate(dialogue.split("\n"), start=1):
        if not line.strip():
            continue
        level, kind = _classify(line)
        category = categorize(line, ORIGINAL_CATEGORIES)
        if kind == "observation" and level == "LOW" and category == UNKNOWN:
            continue
        text = _clean(line)
        key = " ".join(text.lower().split())
        if key in seen:
            continue
        seen.add(key)
        signals.append(Signal(number, level, kind, category, text, ""))
    return signals


def slice_dialogue_original(
    dialogue: str, signals: list[Signal], context_lines: int = 3, max_chars: int = 60_000
) -> str:
    """The original ``slice_dialogue`` (SPEC-drain §3.2): front-anchored cap, crossing line kept.

    Lines are kept from the FRONT until the total reaches ``max_chars``, and the line that
    crosses it is kept whole, so one long line can take the result far past the cap: the
    behaviour the benchmarks compare ``build_slice`` against.

    Args:
        dialogue: The whole dialogue, turn texts joined by newlines.
        signals: Signals whose 1-based ``line_number`` indexes ``dialogue``'s lines; out of
            range numbers are ignored.
        context_lines: Lines kept on each side of a signal line.
        max_chars: The soft cap, in characters.

    Returns:
        The kept lines joined by newlines, with a ``…`` line between runs that are not
        adjacent and a final ``… [slice truncated]`` line when the cap was reached.
    """
    lines = dialogue.split("\n")
    keep = [False] * len(lines)
    for signal in signals:
        index = signal.line_number - 1
        if 0 <= index < len(lines):
            for i in range(
                max(0, index - context_lines), min(len(lines), index + context_lines + 1)
            ):
                keep[i] = True
    out: list[str] = []
    total = 0
    gap = False
    for line, kept in zip(lines, keep, strict=True):
        if not kept:
            gap = True
            continue
        if gap and out:
            out.append("…")
        gap = False
        out.append(line)
        total += len(line) + 1
        if total >= max_chars:
            out.append("… [slice truncated]")
            break
    return "\n".join(out)
