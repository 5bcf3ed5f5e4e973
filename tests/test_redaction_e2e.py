"""A model that echoes every secret shape: none may survive anywhere we store or send.

The stub ``claude`` answers CREATEs whose every field (title first, so the note id — the
file name — is built from it) holds one of the corpus's shapes, and prints more of them on
stderr. After a real drain we read every byte of every file under ``$REFLECT_HOME`` and the
KB (notes, sidecars, the ledger with ``jobs``, ``costs``, ``learnings``, ``job_events``, its
WAL, the logs, the indexes) and every file name, then run a second session whose prompt lists
the first session's learnings in its revision block, and read that prompt too.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from secret_corpus import PEM, PEM_SECRET, SECRETS
from support import write_claude_transcript

from reflect_jobs.cascade import REVISION_MARKER
from reflect_jobs.kb.ids import slugify
from reflect_jobs.redaction import redact_structured
from reflect_jobs.writer.result import ModelResult, result_from_cli

CREATES = 12
FIELDS = ("key_insight", "problem", "root_cause", "fix", "rule", "body")
COMMON = "never paste deploy credentials into scripts"


QUOTE = "never mutate the shared config at import time"  # what the first transcript says


def _learning(i: int, quote: str = QUOTE) -> dict:
    shapes = [template.format(secret) for _, secret, template, _ in SECRETS[i::CREATES]]
    learning: dict = {
        "title": f"{shapes[0]} {COMMON} {i}",
        "category": shapes[-1],
        "confidence_num": 0.9,
        "tags": shapes,
        "entities": shapes,
        "causal_relations": [{"source": shapes[0], "target": shapes[-1], "type": "causes"}],
        "evidence": quote,
    }
    for n, shape in enumerate(shapes[1:]):
        field = FIELDS[n % len(FIELDS)]
        learning[field] = (learning.get(field, "") + " " + shape).strip()
    if i == 0:
        learning["body"] = learning.get("body", "") + "\n" + PEM
    return {"action": "CREATE", "learning": learning}


def _answer(quote: str = QUOTE) -> str:
    return json.dumps({"actions": [_learning(i, quote) for i in range(CREATES)]})


def _forms(secret: str) -> set[bytes]:
    """How a secret would look in a file: as is, JSON-escaped, as a note id's slug."""
    forms = {secret, json.dumps(secret)[1:-1], json.dumps(secret, ensure_ascii=False)[1:-1]}
    return {f.encode() for f in forms}


def _survivors(roots: list[Path], prompts: str) -> list[str]:
    blobs: list[bytes] = [prompts.encode()]
    names: list[str] = []
    for root in roots:
        for path in root.rglob("*"):
            names.append(str(path.relative_to(root)).lower())
            if path.is_file():
                blobs.append(path.read_bytes())
    everything = b"\0".join(blobs)
    found = []
    for name, secret, _, _ in [*SECRETS, ("pem", PEM_SECRET, "", "")]:
        slug = slugify(secret)
        if any(f in everything for f in _forms(secret)):
            found.append(name)
        elif len(slug) >= 8 and any(slug in n for n in names):
            found.append(f"{name} (file name)")
    return found


def test_no_echoed_secret_survives_in_notes_ledger_logs_or_the_next_prompt(env, tmp_path):
    prompts = tmp_path / "prompts.jsonl"
    env.update(
        STUB_CLAUDE_MODE="echo_actions",
        STUB_CLAUDE_ACTIONS=_answer(),
        STUB_CLAUDE_STDERR=" ".join(t.format(s) for _, s, t, _ in SECRETS[:20]),
        STUB_CLAUDE_PROMPT_LOG=str(prompts),
    )
    first = write_claude_transcript(
        tmp_path / "a.jsonl", ["No, that's wrong: never mutate the shared config at import time."]
    )
    env.invoke("enqueue", str(first), "--session-id", "a")
    env.invoke("drain", "--until-idle", "--max-seconds", "90")
    jobs = json.loads(env.invoke("jobs", "--json").stdout)
    assert [(j["state"], j["outcome"]) for j in jobs] == [("done", "ok")]
    notes = sorted((env.kb / "documents").glob("*.md"))
    assert len(notes) == CREATES, "every CREATE became a note (so every field was stored)"
    db = sqlite3.connect(env.home / "reflect.db")
    try:
        for table in ("jobs", "costs", "learnings", "job_events"):
            assert db.execute(f"SELECT count(*) FROM {table}").fetchone()[0] > 0, table
    finally:
        db.close()

    env["STUB_CLAUDE_MODE"] = "empty"
    second = write_claude_transcript(
        tmp_path / "b.jsonl", [f"No, that's wrong: {COMMON}, use the vault instead."]
    )
    env.invoke("enqueue", str(second), "--session-id", "b")
    env.invoke("drain", "--until-idle", "--max-seconds", "90")
    sent = [json.loads(line)["prompt"] for line in prompts.read_text().splitlines()]
    assert len(sent) == 2 and REVISION_MARKER in sent[1], "the next prompt lists the learnings"

    survivors = _survivors([env.home, env.kb], "\n".join(sent))
    total = len(SECRETS) + 1
    assert survivors == [], f"survivors {len(survivors)}/{total}: {survivors}"


def test_a_redacted_answer_stays_parseable_and_round_trips() -> None:
    """Record-before-parse: the redacted answer is what the ledger keeps and what a retry
    after a crash parses, so redaction must never break the answer's JSON."""
    text = _answer()
    stdout = json.dumps({"type": "result", "subtype": "success", "num_turns": 1, "result": text})
    result = result_from_cli(stdout, "", backend="claude", model="sonnet", exit_code=0)
    clean = result.redacted()
    assert clean.envelope_ok and clean.num_turns == 1
    dumped = clean.to_json()
    assert not [name for name, secret, _, _ in SECRETS if secret in dumped]
    assert PEM_SECRET not in dumped
    again = ModelResult.from_json(dumped)
    actions = json.loads(again.text)["actions"]
    assert len(actions) == CREATES and json.loads(again.raw_stdout)["result"] == again.text
    assert redact_structured(again.text) == (again.text, 0), "idempotent"


def test_an_answer_recorded_before_redaction_is_redacted_when_reused(env, tmp_path):
    """A ledger from before this fix may hold an unredacted pending answer (a worker died
    after recording it): the write stage reuses it, and no secret reaches a note."""
    from datetime import timedelta

    from reflect_jobs.ledger import control
    from reflect_jobs.ledger.db import session_scope
    from reflect_jobs.ledger.models import CostRow, Job, utcnow

    t = write_claude_transcript(
        tmp_path / "r.jsonl", ["No, never commit the .env file; the rule is to use the vault."]
    )
    job_id = env.invoke("enqueue", str(t)).stdout.strip()
    settings = env.settings()
    with session_scope(settings.db_url) as s:
        control.set_flag(s, control.HALT_KEY, "test: hold writes")
    env.invoke("drain", "--until-idle", "--max-seconds", "60")
    stdout = json.dumps(
        {
            "type": "result",
            "subtype": "success",
            "num_turns": 1,
            "result": _answer("never commit the .env file; the rule is to use the vault"),
        }
    )
    legacy = result_from_cli(stdout, "", backend="claude", model="sonnet", exit_code=0)
    with session_scope(settings.db_url) as s:
        control.clear_flag(s, control.HALT_KEY)
        job = s.get(Job, job_id)
        job.state, job.stage = "running", "write"
        job.lease_owner, job.lease_expires_at = "dead-worker", utcnow() - timedelta(seconds=5)
        s.add(  # written as the old code did: the raw, unredacted answer
            CostRow(
                job_id=job_id,
                at=utcnow(),
                day="2026-12-01",
                transcript=str(t),
                outcome="pending",
                entries=1,
                backend="claude",
                model="sonnet",
                raw_answer=legacy.to_json(),
                consumed=False,
            )
        )
        job.attempts += 1
    env["STUB_CLAUDE_MODE"] = "prose"  # a second, forbidden call would not write notes
    env.invoke("drain", "--until-idle", "--max-seconds", "90")
    notes = list((env.kb / "documents").glob("*"))
    assert len([n for n in notes if n.suffix == ".md"]) == CREATES
    text = "\n".join(n.read_text() for n in notes) + " ".join(n.name for n in notes)
    leaked = [name for name, secret, _, _ in SECRETS if secret in text or slugify(secret) in text]
    assert leaked == []


def test_the_revision_block_redacts_titles_from_the_ledger() -> None:
    from reflect_jobs.cascade import RelatedCandidate, revision_block

    name, secret, template, _ = SECRETS[0]
    cand = RelatedCandidate(
        id="lrn-x-abcdef",
        title=f"Rotate {template.format(secret)}",
        category="Security",
        status="active",
        proof_count=1,
        created_at="2026-11-01T00:00:00Z",
    )
    block = revision_block([(cand, 0.9)])
    assert secret not in block and "[REDACTED:" in block and "lrn-x-abcdef" in block
