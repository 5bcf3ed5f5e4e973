"""The pure pieces behind "a stage error ends the attempt": storable text, the outcome."""

from __future__ import annotations

import errno

import pytest
from sqlalchemy.exc import DataError, OperationalError

from reflect_jobs.ledger.learnings import SOURCE_MAX, source_key
from reflect_jobs.pipeline.runtime import describe_error, transient_error
from reflect_jobs.sanitize import bounded, clean_text
from reflect_jobs.transcripts import read_transcript
from reflect_jobs.writer.actions import plan_actions
from reflect_jobs.writer.outcomes import error_kind, job_move, stage_error_outcome


def test_clean_text_replaces_lone_surrogates_keeps_pairs_and_drops_nul():
    assert clean_text("a\ud800b") == "a\ufffdb"
    assert clean_text("x\ud83d\ude00y") == "x\U0001f600y"
    assert clean_text("a\x00b") == "ab"
    clean_text("a\udfff\x00").encode("utf-8")  # storable


def test_bounded_keeps_long_values_distinct_and_stable():
    a, b = "/x/" + "d" * 600 + "/a.jsonl", "/x/" + "d" * 600 + "/b.jsonl"
    assert len(bounded(a, 512)) == 512 and bounded(a, 512) != bounded(b, 512)
    assert bounded(a, 512) == bounded(a, 512)
    assert bounded("short", 512) == "short"
    assert source_key(a) == bounded(a, SOURCE_MAX)


def test_plan_actions_cleans_every_string_the_model_wrote():
    learning = {"title": "T\ud800", "rule": "r\x00", "tags": ["a\ud800"], "entities": "e\x00"}
    plan = plan_actions([{"action": "CREATE", "learning": learning}], allowed_ids=set())
    (made,) = plan.creates
    assert (made["title"], made["rule"], made["tags"], made["entities"]) == (
        "T\ufffd",
        "r",
        ["a\ufffd"],
        ["e"],
    )


def test_a_line_of_100k_nested_brackets_is_one_malformed_line(tmp_path):
    path = tmp_path / "t.jsonl"
    good = '{"type": "user", "message": {"role": "user", "content": "No, use pnpm."}}'
    path.write_text(good + "\n" + "[" * 100_000 + "\n", encoding="utf-8")
    transcript = read_transcript(str(path), harness="claude")
    assert transcript.malformed_lines == 1 and transcript.turns


@pytest.mark.parametrize(
    ("exc", "transient"),
    [
        (OSError(errno.EIO, "io"), True),
        (OperationalError("stmt", {}, Exception("database is locked")), True),
        (UnicodeEncodeError("utf-8", "\ud800", 0, 1, "surrogates not allowed"), False),
        (RecursionError("deep"), False),
        (DataError("stmt", {}, Exception("value too long")), False),
    ],
)
def test_transient_errors_are_the_ones_that_may_pass(exc, transient):
    assert transient_error(exc) is transient


def test_stage_error_outcome_retries_transient_until_exhausted_and_poisons_the_rest():
    retry = stage_error_outcome(
        "add", "OSError: x", transient=True, prior_failures=0, max_retries=3
    )
    assert (retry.outcome, retry.disposition, retry.entries) == ("fail_stage_error", "retry", 0)
    last = stage_error_outcome("add", "OSError: x", transient=True, prior_failures=2, max_retries=3)
    assert (last.outcome, last.disposition) == ("poison_stage_error", "poison")
    bug = stage_error_outcome(
        "write", "KeyError: k", transient=False, prior_failures=0, max_retries=3
    )
    assert (bug.outcome, bug.disposition) == ("poison_stage_error", "poison")
    assert job_move(bug.disposition).terminal and not job_move(retry.disposition).terminal
    assert error_kind("poison_stage_error") == ("stage_error", "error")
    assert error_kind("fail_stage_error") == ("stage_error", "warn")


def test_describe_error_is_one_storable_bounded_line():
    text = describe_error(ValueError("a\x00b\n\ud800" + "x" * 900))
    assert text.startswith("ValueError: ab \ufffd") and len(text) == 500 and "\n" not in text
