"""What the model wrote is what the knowledge base says (issue 21 item 1).

A clean model answer — no credential anywhere — goes through the real pipeline (hook-less
``enqueue``, ``drain``, the stub ``claude``); then every field is read back where a user
meets it: the note's frontmatter and body, the entity sidecar, the ledger's recorded answer
and learning row, the reflection store's items and summary, and the session-start block.
Each must equal what went in. (The redaction once replaced every ``key_insight`` with
``[REDACTED:secret]`` because the field's *name* contains "key"; no test compared a stored
field with the answer, so nobody saw it.)
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from recall_support import make_repo
from support import write_claude_transcript

from reflect_jobs.kb.parse import load_sidecar, parse_note

SESSION = "s-true-fields"
CORRECTION = "No, use pnpm install from the repository root; npm rewrites the lockfile."
LEARNING = {
    "title": "Install dependencies with pnpm from the repository root",
    "category": "Tools",
    "key_insight": "Running npm in a pnpm workspace rewrites pnpm-lock.yaml; install only through pnpm",
    "problem": "Running npm install in a package folder produced a second lockfile",
    "root_cause": "The workspace is managed by pnpm; npm ignores pnpm-workspace.yaml",
    "fix": "Delete package-lock.json and run pnpm install at the top of the checkout",
    "rule": "Use pnpm install from the repository root; npm rewrites the lockfile.",
    "confidence_num": 0.9,
    "tags": ["pnpm", "monorepo", "token-budget", "keyboard-layout"],
    "entities": ["pnpm", "npm", "pnpm-lock.yaml"],
    "body": "## Context\nThe person corrected an npm install; the secret of a clean tree is one "
    "package manager. Passwords and tokens were not involved.",
    "evidence": CORRECTION,
}
ITEM = {
    "kind": "action",
    "title": "Remove the stray package-lock.json from the key services",
    "body": "The token budget of the CI job is wasted reinstalling; the auth service too.",
    # A new item carries its evidence, a quote of the session (docs/REFLECTIONS.md).
    "evidence": CORRECTION,
}
SUMMARY = "Switched the install to pnpm; the password reset flow was not touched."


def _transcript(path: Path, repo: Path) -> Path:
    write_claude_transcript(path, [CORRECTION], session=SESSION)
    lines = [json.loads(x) for x in path.read_text().splitlines()]
    path.write_text("\n".join(json.dumps({**r, "cwd": str(repo)}) for r in lines) + "\n")
    return path


def test_every_field_of_a_clean_answer_reaches_every_store_verbatim(env, tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "shop", "git@github.com:acme/shop.git")
    answer = {
        "actions": [{"action": "CREATE", "learning": LEARNING}],
        "items": {"update": [], "new": [ITEM]},
        "summary": SUMMARY,
    }
    env.update(STUB_CLAUDE_MODE="echo_actions", STUB_CLAUDE_ACTIONS=json.dumps(answer))
    transcript = _transcript(tmp_path / f"{SESSION}.jsonl", repo)
    env.invoke("enqueue", str(transcript))
    env.invoke("drain", "--until-idle", "--max-seconds", "120")

    notes = sorted((env.kb / "documents").glob("*.md"))
    assert len(notes) == 1, notes
    note = parse_note(notes[0])
    fm = note.frontmatter
    for field in ("title", "category", "key_insight", "problem", "root_cause", "fix", "rule"):
        assert fm[field] == LEARNING[field], field
    assert fm["tags"] == LEARNING["tags"]
    assert "the secret of a clean tree is one package manager" in note.body
    assert "[REDACTED" not in notes[0].read_text()

    sidecar = load_sidecar(notes[0].with_name(notes[0].stem + ".entities.yaml"))
    names = {e["name"] for e in sidecar["entities"]}
    assert set(LEARNING["entities"]) <= names

    db = sqlite3.connect(env.home / "reflect.db")
    raw = db.execute("SELECT raw_answer FROM costs WHERE raw_answer IS NOT NULL").fetchone()[0]
    assert "[REDACTED" not in raw
    stored = json.loads(json.loads(raw)["text"])  # ModelResult.to_json: the answer's text
    assert stored["actions"][0]["learning"]["key_insight"] == LEARNING["key_insight"]
    assert stored["items"]["new"][0] == ITEM and stored["summary"] == SUMMARY
    (title,) = db.execute("SELECT title FROM learnings").fetchone()
    assert title == LEARNING["title"]

    listed = env.run("reflections", "list", "--status", "all", "--repo", str(repo), "--json")
    items = {i["title"]: i for i in json.loads(listed.stdout)}
    assert items[ITEM["title"]]["body"] == ITEM["body"]
    assert items[ITEM["title"]]["notes"][0]["text"] == f'evidence: "{CORRECTION}"'

    summaries = [i for i in items.values() if i["kind"] == "summary"]
    assert [s["body"] for s in summaries] == [SUMMARY]

    block = env.invoke("context", "--cwd", str(repo)).stdout
    assert f"{LEARNING['title']} — {LEARNING['rule']}" in block
    assert ITEM["title"] in block
    assert "[REDACTED" not in block
