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
_CODE = re.compile(
    rf"^{_IDENT}(?:\.{_IDENT})*(?:{_CALL}(?:\.{_IDENT}{_CALL}?)*|\(|\[)$"
    rf"|^{_IDENT}(?:\.{_IDENT})+$"
)
#: Identifiers made of words (``db_password``, ``dbPassword``): a variable, not a value.
_WORDY_IDENTIFIER = re.compile(r"^(?:[a-z]+(?:_[a-z]+)+|[a-z]+(?:[A-Z][a-z]+)+)$")
_WORD = re.compile(r"^[A-Za-z][A-Za-z'’-]*[.,;:!?)]*$")


def is_placeholder(value: str) -> bool:
    """Whether ``value`` stands for a secret rather than being one (``$VAR``, ``<token>``…).

    Args:
        value: A candidate secret, quotes already removed.

    Returns:
        True for references (``$X``, ``${X}``, ``os.environ[…]``, ``process.env.X``),
        template markers (``{{x}}``, ``<x>``, ``%s``), type names, masks (``***``, ``xxx``),
        an earlier redaction, and "your-key"/"example" style fillers. A value that merely
        *starts* with ``$``, ``%``, ``{`` or ``(`` is not one (generated keys do).
    """
    value = value.strip()
    return bool(_PLACEHOLDER.match(value) or _REFERENCE.match(value))


def is_code_reference(value: str) -> bool:
    """Whether ``value`` is code that reads a secret rather than the secret itself.

    Args:
        value: The right-hand side of ``NAME=value`` (up to whitespace or a quote).

    Returns:
        True for a call, subscript or dotted attribute (``get_token()``, ``settings.KEY``,
        ``os.environ[``) and for identifiers made of words (``db_password``,
        ``dbPassword``); a value with digits or symbols mixed in is not code.
    """
    value = value.strip()
    return bool(_CODE.match(value) or _WORDY_IDENTIFIER.match(value))


def is_prose(value: str) -> bool:
    """Whether ``value`` is ordinary prose, which is never a secret value.

    A sentence under a secret-named field (a learning's ``key_insight``, a ``token``
    field holding an explanation) must reach the note verbatim. A passphrase of a few
    lower-case words with no punctuation ("correct horse battery staple") is not prose.

    Args:
        value: A candidate secret.

    Returns:
        True for at least four whitespace-separated tokens, at least 60 % of them words,
        that either have sentence punctuation, start with a capital letter, or number
        seven or more tokens.
    """
    tokens = value.split()
    if len(tokens) < 4:
        return False
    wordy = sum(1 for t in tokens if _WORD.match(t))
    if wordy * 5 < len(tokens) * 3:
        return False
    sentence = any(c in value for c in ".,;:!?()") or tokens[0][:1].isupper()
    return sentence or len(tokens) >= 7


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
    mixed = any(c.isupper() for c in value) and any(c.islower() for c in value)
    return letters and (digits or mixed) and entropy(value) >= 3.0


def looks_like_password(value: str) -> bool:
    """A value said to be a password ("my password is X"): not a plain word.

    Args:
        value: The candidate, quotes removed.

    Returns:
        True for 6+ characters with a digit, a symbol, or an upper-case letter after the
        first, that are no placeholder; "invalid", "expired", "Required" are words.
    """
    value = value.rstrip(".,;:!?")
    if len(value) < 6 or is_placeholder(value):
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
    "entropy": lambda v: not is_placeholder(v) and not v.isalpha(),
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
