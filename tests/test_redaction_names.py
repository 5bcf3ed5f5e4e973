"""A value is redacted because *it* looks like a credential, never for its field's name alone.

The names: a credential's name is judged by its words (``DB_PASSWORD`` is "db password"),
so ``key_insight``, ``monkey``, ``keyboard_layout`` and ``token_count`` are not credentials'
names. The values: prose is never a secret; code that reads a secret is not one either; a
generated key is taken whole even when it holds ``(``, ``$`` or ``%``.
"""

from __future__ import annotations

import json
import random

import pytest

from reflect_jobs.redaction import redact_structured
from reflect_jobs.redaction.checks import is_code_reference, is_placeholder, is_prose
from reflect_jobs.redaction.engine import redact_secrets
from reflect_jobs.redaction.names import credential_kind, words
from reflect_jobs.redaction.structured import redact_value

CREDENTIAL_NAMES = {
    "password": "password",
    "passwd": "password",
    "DB_PASSWORD": "password",
    "PGPASSWORD": "password",
    "MYSQL_PWD": "password",
    "db_pass": "password",
    "secret": "secret",
    "client_secret": "secret",
    "clientSecret": "secret",
    "DJANGO_SECRET_KEY": "secret",
    "secret_key_base": "secret",
    "token": "secret",
    "access_token": "secret",
    "githubToken": "secret",
    "_authToken": "secret",
    "api_key": "secret",
    "apikey": "secret",
    "apiKey": "secret",
    "x-api-key": "secret",
    "APIKey": "secret",
    "private_key": "secret",
    "private_key_id": "secret",
    "AccountKey": "secret",
    "client-key-data": "secret",
    "auth": "secret",
    "_auth": "secret",
    "basic_auth": "secret",
    "credentials": "secret",
    "aws_secret_access_key": "secret",
    "connection_string": "secret",
    "key": "weak",
    "WEATHER_KEY": "weak",
}
NOT_CREDENTIAL_NAMES = [
    "key_insight",
    "monkey",
    "keyboard_layout",
    "token_count",
    "max_tokens",
    "input_tokens",
    "tokenizer",
    "author",
    "oauth",
    "auth_method",
    "auth_domain",
    "passport",
    "bypass",
    "pass_rate",
    "password_file",
    "PASSWORD_FILE",
    "secret_name",
    "api_key_env",
    "token_type",
    "secretary",
    "keys_pressed",
    "title",
    "rule",
    "summary",
]


@pytest.mark.parametrize(("name", "kind"), sorted(CREDENTIAL_NAMES.items()))
def test_credential_names_are_recognised_by_their_words(name: str, kind: str) -> None:
    assert credential_kind(name) == kind


@pytest.mark.parametrize("name", NOT_CREDENTIAL_NAMES)
def test_names_that_only_contain_a_secret_word_are_not_credentials(name: str) -> None:
    assert credential_kind(name) is None


def test_words_split_every_way_names_are_written() -> None:
    assert words("DB_PASSWORD") == ["db", "password"]
    assert words("apiKey") == ["api", "key"]
    assert words("client-key-data") == ["client", "key", "data"]
    assert words("HTTPServer2Token") == ["http", "server", "2", "token"]
    assert words("key_insight") == ["key", "insight"]


def test_prose_under_any_field_name_is_kept_verbatim() -> None:
    answer = {
        "key_insight": "Use pnpm install from the repository root; npm rewrites the lockfile",
        "password": "The password is read from the vault at start-up, never from the repo.",
        "token": "Rotate the token before it expires",
        "secret": "Keep secrets in the environment and out of the tracked config files",
        "monkey": "A Monkey Patch On requests.Session Broke Retries",
        "token_count": 1200,
    }
    assert redact_value(answer) == (answer, 0)
    text = json.dumps(answer)
    assert redact_structured(text) == (text, 0)


def test_a_secret_under_a_credential_name_is_still_redacted() -> None:
    answer = {
        "password": "correct horse battery staple",  # a passphrase, not prose
        "api_key": "zq8Hk2LmP0xR5tYw",
        "client_secret": "9f8e7d6c5b4a39281706",
        "key": "f3a9c2e7b1d84a6f9e0c5b2a7d1e8f40",
        "token": "hunter2!",
    }
    redacted, n = redact_value(answer)
    assert n == len(answer)
    assert all(v.startswith("[REDACTED:") for v in redacted.values())


@pytest.mark.parametrize(
    "value",
    [
        "Use pnpm install from the repository root; npm rewrites the lockfile",
        "Rotate the token before it expires",
        "the retry budget is spent before the lease ends and nothing is charged",
    ],
)
def test_is_prose(value: str) -> None:
    assert is_prose(value)


@pytest.mark.parametrize(
    "value",
    ["correct horse battery staple", "hunter2", "zq8Hk2LmP0xR5tYw", "a b", "x=1 y=2 z=3 w=4"],
)
def test_is_not_prose(value: str) -> None:
    assert not is_prose(value)


@pytest.mark.parametrize(
    "value",
    ["get_token()", "get_token(", "os.environ[", "settings.API_KEY", "db_password", "dbPassword"],
)
def test_code_that_reads_a_secret_is_not_one(value: str) -> None:
    assert is_code_reference(value)
    assert redact_secrets(f"password={value}") == (f"password={value}", 0)


@pytest.mark.parametrize("value", ["$DB_PASSWORD", "${TOKEN:-x}", "$(cat key)", "%s", "<token>"])
def test_whole_references_are_placeholders(value: str) -> None:
    assert is_placeholder(value)


@pytest.mark.parametrize(
    "value", ["$@@z^kk6oa)m89oz6w!w3r", "%k8#x1q@w3e4r5t6y7", "(x8&m!2kq9z#v)e"]
)
def test_a_generated_value_that_starts_like_a_reference_is_not_a_placeholder(value: str) -> None:
    assert not is_placeholder(value)


def test_django_secret_keys_are_redacted_whole_whatever_they_hold() -> None:
    """Generated Django keys (``a-z0-9!@#$%^&*(-_=+)``) start with ``$``, ``%``, ``(`` and
    hold brackets: 145 of 600 such lines leaked (in part or whole) before."""
    rng = random.Random(20261203)
    chars = "abcdefghijklmnopqrstuvwxyz0123456789!@#$%^&*(-_=+)"
    for _ in range(200):
        key = "".join(rng.choice(chars) for _ in range(50))
        for line in (f"SECRET_KEY={key}", f"DJANGO_SECRET_KEY={key}", f"export SECRET_KEY='{key}'"):
            out, n = redact_secrets(line)
            assert n == 1 and key[5:45] not in out, (line, out)
            out, _ = redact_structured(json.dumps({"body": line}))
            assert key[5:45] not in out


def test_an_assigned_value_keeps_the_sentence_around_it() -> None:
    assert redact_secrets("(set password=Tr0ub4dor9 first).") == (
        "(set password=[REDACTED:password] first).",
        1,
    )
    assert redact_secrets("Server=db;Password=Tr0ub4dor9;Encrypt=true")[0] == (
        "Server=db;Password=[REDACTED:password];Encrypt=true"
    )
