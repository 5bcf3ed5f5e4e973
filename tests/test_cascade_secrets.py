"""Secret redaction (SPEC-drain §10 B17): no credential shape may survive ``prepare``.

The corpus (``tests/secret_corpus.py``) pairs every shape with a near miss that must survive,
so a rule cannot pass by redacting everything that looks a little like a key.
"""

from __future__ import annotations

import pytest
from secret_corpus import PEM, PEM_SECRET, PLAIN_TEXT, SECRETS

from reflect_jobs.cascade import EmptyLedger, prepare, redact_secrets
from reflect_jobs.redaction import redact_structured
from reflect_jobs.transcripts import Transcript, Turn

IDS = [s[0] for s in SECRETS]


def test_corpus_is_big_enough() -> None:
    assert len({name for name, *_ in SECRETS}) == len(SECRETS)
    assert len(SECRETS) + 1 >= 60  # + the PEM block
    assert all(lookalike for *_, lookalike in SECRETS)


@pytest.mark.parametrize(("name", "secret", "template", "lookalike"), SECRETS, ids=IDS)
def test_each_shape_is_redacted(name: str, secret: str, template: str, lookalike: str) -> None:
    text, count = redact_secrets(template.format(secret))
    assert secret not in text and "[REDACTED:" in text and count >= 1, text


@pytest.mark.parametrize(("name", "secret", "template", "lookalike"), SECRETS, ids=IDS)
def test_each_lookalike_survives(name: str, secret: str, template: str, lookalike: str) -> None:
    assert redact_secrets(lookalike) == (lookalike, 0)


@pytest.mark.parametrize(("name", "secret", "template", "lookalike"), SECRETS, ids=IDS)
def test_each_shape_is_redacted_inside_json(
    name: str, secret: str, template: str, lookalike: str
) -> None:
    """A model answer is JSON: the shape is caught with its quotes escaped, and the answer
    stays valid JSON with the look-alike intact."""
    import json

    answer = json.dumps(
        {"actions": [{"learning": {"title": template.format(secret), "fix": lookalike}}]}
    )
    text, count = redact_structured(answer)
    assert secret not in text and count >= 1
    assert json.loads(text)["actions"][0]["learning"]["fix"] == lookalike


def test_pem_block_including_unterminated() -> None:
    text, count = redact_secrets(f"key:\n{PEM}\nafter")
    assert PEM_SECRET not in text and text.endswith("after") and count == 1
    text, _ = redact_secrets("-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA")
    assert "b3BlbnNzaC1rZXktdjEAAAAA" not in text


def test_no_secret_survives_prepare() -> None:
    turns = [Turn(0, "user", "Set up the deploy.")]
    for i, (_, secret, template, _) in enumerate(SECRETS, start=1):
        turns.append(Turn(len(turns), "user", f"Never paste this again: {template.format(secret)}"))
        turns.append(Turn(len(turns), "assistant", f"Noted {i}."))
    turns.append(Turn(len(turns), "user", f"Don't commit the key:\n{PEM}"))
    prepared = prepare(Transcript("claude", turns), EmptyLedger(), source_name="s.jsonl")
    assert prepared.action == "reflect"
    survivors = [name for name, secret, _, _ in SECRETS if secret in prepared.slice_text]
    assert survivors == []
    assert PEM_SECRET not in prepared.slice_text
    assert prepared.redactions >= len(SECRETS) + 1
    assert "Never paste this again" in prepared.slice_text


@pytest.mark.parametrize("text", PLAIN_TEXT)
def test_plain_prose_and_code_are_not_redacted(text: str) -> None:
    assert redact_secrets(text) == (text, 0)
    assert redact_structured(text) == (text, 0)


def test_a_token_inside_a_command_line_is_redacted_with_its_password() -> None:
    """The ``curl -u`` rule spans the command up to the password; a token inside that span
    (a header) must not be shielded by it, nor by a ``-u`` whose password is a placeholder."""
    gh = "ghp_16C7e42F292c6912E7710c838347Ae178B4a"
    text, count = redact_secrets(
        f'curl -H "Authorization: Bearer {gh}" -u admin:Sup3rS3cret https://x'
    )
    assert gh not in text and "Sup3rS3cret" not in text and count == 2
    text, count = redact_secrets(f'curl -u admin:$PASS -H "X-Gh: {gh}" https://x')
    assert gh not in text and "$PASS" in text and count == 1
