"""Validators for candidate secrets: placeholder, entropy, vendor key shapes (stdlib only).

A keyword or a vendor name only says "a secret may follow"; these decide whether what follows
is one (``$TOKEN`` and "invalid" are not, ``9f8e…`` is), so a look-alike survives.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Callable

_PLACEHOLDER = re.compile(
    r"^(?:\[REDACTED|os\.|process\.env|getenv|env\(|ENV\[|none$|null$|nil$|"
    r"true$|false$|str$|string$|int$|bytes$|optional|self\.|\*+$|x+$|\.\.\.|…|your[_-]|"
    r"example|dummy|placeholder|redacted|required$|undefined$|input\(|getpass|"
    r"secrets?\.|config\.|settings\.|args\.|options\.|opts\.|params?\.)",
    re.IGNORECASE,
)
#: References and template markers, as the WHOLE value: ``$VAR``, ``${VAR:-x}``, ``$(cmd)``,
#: ``%s``, ``%(name)s``, ``%VAR%``, ``{{ var }}``, ``{var}``, ``<token>``, ``(none)``. Only the
#: whole value: a Django key such as ``$@@z^kk6oa)m89…`` starts with ``$`` and is a secret.
_REFERENCE = re.compile(
    r"^(?:\$\{[^}]*\}|\$[A-Za-z_][A-Za-z0-9_]*|\$\(.*\)|%\([A-Za-z_]\w*\)[sdrif]|%[sdrif]|"
    r"%[A-Za-z_]\w*%|\{\{.*\}\}|\{[A-Za-z_][\w.]*\}|<[^<>]*>|\([A-Za-z _-]*\))"
    r"[\w./:-]*$",
    re.DOTALL,
)
#: A call, subscript or attribute read in code (``get_token()``, ``os.environ["X"]``,
#: ``settings.API_KEY``, ``request.headers.get(``): what a variable is set from, not a secret.
_IDENT = r"[A-Za-z_][A-Za-z0-9_]*"
_CALL = r"(?:\([^()]*\)|\[[^\[\]]*\])"
_DOT = r"[?!]?\."  # a.b, optional chaining a?.b, non-null a!.b
_CODE = re.compile(
    rf"^{_IDENT}(?:{_DOT}{_IDENT})*(?:{_CALL}(?:{_DOT}{_IDENT}{_CALL}?)*|\(|\[)(?:\([^()]*)?$"
    rf"|^{_IDENT}(?:{_DOT}{_IDENT})+$"
    r"|^\(\w*$"  # the start of a parameter list: setToken: (token: string) => …
)
#: Masked or elided values: ``sk-...``, ``ghp_…``, ``****1234``, ``xxxx-xxxx``.
_ELIDED = re.compile(
    r"\.\.\.|…|\*\*\*|xxxx|XXXX|\$\{"  # masks, elisions, a template's ${…}
    r"|\[[^\]]+\][{*+?]|\\[dwsS]"  # a regular expression describing a key, not a key
    r"|^[A-Za-z]{1,8}(?:[-_][A-Za-z]{1,8})*[-_]$"  # a prefix alone: sk-, sk-ant-, ghp_
)
#: Version strings and ranges (``^3.948.0``, ``>=2.1``, ``v1.2.3-rc1``).
_VERSION = re.compile(r"^(?:[~^<>=!]=?|v)?\d+(?:\.\d+)+(?:[-+][0-9A-Za-z.]+)?$")
#: Lower-case words joined by hyphens ("one-time", "read-only").
_HYPHENATED = re.compile(r"^[a-z]+(?:-[a-z]+)+$")
#: Identifiers made of words (``db_password``, ``dbPassword``): a variable, not a value.
_WORDY_IDENTIFIER = re.compile(r"^(?:[a-z]+(?:_[a-z]+)+|[a-z]+(?:[A-Z][a-z]*)+)$")
#: A command line with a file path in it (``node scripts/validate-secrets.js``).
_PATH_TOKEN = re.compile(r"^(?:\.{0,2}/|~/)?[\w.-]+(?:/[\w.-]+)+$|^[\w-]+\.(?:js|ts|py|sh|rb|go)$")
_FUNCTION_WORDS = frozenset(
    [
        "a",
        "an",
        "the",
        "of",
        "to",
        "in",
        "on",
        "at",
        "by",
        "for",
        "from",
        "with",
        "after",
        "before",
        "and",
        "or",
        "but",
        "not",
        "no",
        "is",
        "are",
        "was",
        "were",
        "be",
        "been",
        "it",
        "its",
        "this",
        "that",
        "then",
        "than",
        "when",
        "if",
        "as",
        "so",
        "into",
        "onto",
        "over",
        "under",
    ]
)
_WORD = re.compile(r"^[A-Za-z][A-Za-z'’-]*[.,;:!?)]*$")


def is_placeholder(value: str) -> bool:
    """Whether ``value`` stands for a secret rather than being one (``$VAR``, ``<token>``…).

    Args:
        value: A candidate secret, quotes already removed.

    Returns:
        True for references (``$X``, ``${X}``, ``os.environ[…]``, ``process.env.X``),
        template markers (``{{x}}``, ``<x>``, ``%s``), type names, masks (``***``, ``xxx``),
        an earlier redaction, "your-key"/"example" style fillers, elided values
        (``sk-...``) and version strings (``^3.948.0``). A value that merely *starts* with
        ``$``, ``%``, ``{`` or ``(`` is not one (generated keys do).
    """
    value = value.strip()
    return bool(
        _PLACEHOLDER.match(value)
        or _REFERENCE.match(value)
        or _ELIDED.search(value)
        or _VERSION.match(value)
    )


def is_word_value(value: str) -> bool:
    """A value that is a word or words joined by hyphens (``ollama``, ``proxy-handled``,
    ``test-key``): a test value or a mode, never a generated API key or token.

    Args:
        value: A candidate secret under a key or token name (not a password's).

    Returns:
        True for 1-16 lower-case letters, or lower-case words joined by hyphens.
    """
    value = value.strip()
    return bool(
        (value.isalpha() and value.islower() and len(value) <= 16) or _HYPHENATED.match(value)
    )


def is_code_reference(value: str) -> bool:
    """Whether ``value`` is code that reads a secret rather than the secret itself.

    Args:
        value: The right-hand side of ``NAME=value`` (up to whitespace or a quote).

    Returns:
        True for a call, subscript or dotted attribute (``get_token()``, ``settings.KEY``,
        ``data?.key``, ``os.environ[``), identifiers made of words (``db_password``,
        ``isLiteLLM``) and command lines naming a file (``node scripts/check.js``); a
        value with digits or symbols mixed in is not code.
    """
    value = value.strip()
    if _CODE.match(value) or _WORDY_IDENTIFIER.match(value):
        return True
    tokens = value.split()
    return len(tokens) >= 2 and any(_PATH_TOKEN.match(t) for t in tokens)


def is_prose(value: str) -> bool:
    """Whether ``value`` is ordinary prose, which is never a secret value.

    A sentence under a secret-named field (a learning's ``key_insight``, a ``token``
    field holding an explanation) must reach the note verbatim. A passphrase of a few
    lower-case words with no punctuation ("correct horse battery staple") is not prose.

    Args:
        value: A candidate secret.

    Returns:
        True for at least four whitespace-separated tokens, at least 60 % of them words,
        that have sentence punctuation, start with a capital letter, number seven or more,
        or number five or more with two function words ("on", "after"…) among them.
    """
    tokens = value.split()
    if len(tokens) < 4:
        return False
    wordy = sum(1 for t in tokens if _WORD.match(t))
    if wordy * 5 < len(tokens) * 3:
        return False
    sentence = any(c in value for c in ".,;:!?()") or tokens[0][:1].isupper()
    function = sum(1 for t in tokens if t.lower() in _FUNCTION_WORDS)
    return sentence or len(tokens) >= 7 or (len(tokens) >= 5 and function >= 2)


def entropy(value: str) -> float:
    """Shannon entropy of ``value`` in bits per character (0.0 for an empty string).

    Args:
        value: Any text.

    Returns:
        ``-sum(p * log2 p)`` over the character frequencies.
    """
    if not value:
        return 0.0
    n = len(value)
    return -sum(c / n * math.log2(c / n) for c in Counter(value).values())


def looks_generated(value: str, *, min_len: int = 16) -> bool:
    """A machine-made secret rather than a word: long, mixed, high entropy.

    Args:
        value: The candidate.
        min_len: The shortest length that can count.

    Returns:
        True when ``value`` is at least ``min_len`` long, has no whitespace (a sentence
        has high entropy and both cases too), mixes letters with digits (or has both
        cases), has at least 3 bits of entropy per character, and is no placeholder.
    """
    if len(value) < min_len or is_placeholder(value) or any(c.isspace() for c in value):
        return False
    letters = any(c.isalpha() for c in value)
    digits = any(c.isdigit() for c in value)
    # A capital inside the value, not only a Capitalised word ("Responsibilities:**").
    mixed = any(c.isupper() for c in value[1:]) and any(c.islower() for c in value)
    return letters and (digits or mixed) and entropy(value) >= 3.0


def looks_like_password(value: str) -> bool:
    """A value said to be a password ("my password is X"): not a plain word.

    Args:
        value: The candidate, quotes removed.

    Returns:
        True for 6+ characters with a digit, a symbol, or an upper-case letter after the
        first, that are no placeholder; "invalid", "expired", "Required" and hyphenated
        words ("one-time", "short-lived") are words.
    """
    value = value.rstrip(".,;:!?")
    if len(value) < 6 or is_placeholder(value) or _HYPHENATED.match(value):
        return False
    has_digit = any(c.isdigit() for c in value)
    has_symbol = any(not c.isalnum() for c in value)
    inner_upper = any(c.isupper() for c in value[1:])
    return has_digit or has_symbol or inner_upper


def _hex(value: str, *lengths: int) -> bool:
    return len(value) in lengths and all(c in "0123456789abcdefABCDEF" for c in value)


def _mixed_case(value: str) -> bool:
    return any(c.isupper() for c in value) and any(c.islower() for c in value)


_UUID = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")

#: Validators named by ``TokenRule.check`` and ``VENDOR_WORDS``.
CHECKS: dict[str, Callable[[str], bool]] = {
    "value": lambda v: bool(v) and not is_placeholder(v),
    "entropy": lambda v: not is_placeholder(v) and not v.isalpha() and not _HYPHENATED.match(v),
    "base64": lambda v: not is_placeholder(v) and not v.isalpha(),
    "sas": lambda v: not is_placeholder(v),
    "aws_secret": lambda v: len(v) == 40 and _mixed_case(v) and looks_generated(v, min_len=40),
    "hex32_40": lambda v: _hex(v, 32, 40) and looks_generated(v, min_len=32),
    "hex32": lambda v: _hex(v, 32) and looks_generated(v, min_len=32),
    "hex32_dc": lambda v: bool(re.fullmatch(r"[0-9a-f]{32}-us\d{1,2}", v)),
    "uuid": lambda v: bool(_UUID.match(v)),
    "okta": lambda v: len(v) == 42 and v.startswith("00") and looks_generated(v),
    "cloudflare": lambda v: (len(v) == 40 and looks_generated(v)) or _hex(v, 37),
    "azdo": lambda v: bool(re.fullmatch(r"[a-z2-7]{52}", v)),
}
