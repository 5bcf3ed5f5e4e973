"""Signal categories (SPEC-drain §1.5), checked in the original's order, first match wins.

``CATEGORIES`` keeps the original detector's category names and order but drops its
over-broad English words (``let``, ``type``, ``step``, ``user``, ``error``…), so that a
category describes the line instead of making it a signal. The original's table is kept as
a benchmark baseline in ``bench/original_signals.py``.
"""

from __future__ import annotations

import re

UNKNOWN = "Unknown"


def _table(spec: list[tuple[str, str]]) -> list[tuple[str, re.Pattern[str]]]:
    return [(name, re.compile(pattern, re.IGNORECASE)) for name, pattern in spec]


CATEGORIES = _table(
    [
        (
            "Code Style",
            r"\bnaming\b|\bconvention|\bstyle\b|\bformat(ting|ter)?\b|\bindent|camelcase|"
            r"snake_case|kebab-case|(variable|function|class|method|parameter) names?\b|"
            r"\btypescript\b|\bjavascript\b|\bpython\b|\bgolang\b|\brust\b|\bjava\b|"
            r"\b(var|const|interface|enum)\b|semicolon|\bquotes?\b|docstring|type hints?|"
            r"\blint(er|ing)?\b|f-strings?",
        ),
        (
            "Architecture",
            r"\bpattern|architecture|\bdesign\b|\bstructure|\bmodules?\b|\bcomponents?\b|"
            r"separation|coupling|cohesion|dependenc(y|ies)|\blayers?\b|abstraction",
        ),
        (
            "Process",
            r"workflow|\bprocess\b|procedure|protocol|\bcommit|\bbranch|\bmerge|\breview|"
            r"\bdeploy|\brelease|pull request|\bci\b",
        ),
        (
            "Domain",
            r"\bbusiness\b|\bdomain\b|\bcustomers?\b|\binvoice|\bbilling\b|\brequirements?\b",
        ),
        (
            "Tools",
            r"\btools?\b|\bcli\b|\bcommand|\bterminal\b|\bshell\b|\bgit\b|\bnpm\b|\bdocker|"
            r"\bconfig|\bsettings?\b|environment|\bpip\b|\buv\b|\bcargo\b|\bpytest\b|makefile",
        ),
        (
            "Security",
            r"security|vulnerab|exploit|injection|\bxss\b|csrf|\bpasswords?\b|\bsecrets?\b|"
            r"credential|api keys?|\btokens?\b.{0,20}(expos|leak|hardcod)|hardcod|validat|"
            r"sanitiz|\bescap|encrypt|owasp|\bcve\b|\brls\b",
        ),
        (
            "New Skill",
            r"workaround|\btrick\b|\bhack\b|\bsolution\b|\bfix(ed|es)?\b|\bdebug|"
            r"(error|bug|issue|problem) (was|is|fixed|solved)|root cause",
        ),
    ]
)


def categorize(line: str, table: list[tuple[str, re.Pattern[str]]] = CATEGORIES) -> str:
    """First category whose pattern matches ``line``, else ``Unknown``.

    Args:
        line: One dialogue line; matching ignores case.
        table: ``CATEGORIES`` (ours) or ``ORIGINAL_CATEGORIES`` (the original's broad
            words). Its order is the precedence: the first match wins.

    Returns:
        The category name, e.g. ``"Code Style"``, or ``UNKNOWN`` (``"Unknown"``).
    """
    for name, pattern in table:
        if pattern.search(line):
            return name
    return UNKNOWN
