"""Secret redaction (SPEC-drain §10 B17): no credential shape may survive ``prepare``."""

from __future__ import annotations

import pytest

from reflect_jobs.cascade import EmptyLedger, prepare, redact_secrets
from reflect_jobs.transcripts import Transcript, Turn

# Realistic shapes (all fake). Each entry: (name, secret, how it appears in a message).
# ``secret`` is the part that must not reach the model.
SECRETS: list[tuple[str, str, str]] = [
    ("aws_access_key", "AKIAIOSFODNN7EXAMPLE", "export AWS_ACCESS_KEY_ID={}"),
    ("aws_sts_key", "ASIAY34FZKBOKMUTVV7A", "the temp key is {} right now"),
    (
        "aws_secret_key",
        "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
        "aws_secret_access_key = {}",
    ),
    ("github_pat_classic", "ghp_16C7e42F292c6912E7710c838347Ae178B4a", "token: {}"),
    ("github_oauth", "gho_16C7e42F292c6912E7710c838347Ae178B4a", "use {} for the API"),
    (
        "github_fine_grained",
        "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUV",
        "GH={}",
    ),
    ("slack_bot", "xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx", "slack {}"),
    ("slack_user", "xoxp-123456789012-123456789012-123456789012-abcdef0123456789", "{}"),
    (
        "slack_webhook",
        "https://hooks.slack.com/services/T00000000/B00000000/XXXXXXXXXXXXXXXXXXXXXXXX",
        "post to {}",
    ),
    ("stripe_live", "sk_live_4eC39HqLyjWDarjtT1zdp7dc", "stripe.api_key = '{}'"),
    ("stripe_restricted", "rk_live_51H8sdfJHKLsdf8sdfJKLsdf", "key {} in prod"),
    ("openai_legacy", "sk-abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGHIJ", "OPENAI {}"),
    (
        "openai_project",
        "sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4zAb7cDe0fGh3iJk6lMn9oPq2rSt5uVw8x",
        "my key is {}",
    ),
    (
        "anthropic",
        "sk-ant-api03-AbCdEfGhIjKlMnOpQrStUvWxYz0123456789-AbCdEfGhIjKlMnOpQrStUvWxYz01234567",
        "ANTHROPIC_API_KEY={}",
    ),
    ("google_api", "AIzaSyDaGmWKa4JsXZ-HjGw7ISLn_3namBGewQe", "maps key {}"),
    ("google_oauth", "ya29.a0AfH6SMBx3Kq9vVbCdEfGhIjKlMnOpQrStUv", "Bearer-less {}"),
    (
        "jwt",
        "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4ifQ"
        ".SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c",
        "the session cookie was {}",
    ),
    ("bearer", "abcdef0123456789abcdef0123456789xyz", "Authorization: Bearer {}"),
    ("npm", "npm_aBcDeFgHiJkLmNoPqRsTuVwXyZ0123456789", "//registry.npmjs.org/:_authToken={}"),
    ("twilio_key", "SK0123456789abcdef0123456789abcdef", "twilio key {}"),
    (
        "sendgrid",
        "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",
        "SENDGRID={}",
    ),
    (
        "azure_storage",
        "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==",
        "DefaultEndpointsProtocol=https;AccountName=acct;AccountKey={};EndpointSuffix=core.windows.net",
    ),
    (
        "azure_sas",
        "sv=2021-06-08&ss=b&sig=AbCdEf0123456789AbCdEf0123456789AbCdEf01234%3D",
        "SharedAccessSignature={}",
    ),
    ("url_password_pg", "s3cr3tPa55", "DATABASE_URL=postgres://admin:{}@db.internal:5432/app"),
    ("url_password_redis", "hunter2hunter2", "redis://default:{}@cache:6379/0"),
    ("env_password", "CorrectHorse42", "DB_PASSWORD={}"),
    ("json_password", "correct horse battery staple", '{{"password": "{}"}}'),
    ("yaml_secret", "9f8e7d6c5b4a39281706", "client_secret: {}"),
    ("api_key_assignment", "zq8Hk2LmP0xR5tYw", "API_KEY = '{}'"),
    ("gitlab", "glpat-xYz0123456789AbCdEfGh", "gitlab token {}"),
    ("huggingface", "hf_AbCdEfGhIjKlMnOpQrStUvWxYz01234567", "HF {}"),
    ("pypi", "pypi-AgEIcHlwaS5vcmcCJDAwMDAwMDAwLTAwMDAtMDAwMC0wMDAwLTAwMDAwMDAwMDAwMAACKlsz", "{}"),
    ("digitalocean", "dop_v1_" + "a1b2c3d4" * 8, "DO={}"),
    ("mailgun", "key-0123456789abcdef0123456789abcdef", "mailgun {}"),
    ("basic_auth", "dXNlcm5hbWU6cGFzc3dvcmQxMjM=", "Authorization: Basic {}"),
]
PEM = (
    "-----BEGIN RSA PRIVATE KEY-----\n"
    "MIIEpAIBAAKCAQEA1c7+9z5Pad7OejecsQ0bu3aozN3tihPmljnnudb9G3HECdnH\n"
    "lWu2/a1gB9JW5TBQ+AVpum9Okx7KfqkfBKL9mcHgSVYKJkY3l9eVt+GKuMXvdrvW\n"
    "-----END RSA PRIVATE KEY-----"
)
PEM_SECRET = "MIIEpAIBAAKCAQEA1c7+9z5Pad7OejecsQ0bu3aozN3tihPmljnnudb9G3HECdnH"


def test_corpus_is_big_enough() -> None:
    assert len(SECRETS) + 1 >= 30


@pytest.mark.parametrize(("name", "secret", "template"), SECRETS, ids=[s[0] for s in SECRETS])
def test_each_shape_is_redacted(name: str, secret: str, template: str) -> None:
    text, count = redact_secrets(template.format(secret))
    assert secret not in text and "[REDACTED:" in text and count >= 1


def test_pem_block_including_unterminated() -> None:
    text, count = redact_secrets(f"key:\n{PEM}\nafter")
    assert PEM_SECRET not in text and text.endswith("after") and count == 1
    text, _ = redact_secrets("-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA")
    assert "b3BlbnNzaC1rZXktdjEAAAAA" not in text


def test_no_secret_survives_prepare() -> None:
    turns = [Turn(0, "user", "Set up the deploy.")]
    for i, (_, secret, template) in enumerate(SECRETS, start=1):
        turns.append(Turn(len(turns), "user", f"Never paste this again: {template.format(secret)}"))
        turns.append(Turn(len(turns), "assistant", f"Noted {i}."))
    turns.append(Turn(len(turns), "user", f"Don't commit the key:\n{PEM}"))
    prepared = prepare(Transcript("claude", turns), EmptyLedger(), source_name="s.jsonl")
    assert prepared.action == "reflect"
    for _, secret, _ in SECRETS:
        assert secret not in prepared.slice_text
    assert PEM_SECRET not in prepared.slice_text
    assert prepared.redactions >= len(SECRETS) + 1
    assert "Never paste this again" in prepared.slice_text


def test_plain_prose_and_code_are_not_redacted() -> None:
    for text in [
        "The token count is 5 and max_tokens=1000.",
        "password: str = Field(...)",
        "api_key = os.environ['API_KEY']",
        "Use a bearer token from the environment.",
        "The secret to fast tests is fixtures.",
        "sk-learn is a library; skip it",
    ]:
        assert redact_secrets(text) == (text, 0), text
