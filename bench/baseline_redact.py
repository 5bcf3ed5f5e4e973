"""The redactor before the hardening issue (items 12–13), kept as the baseline of
``bench/bench_redact.py``: 30 shapes, one ``re.sub`` pass per shape plus a generic
``NAME=value`` pass. Copied from ``reflect_jobs/cascade/secrets.py`` as it was at commit
f9aa368; not used by the package.
"""

from __future__ import annotations

import re
from collections.abc import Callable

_I = re.IGNORECASE


def _tag(kind: str) -> str:
    return f"[REDACTED:{kind}]"


# (kind, pattern); the whole match is replaced.
_TOKEN_RULES: list[tuple[str, re.Pattern[str]]] = [
    (
        "private_key",
        re.compile(
            r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----.*?"
            r"(?:-----END [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|\Z)",
            re.DOTALL,
        ),
    ),
    (
        "aws_access_key",
        re.compile(r"\b(?:AKIA|ASIA|AGPA|AIDA|AROA|AIPA|ANPA|ANVA|A3T[A-Z0-9])[A-Z0-9]{16}\b"),
    ),
    ("github_token", re.compile(r"\b(?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{30,}\b")),
    ("github_token", re.compile(r"\bgithub_pat_[A-Za-z0-9_]{22,}\b")),
    ("gitlab_token", re.compile(r"\bglpat-[A-Za-z0-9_-]{20,}\b")),
    ("slack_webhook", re.compile(r"https://hooks\.slack\.com/services/[A-Za-z0-9/_-]+")),
    ("slack_token", re.compile(r"\bxox[abposr]-[A-Za-z0-9-]{10,}")),
    ("slack_token", re.compile(r"\bxapp-\d-[A-Za-z0-9-]{10,}")),
    ("stripe_key", re.compile(r"\b(?:sk|rk|pk)_(?:live|test)_[A-Za-z0-9]{16,}\b")),
    ("stripe_key", re.compile(r"\bwhsec_[A-Za-z0-9]{20,}\b")),
    ("anthropic_key", re.compile(r"\bsk-ant-[A-Za-z0-9_-]{20,}")),
    ("openai_key", re.compile(r"\bsk-(?:proj-|svcacct-|admin-|None-)?[A-Za-z0-9_-]{20,}")),
    ("google_api_key", re.compile(r"\bAIza[0-9A-Za-z_-]{35}")),
    ("google_oauth", re.compile(r"\bya29\.[0-9A-Za-z_-]{20,}")),
    ("google_oauth", re.compile(r"\bGOCSPX-[0-9A-Za-z_-]{20,}")),
    ("jwt", re.compile(r"\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}")),
    ("npm_token", re.compile(r"\bnpm_[A-Za-z0-9]{36}\b")),
    ("pypi_token", re.compile(r"\bpypi-[A-Za-z0-9_-]{50,}")),
    ("huggingface_token", re.compile(r"\bhf_[A-Za-z0-9]{30,}\b")),
    ("sendgrid_key", re.compile(r"\bSG\.[A-Za-z0-9_-]{16,}\.[A-Za-z0-9_-]{16,}")),
    ("twilio_key", re.compile(r"\b(?:SK|AC)[0-9a-fA-F]{32}\b")),
    ("mailgun_key", re.compile(r"\bkey-[0-9a-f]{32}\b")),
    ("digitalocean_token", re.compile(r"\bdo[opr]_v1_[a-f0-9]{64}\b")),
    ("shopify_token", re.compile(r"\bshp(?:at|ss|ca|pa)_[a-fA-F0-9]{32}\b")),
    ("databricks_token", re.compile(r"\bdapi[a-f0-9]{32}\b")),
    ("sas_signature", re.compile(r"(?<=[?&;])sig=[A-Za-z0-9%/+=]{20,}")),
    ("bearer_token", re.compile(r"\bbearer\s+[A-Za-z0-9._~+/-]{16,}=*", _I)),
    ("basic_auth", re.compile(r"\bbasic\s+[A-Za-z0-9+/]{12,}=*", _I)),
]

# user:password@host in any URL scheme; the user name is kept for context.
_URL_PASSWORD = re.compile(r"\b([a-z][a-z0-9+.-]*://[^\s:/@]+):([^\s@/]+)@", _I)

_SECRET_NAME = (
    r"[A-Za-z0-9_.-]*(?:password|passwd|passphrase|pwd|secret|token|api[_-]?key|apikey|"
    r"access[_-]?key|private[_-]?key|client[_-]?secret|credentials?|auth[_-]?token|"
    r"accountkey|sharedaccess(?:key|signature)|connection[_-]?string|sas)[A-Za-z0-9_.-]*"
)
# NAME = value / NAME: value / "name": "value" (also inside connection strings: ;AccountKey=…;)
_ASSIGNMENT = re.compile(
    r"(?P<name>\b" + _SECRET_NAME + r")(?P<sep>[\"']?\s*(?::=|=|:)\s*)"
    r"(?:(?P<q>[\"'])(?P<qval>[^\"'\n]{4,})(?P=q)|(?P<val>[^\s\"',;}{)(\]]{6,}))",
    _I,
)
_PLACEHOLDER = re.compile(
    r"^(?:\[REDACTED|\$|\{\{|<|os\.|process\.env|getenv|env\(|none$|null$|true$|false$|"
    r"str$|string$|int$|bytes$|optional|self\.|\*+$|x+$|\.\.\.|your[_-])",
    _I,
)


def _assignment(match: re.Match[str]) -> str:
    value = match.group("qval") or match.group("val") or ""
    if _PLACEHOLDER.match(value):
        return match.group(0)
    kind = "password" if re.search(r"pass|pwd", match.group("name"), _I) else "secret"
    quote = match.group("q") or ""
    return f"{match.group('name')}{match.group('sep')}{quote}{_tag(kind)}{quote}"


def redact_secrets(text: str) -> tuple[str, int]:
    """Return ``(redacted_text, number_of_redactions)``.

    Args:
        text: Any text; ``prepare`` passes whole turns, before anything else reads them.

    Returns:
        ``(text, count)``: the text with each credential replaced by ``[REDACTED:<kind>]``
        (for a ``user:password@`` URL only the password; for a ``NAME=value`` assignment
        only the value, and not when the value is a placeholder such as ``$VAR`` or
        ``<token>``), and the number of replacements made.
    """
    if not text:
        return text, 0
    count = 0

    def counted(repl: Callable[[re.Match[str]], str]) -> Callable[[re.Match[str]], str]:
        def inner(match: re.Match[str]) -> str:
            nonlocal count
            out = repl(match)
            if out != match.group(0):
                count += 1
            return out

        return inner

    for kind, pattern in _TOKEN_RULES:
        text = pattern.sub(counted(lambda m, k=kind: _tag(k)), text)
    text = _URL_PASSWORD.sub(counted(lambda m: f"{m.group(1)}:{_tag('url_password')}@"), text)
    text = _ASSIGNMENT.sub(counted(_assignment), text)
    return text, count
