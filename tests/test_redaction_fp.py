"""Redaction that never eats knowledge and still catches the held-out credentials (issue 21).

What the user sees: a credential pasted into a session is gone from the dialogue ``prepare``
sends and from the raw transcript line, and gone from a model answer that echoes it; a text
that only looks like one (``"key_insight": "Use pnpm …"``, ``token = get_token()``, "**Key
Findings:**") comes back unchanged, and so does every field of a clean model answer. The real
transcripts of ``tests/data/transcripts`` hold no credential, so they must get no tag at all.

The paths are those of the product (``bench/redaction_probe.py``, shared with
``bench/bench_redact.py``): a real JSONL file read by ``read_transcript`` and redacted by
``cascade.prepare.filter_turns``; the raw line through ``redact_secrets``; the answer through
``redact_structured``.

Against the engine as it was when this corpus was written, 8 held-out credentials leaked, 16
look-alikes changed, 3 tags fell on real dialogue and both ``key_insight`` fields of the clean
answer were blanked (issue 21 item 1); all of these pass now.
"""

from __future__ import annotations

import functools
import sys
from pathlib import Path

import pytest
from secret_corpus import SECRETS
from secret_corpus_heldout import NOT_SECRETS, SECRETS_HELDOUT

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

import redaction_probe as probe  # noqa: E402

HELDOUT = [c for c in probe.cases() if c.corpus == "held-out"]
LOOKALIKES = probe.lookalikes()


@functools.cache
def _case_results() -> dict[str, probe.CaseResult]:
    return {r.case.name: r for r in probe.check_cases(HELDOUT)}


@functools.cache
def _dialogue_scan() -> probe.FpScan:
    return probe.scan_dialogue(probe.fp_corpus_files())


@functools.cache
def _lookalike_results() -> dict[str, probe.LookalikeResult]:
    return {r.name: r for r in probe.check_lookalikes(LOOKALIKES)}


def test_the_heldout_corpus_is_big_enough_and_new() -> None:
    names = [name for name, *_ in SECRETS_HELDOUT]
    assert len(names) >= 40 and len(set(names)) == len(names)
    assert len(LOOKALIKES) - len(SECRETS) >= 40, "held-out look-alikes plus NOT_SECRETS"
    assert len([c for c in HELDOUT if c.lookalike]) + len(NOT_SECRETS) >= 40
    old_templates = {template for _, _, template, _ in SECRETS}
    assert not [n for n, _, t, _ in SECRETS_HELDOUT if t in old_templates]
    for name, secret, template, lookalike in SECRETS_HELDOUT:
        assert template.format(secret).count(secret) == 1, name
        assert secret not in lookalike, name


def test_the_false_positive_corpus_is_real_and_readable() -> None:
    """The corpus SOURCES.md describes: real files only, each at most ~1.5 MB, every one read
    by the product's reader (a file it cannot read would measure nothing)."""
    files = probe.fp_corpus_files()
    assert len(files) >= 30
    assert not [p for p in files if "constructed" in p.parts or "third-party" in p.parts]
    assert max(p.stat().st_size for p in files) <= 1_500_000
    assert sum(p.stat().st_size for p in files) >= 3_000_000
    scan = _dialogue_scan()
    assert scan.files == len(files) and scan.lines >= 8_000


@pytest.mark.parametrize(
    "name",
    [c.name for c in HELDOUT],
)
def test_a_heldout_credential_is_caught_in_the_transcript_and_in_an_echoed_answer(
    name: str,
) -> None:
    r = _case_results()[name]
    assert r.dialogue is not None, "the reader kept the person's turn"
    assert r.dialogue, f"dialogue: …{probe.excerpt(r.case.secret, r.dialogue_out)}…"
    assert r.raw, f"raw JSONL line: …{probe.excerpt(r.case.secret, r.raw_out)}…"
    assert r.echo, f"echoed answer: …{probe.excerpt(r.case.secret, r.echo_out)}…"


@pytest.mark.parametrize(
    "name",
    [n for n, _ in LOOKALIKES],
)
def test_a_lookalike_comes_back_unchanged(name: str) -> None:
    r = _lookalike_results()[name]
    assert r.dialogue, f"dialogue: {r.text!r} -> {r.dialogue_out!r}"
    assert r.raw, f"raw JSONL line: {probe.first_difference(probe.jsonl_line(r.text), r.raw_out)}"
    assert r.echo, f"echoed answer: {r.echo_out[:300]}"


def test_no_tag_in_the_dialogue_of_real_transcripts() -> None:
    scan = _dialogue_scan()
    assert scan.tags == 0, "\n".join(fp.show() for fp in scan.samples[:30])


def test_no_tag_in_the_raw_lines_of_real_transcripts() -> None:
    """Tool output and code the session read (what a condensed transcript will carry):
    ``apiKey: 'proxy-handled'``, ``key: data?.key``, ``Record<string, string>``, a regex
    describing a key, a template's ``${…}`` are not credentials (58 tags before)."""
    scan = probe.scan_raw(probe.fp_corpus_files())
    assert scan.lines >= 5_000
    assert scan.tags == 0, "\n".join(fp.show() for fp in scan.samples[:30])


def test_every_field_of_a_clean_answer_comes_back_verbatim() -> None:
    leaves, changed = probe.field_integrity()
    assert leaves >= 50
    assert changed == [], changed


def test_the_probe_would_see_a_tag_and_a_changed_field() -> None:
    """The two corpus-wide checks above can fail: the probe counts a tag the engine adds to a
    transcript line and reports a field whose value a redaction replaced."""
    before = probe.jsonl_line("deploy with DB_PASSWORD=CorrectHorse42 tonight")
    after = probe.redact_secrets(before)[0]
    found = probe._new_tags(before, after, "x.jsonl", 1)
    assert len(found) == 1 and "DB_PASSWORD=[REDACTED:" in found[0].context
    answer = {"summary": "keep", "items": {"new": [{"title": "t", "body": "b"}]}}
    changed = probe.changed_fields(
        answer, {"summary": "[REDACTED:secret]", "items": answer["items"]}
    )
    assert changed == [("summary", "keep", "[REDACTED:secret]")]
