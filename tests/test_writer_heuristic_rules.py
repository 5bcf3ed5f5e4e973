"""The heuristic writer stores rules a person would keep, never a person's raw quote (issue 21.6).

Before, "Wrong, I already told you: this is a pnpm workspace." was stored as the rule, titles
were the first twelve words ("…open one per thread and"), and most sidecars had no entity.
These tests compare what lands in the note and its sidecar with what the session said.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from reflect_jobs.cascade import EmptyLedger, prepare
from reflect_jobs.cascade.signals import RULES
from reflect_jobs.cascade.slicing import CONTEXT_MARK, LINE_TRUNCATED
from reflect_jobs.kb import load_sidecar, parse_note, write_learning
from reflect_jobs.kb.heuristic import BOOKKEEPING_TAGS, MAX_ENTITIES
from reflect_jobs.transcripts import read_transcript
from reflect_jobs.writer.actions import plan_actions
from reflect_jobs.writer.heuristic import heuristic_actions
from tests.support import SAMPLES

T1 = "2026-12-01T10:00:00Z"


def _learnings(slice_text: str) -> list[dict]:
    return [a["learning"] for a in heuristic_actions(slice_text)]


def _demo_slice() -> str:
    path = SAMPLES / "demo-corrections.jsonl"
    prepared = prepare(read_transcript(path), EmptyLedger(), source_name=path.name)
    assert prepared.action == "reflect"
    return prepared.slice_text


def test_the_demo_session_gives_three_kept_rules_with_verbatim_evidence() -> None:
    slice_text = _demo_slice()
    got = [(x["title"], x["rule"], x["root_cause"]) for x in _learnings(slice_text)]
    assert got == [
        (
            "Don't hand-roll retries with sleep",
            "Don't hand-roll retries with sleep; always use tenacity with exponential backoff "
            "in this repo.",
            "",
        ),
        (
            "Never share one sqlite3 connection between threads",
            "Never share one sqlite3 connection between threads; open one per thread and set "
            "a busy timeout.",
            "The shared connection across threads.",
        ),
        (
            "Use pnpm install from the repo root",
            "Use pnpm install from the repo root; npm rewrites the lockfile.",
            "",
        ),
    ]
    for learning in _learnings(slice_text):
        # The person's words are the evidence, verbatim as the slice holds them; never the rule.
        assert learning["evidence"] in slice_text and len(learning["evidence"]) <= 300
        assert learning["evidence"] != learning["rule"]
        assert learning["confidence_num"] <= 0.45 and learning["key_insight"] == learning["rule"]
    assert _learnings(slice_text)[2]["evidence"] == (
        "Wrong, I already told you: this is a pnpm workspace. Use pnpm install from the repo "
        "root, npm rewrites the lockfile."
    )


def test_the_demo_notes_get_their_entities(tmp_path: Path) -> None:
    plan = plan_actions(heuristic_actions(_demo_slice()), allowed_ids=set())
    expected = [
        {"tenacity", "exponential backoff"},
        {"sqlite3", "OperationalError: database is locked", "tests/test_jobs.py"},
        {"pnpm", "npm", "lockfile"},
    ]
    for learning, want in zip(plan.creates, expected, strict=True):
        nf = write_learning(
            tmp_path, learning, created=T1, updated=T1, source_path="/d.jsonl", session_id="d"
        )
        note = parse_note(nf.path)
        assert note.frontmatter["rule"] == learning["rule"]
        side = load_sidecar(nf.sidecar_path)
        names = {e["name"] for e in side["entities"]}
        assert want <= names, names
        assert 3 <= len(names) <= MAX_ENTITIES == 8
        assert 2 <= len(side["relationships"]) <= 6
        for rel in side["relationships"]:
            assert rel["source"] in names and rel["target"] in names


@pytest.mark.parametrize(
    ("said", "title", "rule"),
    [
        (
            "Wrong, I already told you: use pnpm install from the repository root, npm "
            "rewrites the lockfile",
            "Use pnpm install from the repository root",
            "Use pnpm install from the repository root; npm rewrites the lockfile.",
        ),
        (
            "wtf, I already said we never push straight to main. open a PR from a feature branch",
            "Never push straight to main",
            "Never push straight to main; open a PR from a feature branch.",
        ),
        (
            "don't touch strptime, we use dateutil everywhere in this repo",
            "Don't touch strptime",
            "Don't touch strptime; use dateutil everywhere in this repo.",
        ),
        (
            "you should always run the pre-commit hooks before committing, you skipped them again",
            "Always run the pre-commit hooks before committing",
            "Always run the pre-commit hooks before committing.",
        ),
        (
            "Stop \u2014 secrets never go in the repo. Read them from the environment via "
            "os.environ",
            "Never put secrets in the repo",
            "Never put secrets in the repo; read them from the environment via os.environ.",
        ),
        (
            "sleeping in tests is not a fix. wait on the job's done event with a timeout "
            "instead of a fixed sleep",
            "Wait on the job's done event with a timeout instead of a fixed sleep",
            "Wait on the job's done event with a timeout instead of a fixed sleep. Sleeping "
            "in tests is not a fix.",
        ),
        (
            "yes that's the root cause, blocking calls inside async def block the event loop. "
            "Use httpx.AsyncClient in async code, never requests.",
            "Use httpx.AsyncClient in async code, never requests",
            "Use httpx.AsyncClient in async code, never requests. Blocking calls inside async "
            "def block the event loop.",
        ),
        (
            "why did you put it in test_misc.py? date tests live in tests/test_dates.py",
            "Put date tests in tests/test_dates.py",
            "Put date tests in tests/test_dates.py.",
        ),
        (
            "Don't forget to update the changelog when you bump the version.",
            "Update the changelog when bumping the version",
            "Update the changelog when bumping the version.",
        ),
        (
            "This is wrong, the cache must be invalidated on write.",
            "Invalidate the cache on write",
            "Invalidate the cache on write.",
        ),
        (
            "How many times do I have to say it, no mocks in integration tests.",
            "Avoid mocks in integration tests",
            "Avoid mocks in integration tests.",
        ),
        (
            "I said not to modify the migration files!",
            "Don't modify the migration files",
            "Don't modify the migration files.",
        ),
    ],
)
def test_a_correction_is_stored_as_an_imperative_rule(said: str, title: str, rule: str) -> None:
    (learning,) = _learnings(f"Done, I changed it.\n{said}\nOk.")
    assert (learning["title"], learning["rule"]) == (title, rule)
    assert learning["evidence"] == said  # the quote is kept, as said, beside the rule


@pytest.mark.parametrize(
    "said",
    [
        "No, that's wrong.",
        "that's not what I meant, the whole result should be one JSON array",
        "no, that's not what I meant. I wanted the file renamed too",
        "ok fine, revert that last change",
        "hmm why did you change the tests as well?",
        "Never mind, I'll fix it myself.",
        "Don't worry, I'll handle the edge case too.",
        "The root cause was that npm rewrote the lockfile inside Docker.",
        "never never never",
        "No. Don't wrong, stop never (use it",
        # A task prompt with a "don't" in it is no rule: its sentences ask for this task.
        "Port this Python project to Rust. Create a standalone Rust library. Delete all the "
        "Python source files when you're done. Don't stop until all functions are ported, "
        "tests pass, and you have 100% coverage. You can ask me questions if you need to.",
    ],
)
def test_a_correction_without_a_rule_gives_no_learning(said: str) -> None:
    assert heuristic_actions(f"Done, I changed it.\n{said}\nOk.") == []


def test_a_long_rule_gets_a_title_cut_at_a_boundary() -> None:
    said = (
        "No, never edit a migration file that has already been applied to a shared database "
        "in any environment and rebuilt by the deploy job, create a new revision instead."
    )
    (learning,) = _learnings(said)
    title = learning["title"]
    assert len(title) <= 80 and "\u2026" not in title
    # No clause boundary within 80 characters: it ends before a preposition, not mid-phrase.
    assert title == "Never edit a migration file that has already been applied"
    assert title.split()[-1] not in {"the", "to", "and", "a", "in", "of"}
    assert learning["rule"].startswith(title) and learning["rule"].endswith("instead.")


def test_evidence_of_a_long_turn_is_a_verbatim_piece_of_it() -> None:
    filler = "Here is some background on the service and what it does. " * 12
    said = f"{filler}Never log the full request body, it contains tokens. {filler}"
    (learning,) = _learnings(said)
    assert learning["rule"] == "Never log the full request body; it contains tokens."
    assert learning["evidence"] == "Never log the full request body, it contains tokens."
    assert learning["evidence"] in said


def test_context_lines_and_a_truncated_sentence_are_not_learned_from() -> None:
    assert heuristic_actions(f"{CONTEXT_MARK}No, never use var in this repo.") == []
    cut = f"Never use var in this repo. Always run eslint on the changed{LINE_TRUNCATED}"
    assert [x["rule"] for x in _learnings(cut)] == ["Never use var in this repo."]


def test_every_signal_kind_is_a_bookkeeping_tag_not_an_entity() -> None:
    # The writer tags each learning with the signal kind that triggered it; the entity
    # extractor must never turn that tag into a graph node.
    assert {kind for _, kind, _ in RULES} <= BOOKKEEPING_TAGS
