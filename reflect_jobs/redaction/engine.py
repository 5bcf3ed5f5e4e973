"""The redaction engine: four scans of the text, Python only on matches.

It has to be fast, because ``prepare`` runs it over multi-MB transcripts. The shapes
(:mod:`.rules`) are therefore compiled into four scans of the text, not one scan per
shape, and each scan begins with a literal or a short keyword so the ``re`` engine skips
most positions without trying a pattern there:

1. self-identifying tokens (vendor prefixes, PEM blocks, ``://user:pw@``, ``curl -u``…);
2. Azure AD client secrets and Telegram bot tokens (their shapes start with a class);
3. secret names with a value: ``NAME=value``, ``"name": "value"``, ``--name value``,
   "the password is X", "token X" — keyword-anchored, with a validator for the looser forms
   (phrases need a value that looks generated, not a word: "the token is invalid" stays);
4. vendor words (``aws``, ``datadog``, ``heroku``, ``twilio``…) followed within a short
   window by a key of that vendor's shape (an AWS secret key has no prefix of its own).

Python only runs on matches (to name the kind, check a word boundary or a validator), never
per character.
"""

from __future__ import annotations

import functools
import re
from typing import NamedTuple

from reflect_jobs.redaction.checks import (
    CHECKS,
    is_code_reference,
    is_placeholder,
    is_prose,
    is_word_value,
    looks_generated,
    looks_like_password,
)
from reflect_jobs.redaction.names import credential_kind
from reflect_jobs.redaction.rules import (
    AZURE_CLIENT_SECRET,
    CONTEXT_RULES,
    CONTEXT_WORDS,
    SECRET_NAMES,
    TELEGRAM_BOT_TOKEN,
    TOKEN_RULES,
    VENDOR_WORDS,
    TokenRule,
)

_WORD = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_")
_ALNUM = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789")


def tag(kind: str) -> str:
    """The replacement text of one secret.

    Args:
        kind: What the secret was (``aws_access_key``, ``password``…).

    Returns:
        ``[REDACTED:<kind>]``.
    """
    return f"[REDACTED:{kind}]"


def _casings(words: tuple[str, ...]) -> list[str]:
    """The spellings of a (multi-word) name: lower, UPPER, Capitalized, camelCase."""
    sep = r"[_.-]?" if len(words) > 1 else ""
    forms = {
        sep.join(w.lower() for w in words),
        sep.join(w.upper() for w in words),
        sep.join(w.capitalize() for w in words),
    }
    if len(words) > 1:
        forms.add(words[0].lower() + "".join(w.capitalize() for w in words[1:]))
    # Longest first, so "passwd" is not cut to a shorter name at the same position.
    return sorted(forms, key=len, reverse=True)


_NAME_FORMS = sorted({f for words in SECRET_NAMES for f in _casings(words)}, key=len, reverse=True)
_NAME_ALT = "|".join(_NAME_FORMS)
_VALUE_CHARS = r"[^\s\"'`,;}{)(\]\[<>\\]"
#: An assigned value (``NAME=value``) runs to whitespace, a quote, ``,``/``;`` or a backslash:
#: generated keys hold ``(``, ``)``, ``$``, ``%``; :func:`_bare_value` trims what is not it.
_ASSIGNED_CHARS = r"[^\s\"'`,;<>\\]"
_VENDOR_FORMS = {f: check for word, check in VENDOR_WORDS.items() for f in _casings((word,))}


class _Scans(NamedTuple):
    tokens: list[tuple[TokenRule, re.Pattern[str]]]
    token_scan: re.Pattern[str]
    contexts: list[tuple[TokenRule, re.Pattern[str]]]
    context_scan: re.Pattern[str]
    class_scan: re.Pattern[str]
    name_scan: re.Pattern[str]
    name_only: re.Pattern[str]
    vendor_scan: re.Pattern[str]


@functools.cache
def _scans() -> _Scans:
    """The compiled scans, built on first use: compiling them takes tens of milliseconds,
    which a CLI command or a hook that never redacts should not pay at import."""
    return _Scans(
        tokens=[(rule, re.compile(rule.pattern)) for rule in TOKEN_RULES],
        # Pass 1: all token rules as one alternation (each begins with a literal character).
        token_scan=re.compile("|".join(rule.pattern for rule in TOKEN_RULES)),
        contexts=[(rule, re.compile(rule.pattern)) for rule in CONTEXT_RULES],
        context_scan=re.compile("|".join(rule.pattern for rule in CONTEXT_RULES)),
        # Pass 2: the two shapes that begin with a character class.
        class_scan=re.compile(
            f"(?P<azure>{AZURE_CLIENT_SECRET})|(?P<telegram>{TELEGRAM_BOT_TOKEN})"
        ),
        # Pass 3: NAME … value. The alternation of names comes first: a literal-led branch.
        name_scan=re.compile(
            rf"(?:{_NAME_ALT})(?P<rest>[A-Za-z0-9_.-]*)(?:"
            # NAME: str = value (a typed constant) as well as NAME=, NAME:, NAME :=, NAME =>
            rf"(?P<asep>\\?[\"']?[ \t]*(?::=|=>|=|:(?:[ \t]*[A-Za-z_][\w.|\[\], ]{{0,40}}?[ \t]*=)?)[ \t]*)"
            rf"(?:(?P<q>\\?[\"'`])(?P<qv>[^\"'`\\\n]{{4,}}?)(?P=q)|(?P<bv>{_ASSIGNED_CHARS}{{4,}}))"
            rf"|(?P<psep>[ \t]+(?:is|was|=)[ \t]+)(?P<pq>[\"'`]?)(?P<pv>{_VALUE_CHARS}{{6,}})"
            rf"|(?P<ssep>[ \t]+)(?P<sv>{_VALUE_CHARS}{{4,}})"
            r")"
        ),
        name_only=re.compile(rf"(?:{_NAME_ALT})(?P<rest>[A-Za-z0-9_.-]*)"),
        # Pass 4: a vendor's name; its key is looked for in the window after it.
        vendor_scan=re.compile("|".join(sorted(_VENDOR_FORMS, key=len, reverse=True))),
    )


_WINDOW = 80
_CANDIDATE = re.compile(r"(?<![A-Za-z0-9/+_.~-])[A-Za-z0-9/+=_.~-]{20,64}(?![A-Za-z0-9/+=_.~-])")


_IDENT = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-")


def _identifier_start(text: str, start: int) -> int:
    """Where the identifier holding the name found at ``start`` begins (``DJANGO_`` of
    ``DJANGO_SECRET_KEY``, ``stripe.`` of ``stripe.api_key``), so the whole name is judged."""
    j = start
    while j > 0 and text[j - 1] in _IDENT:
        j -= 1
    while j < start and text[j] in "-.":  # a flag's dashes, a sentence's full stop
        j += 1
    return j


def _is_flag(text: str, start: int) -> bool:
    """Whether the name at ``start`` is part of a command-line flag (``--db-password``)."""
    j = start
    while j > 0 and (text[j - 1] in _WORD or text[j - 1] == "-"):
        j -= 1
    return text.startswith("-", j) and j < start


_CLOSERS = {")": "(", "]": "[", "}": "{"}


def _bare_value(value: str) -> str:
    """The unquoted value of ``NAME=value`` as matched, without the trailing punctuation of
    the sentence around it or a closing bracket it does not open (``(set pw=abc123)``)."""
    while value and (
        value[-1] in ".,;:!?"
        or (value[-1] in _CLOSERS and value.count(value[-1]) > value.count(_CLOSERS[value[-1]]))
    ):
        value = value[:-1]
    return value


def _name_value(m: re.Match[str]) -> tuple[str | None, int, int]:
    """For one name-scan match: (kind or None, value start, value end)."""
    text = m.string
    name = text[_identifier_start(text, m.start()) : m.end("rest")]
    kind = credential_kind(name)
    if kind is None:
        return None, 0, 0
    if kind == "weak":  # "key": only a value that looks machine-made
        group = next(g for g in ("qv", "bv", "pv", "sv") if m.group(g) is not None)
        value = m.group(group).rstrip(".,;:!?")
        if not looks_generated(value) or is_code_reference(value):
            return None, 0, 0
        return "secret", m.start(group), m.start(group) + len(value)
    numeric_ok = kind == "password"
    if m.group("asep") is not None:
        if m.group("qv") is not None:
            value, vs = m.group("qv"), m.start("qv")
            if is_prose(value) or is_code_reference(value):
                return None, 0, 0
        else:
            vs = m.start("bv")
            value = _bare_value(m.group("bv"))
            # A type or a call (Record<string, …>, getToken(…) cut at a quote) is code.
            if is_code_reference(value) or text[m.end("bv") : m.end("bv") + 1] in ("<", "("):
                return None, 0, 0
        if kind != "password" and is_word_value(value):
            return None, 0, 0
        if is_placeholder(value) or (value.replace(".", "").isdigit() and not numeric_ok):
            return None, 0, 0
        if m.group("qv") is None and len(value) < 6:
            return None, 0, 0
        # "Token: expired" is prose; "token: 9f8e7d6c…" is a value.
        prose = value.isalpha() and value.islower() and len(value) <= 16
        if prose and ":" in m.group("asep") and m.group("qv") is None and kind != "password":
            return None, 0, 0
        return kind, vs, vs + len(value)
    if m.group("psep") is not None:
        value = m.group("pv").rstrip(".,;:!?")
        if not looks_like_password(value):
            return None, 0, 0
        return kind, m.start("pv"), m.start("pv") + len(value)
    value = m.group("sv")
    if _is_flag(text, m.start()):
        if is_placeholder(value) or value.startswith("-"):
            return None, 0, 0
        return kind, m.start("sv"), m.end("sv")
    value = value.rstrip(".,;:!?")
    if not looks_generated(value):
        return None, 0, 0
    return kind, m.start("sv"), m.start("sv") + len(value)


class _Counter:
    """Counts the replacements made by the ``re.sub`` callbacks of one call."""

    def __init__(self) -> None:
        self.n = 0

    def hit(self, out: str) -> str:
        self.n += 1
        return out


def _token_sub(
    m: re.Match[str], rules: list[tuple[TokenRule, re.Pattern[str]]], counter: _Counter
) -> str:
    """The replacement of one match of a combined scan: the first rule that matches the same
    span and passes its boundary and validator checks decides; none: the text stays."""
    text, start, end = m.string, m.start(), m.end()
    for rule, rx in rules:
        rm = rx.match(text, start)
        if rm is None or rm.end() != end:
            continue
        if rule.lead and start and text[start - 1] in _WORD:
            continue
        secret = rm.group(rule.group)
        if rule.check and not CHECKS[rule.check](secret.strip("'\"")):
            continue
        gs, ge = rm.span(rule.group)
        return counter.hit(text[start:gs] + tag(rule.kind) + text[ge:end])
    return m.group(0)


def _class_sub(m: re.Match[str], counter: _Counter) -> str:
    return counter.hit(tag("azure_secret" if m.group("azure") else "telegram_token"))


def _name_sub(m: re.Match[str], counter: _Counter) -> str:
    kind, vs, ve = _name_value(m)
    if kind is None:
        return m.group(0)
    start = m.start()
    whole = m.group(0)
    return counter.hit(whole[: vs - start] + tag(kind) + whole[ve - start :])


def _vendor_spans(text: str) -> list[tuple[int, int, str]]:
    spans: list[tuple[int, int, str]] = []
    last_end = 0
    for m in _scans().vendor_scan.finditer(text):
        if m.start() < last_end:
            continue
        check = CHECKS[_VENDOR_FORMS[m.group(0)]]
        stop = text.find("\n", m.end(), m.end() + _WINDOW)
        window_end = stop if stop >= 0 else min(len(text), m.end() + _WINDOW)
        for cand in _CANDIDATE.finditer(text, m.end(), window_end):
            value = cand.group(0)
            if check(value):
                spans.append((cand.start(), cand.end(), m.group(0).lower().strip("_-")))
                last_end = cand.end()
                break
    return spans


def redact_secrets(text: str) -> tuple[str, int]:
    """Return ``(redacted_text, number_of_redactions)``.

    Args:
        text: Any text: transcript turns, a model's answer, a log line.

    Returns:
        ``(text, count)``: the text with each credential replaced by ``[REDACTED:<kind>]``
        (for a ``user:password@`` URL, ``curl -u user:pw`` or ``NAME=value`` only the
        secret part, and not when the value is a placeholder such as ``$VAR`` or
        ``<token>``), and the number of replacements made.
    """
    if not text:
        return text, 0
    counter = _Counter()
    scans = _scans()
    text = scans.token_scan.sub(lambda m: _token_sub(m, scans.tokens, counter), text)
    if any(word in text for word in CONTEXT_WORDS):
        text = scans.context_scan.sub(lambda m: _token_sub(m, scans.contexts, counter), text)
    if "Q~" in text or ":AA" in text:
        text = scans.class_scan.sub(lambda m: _class_sub(m, counter), text)
    text = scans.name_scan.sub(lambda m: _name_sub(m, counter), text)
    spans = _vendor_spans(text)
    if spans:
        parts, pos = [], 0
        for start, end, vendor in spans:
            parts += [text[pos:start], tag(f"{vendor}_key")]
            pos = end
        parts.append(text[pos:])
        text = "".join(parts)
        counter.n += len(spans)
    return text, counter.n


def redact(text: str) -> str:
    """:func:`redact_secrets` without the count (for log lines and error messages).

    Args:
        text: Any text.

    Returns:
        The redacted text.
    """
    return redact_secrets(text)[0]


def secret_key(key: str) -> str | None:
    """The kind of secret a JSON key or label names (``"password"``, ``"aws_secret_access_key"``).

    Args:
        key: A dict key, or the ``name`` of a ``{"name": …, "value": …}`` pair.

    Returns:
        ``"password"``, ``"secret"`` or ``"weak"`` (see
        :func:`reflect_jobs.redaction.names.credential_kind`), or ``None`` when the key is
        not a credential's name (``key_insight``, ``input_tokens``, ``monkey``).
    """
    return credential_kind(key)
