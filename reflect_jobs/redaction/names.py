"""Whether a name (a JSON key, an env variable, a flag) is a credential's name (stdlib only).

A name is read as the sequence of its words — ``DB_PASSWORD`` is ``db password``,
``apiKey`` is ``api key``, ``client-key-data`` is ``client key data`` — never as a string
that merely *contains* a secret word. Matching substrings is what made ``key_insight``
(every note's lesson), ``monkey`` and ``keyboard_layout`` read as secrets, and turned every
note's key insight into ``[REDACTED:secret]``. So:

* a *credential word* (``password``, ``secret``, ``token``, ``auth``, ``credentials``…) or a
  *key pair* (``api key``, ``private key``, ``access key``…) anywhere in the name makes it a
  credential's name — unless a word after it says the name is about something else
  (``token count``, ``password file``, ``auth method``, ``secret name``);
* a bare ``key`` counts only as the name's last word (``WEATHER_KEY``, ``"key"``), and only
  *weakly*: its value must look machine-made (:func:`reflect_jobs.redaction.checks.looks_generated`);
* everything else (``key_insight``, ``monkey``, ``tokenizer``, ``author``, ``passport``) is not.
"""

from __future__ import annotations

import re

#: Words that name a secret on their own (lower case).
CREDENTIAL_WORDS = frozenset(
    {
        "password",
        "passwd",
        "passphrase",
        "pwd",
        "pass",
        "secret",
        "secrets",
        "token",
        "credential",
        "credentials",
        "creds",
        "apikey",
        "privatekey",
        "accesskey",
        "secretkey",
        "auth",
        "sas",
        "pat",
    }
)
#: Credential words that count only as the name's last word.
LAST_WORD_ONLY = frozenset({"pass", "auth", "sas", "pat", "creds"})
#: ``<word> key`` pairs that name a secret (``api key``, ``AccountKey``, ``client-key-data``).
KEY_QUALIFIERS = frozenset(
    {
        "api",
        "access",
        "private",
        "secret",
        "signing",
        "encryption",
        "master",
        "account",
        "client",
        "license",
        "consumer",
        "app",
        "application",
        "service",
        "storage",
        "subscription",
        "shared",
        "session",
        "webhook",
        "hmac",
        "jwt",
        "crypt",
        "decryption",
    }
)
#: Credential words also recognised at the end of a word written without separators
#: (``PGPASSWORD``, ``csrftoken``, ``clientsecret``); short ones are not (``bypass``, ``compat``).
GLUED = ("password", "passwd", "passphrase", "secret", "secrets", "token", "credentials")
#: Two-word names that are secrets though neither word is a credential word on its own.
PAIRS = frozenset({("key", "data"), ("connection", "string"), ("conn", "str")})
#: Words after the credential word that make the name about something else: a count, a
#: type, a file that holds the secret, a setting about it (``token_count``,
#: ``PASSWORD_FILE``, ``auth_method``, ``secret_name``, ``api_key_env``).
NOT_SECRET_WORDS = frozenset(
    {
        "count",
        "counts",
        "counter",
        "type",
        "types",
        "limit",
        "limits",
        "budget",
        "usage",
        "url",
        "urls",
        "uri",
        "uris",
        "endpoint",
        "path",
        "paths",
        "file",
        "files",
        "filename",
        "dir",
        "directory",
        "name",
        "names",
        "length",
        "len",
        "size",
        "ttl",
        "expiry",
        "expires",
        "expire",
        "expired",
        "expiration",
        "exp",
        "env",
        "var",
        "variable",
        "ref",
        "refs",
        "header",
        "headers",
        "field",
        "fields",
        "prefix",
        "format",
        "kind",
        "source",
        "sources",
        "provider",
        "providers",
        "helper",
        "helpers",
        "manager",
        "managers",
        "store",
        "stores",
        "policy",
        "policies",
        "rotation",
        "strength",
        "hash",
        "hasher",
        "hashed",
        "digest",
        "reset",
        "required",
        "enabled",
        "disabled",
        "authentication",
        "based",
        "less",
        "method",
        "methods",
        "mode",
        "scheme",
        "version",
        "index",
        "max",
        "min",
        "label",
        "description",
        "hint",
        "prompt",
        "regex",
        "pattern",
        "validator",
        "validation",
        "error",
        "errors",
        "message",
        "status",
        "state",
        "timeout",
        "age",
        "algorithm",
        "alg",
        "encoding",
        "flow",
        "request",
        "scope",
        "scopes",
        "issuer",
        "audience",
        "generator",
        "rules",
        "rule",
        "check",
        "location",
    }
)
_SPLIT = re.compile(r"[^A-Za-z0-9]+")
_WORDS = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")


def words(name: str) -> list[str]:
    """The words of a name, lower case: ``DB_PASSWORD`` → ``["db", "password"]``,
    ``apiKey`` → ``["api", "key"]``, ``APIKey`` → ``["api", "key"]``, digits apart.

    Args:
        name: A JSON key, variable, flag or label.

    Returns:
        The words, in order (empty for a name without letters or digits).
    """
    out: list[str] = []
    for part in _SPLIT.split(name):
        for w in _WORDS.findall(part):
            w = w.lower()
            glued = next((g for g in GLUED if w.endswith(g) and len(w) > len(g)), None)
            if glued and w not in CREDENTIAL_WORDS:
                out.extend((w[: -len(glued)], glued))
            else:
                out.append(w)
    return out


def credential_kind(name: str) -> str | None:
    """Which secret a name names: ``"password"``, ``"secret"``, ``"weak"`` or ``None``.

    Args:
        name: The whole name (``DJANGO_SECRET_KEY``, ``key_insight``, ``x-api-key``).

    Returns:
        ``"password"`` for password words (``pass``, ``passwd``, ``pwd``, ``passphrase``),
        ``"secret"`` for the other credential words and key pairs, ``"weak"`` for a bare
        ``key`` as the last word (its value must look machine-made to count), ``None`` when
        the name is not a credential's.
    """
    ws = words(name)
    last = -1
    kind = ""
    for i, w in enumerate(ws):
        prev = ws[i - 1] if i else ""
        if w in CREDENTIAL_WORDS:
            last, kind = i, ("password" if w.startswith("pass") or w == "pwd" else "secret")
        elif w == "key" and prev in KEY_QUALIFIERS or (prev, w) in PAIRS:
            last, kind = i, kind or "secret"
    if last >= 0:
        if any(w in NOT_SECRET_WORDS for w in ws[last + 1 :]):
            return None
        # Short or generic words count only as the name's last word (DB_PASS, basic_auth,
        # AZURE_PAT): "pass_rate", "auth_domain", "sas_url" name something else.
        if ws[last] in LAST_WORD_ONLY and last != len(ws) - 1:
            return None
        return kind
    if ws and ws[-1] in ("key", "keys"):
        return "weak"
    return None
