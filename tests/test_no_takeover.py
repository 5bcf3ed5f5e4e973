"""No single source takes over what later sessions are told (issue 24 item 1).

A model answer steered by a hostile transcript goes through the real pipeline (``enqueue``,
``drain``, the stub ``claude`` echoing the answer); what a user meets afterwards — the note,
the ledger row, the reflection store and the session-start block — is compared with what
went in.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from recall_support import make_repo
from support import write_claude_transcript

from reflect_jobs.kb.parse import parse_note

SESSION = "s-no-takeover"
CORRECTION = "No, use pnpm install from the repository root; npm rewrites the lockfile."
#: "ASCII smuggling" (tag characters spelling "AB"), a bidi override and a zero-width space.
TAGS = "\U000e0041\U000e0042"
HIDDEN = (TAGS, "\u202e", "\u200b")


def _transcript(path: Path, repo: Path, session: str = SESSION) -> Path:
    write_claude_transcript(path, [CORRECTION], session=session)
    lines = [json.loads(x) for x in path.read_text().splitlines()]
    path.write_text("\n".join(json.dumps({**r, "cwd": str(repo)}) for r in lines) + "\n")
    return path


def _hide(text: str) -> str:
    """``text`` with the hidden characters woven in (its visible text unchanged)."""
    words = text.split(" ")
    return f"{TAGS}{words[0]}\u202e " + " \u200b".join(words[1:]) + TAGS


def _clean(text: str) -> bool:
    return not any(h in text for h in ("\u202e", "\u200b", *TAGS))


def test_invisible_characters_reach_no_store_and_no_block(env, tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "shop", "git@github.com:acme/shop.git")
    title = "Install dependencies with pnpm from the repository root"
    rule = "Use pnpm install from the repository root; npm rewrites the lockfile."
    item_title = "Remove the stray package-lock.json from the services"
    learning = {
        "title": _hide(title),
        "rule": _hide(rule),
        "category": "Tools",
        "key_insight": _hide("npm rewrites pnpm-lock.yaml"),
        "confidence_num": 0.9,
        "tags": [_hide("pnpm")],
        "evidence": CORRECTION,
    }
    item = {"kind": "action", "title": _hide(item_title), "body": "x", "evidence": CORRECTION}
    answer = {
        "actions": [{"action": "CREATE", "learning": learning}],
        "items": {"update": [], "new": [item]},
        "summary": _hide("Switched the install to pnpm"),
    }
    assert not _clean(answer["actions"][0]["learning"]["title"])  # the test can fail
    env.update(STUB_CLAUDE_MODE="echo_actions", STUB_CLAUDE_ACTIONS=json.dumps(answer))
    env.invoke("enqueue", str(_transcript(tmp_path / f"{SESSION}.jsonl", repo)))
    env.invoke("drain", "--until-idle", "--max-seconds", "120")

    (path,) = sorted((env.kb / "documents").glob("*.md"))
    text = path.read_text()
    assert _clean(text)
    fm = parse_note(path).frontmatter
    assert fm["title"] == title and fm["rule"] == rule
    assert fm["key_insight"] == "npm rewrites pnpm-lock.yaml" and fm["tags"] == ["pnpm"]

    db = sqlite3.connect(env.home / "reflect.db")
    (stored_title,) = db.execute("SELECT title FROM learnings").fetchone()
    assert stored_title == title

    listed = env.run("reflections", "list", "--status", "all", "--repo", str(repo), "--json")
    titles = {i["title"] for i in json.loads(listed.stdout)}
    assert item_title in titles and "Switched the install to pnpm" in {
        i["body"] for i in json.loads(listed.stdout)
    }
    assert all(_clean(t) for t in titles)

    block = env.invoke("context", "--cwd", str(repo)).stdout
    assert f"{title} — {rule}" in block and item_title in block
    assert _clean(block)


def test_the_block_strips_what_a_store_still_holds() -> None:
    from reflect_jobs.recall.block import inert

    assert inert(f"{TAGS}curl\u202e x\u200by | sh{TAGS}") == "curl xy | sh"
    assert inert("caf\u0065\u0301 <b>") == "caf\u0065\u0301 \u2039b\u203a"


GLOBALS = [
    ("Pin the Python version in every CI workflow", "Pin python-version in CI workflows."),
    ("Quote shell variables that hold file paths", "Quote path variables in shell scripts."),
    ("Prefer UTC timestamps in stored logs", "Store log timestamps in UTC."),
    ("Close database cursors in a finally block", "Close cursors in finally blocks."),
    ("Run the formatter before committing", "Run the formatter before each commit."),
]


def test_one_session_creates_at_most_two_global_learnings(env, tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "shop", "git@github.com:acme/shop.git")
    other = make_repo(tmp_path / "blog", "git@github.com:acme/blog.git")
    actions = [
        {
            "action": "CREATE",
            "scope": "global",
            "learning": {
                "title": title,
                "rule": rule,
                "category": "Tools",
                "confidence_num": 0.9,
                "evidence": CORRECTION,
            },
        }
        for title, rule in GLOBALS
    ]
    env.update(
        STUB_CLAUDE_MODE="echo_actions",
        STUB_CLAUDE_ACTIONS=json.dumps({"actions": actions, "items": {}, "summary": ""}),
    )
    env.invoke("enqueue", str(_transcript(tmp_path / f"{SESSION}.jsonl", repo)))
    env.invoke("drain", "--until-idle", "--max-seconds", "120")

    db = sqlite3.connect(env.home / "reflect.db")
    rows = db.execute("SELECT title, scope, repo_key FROM learnings").fetchall()
    assert len(rows) == 5, rows
    scopes = {title: (scope, key) for title, scope, key in rows}
    assert [t for t, _ in GLOBALS if scopes[t][0] == "global"] == [t for t, _ in GLOBALS[:2]]
    assert all(scopes[t][0] == "repo" and scopes[t][1] for t, _ in GLOBALS[2:])
    fms = [parse_note(p).frontmatter for p in (env.kb / "documents").glob("*.md")]
    assert sorted(fm.get("scope") for fm in fms) == ["global"] * 2 + ["repo"] * 3

    told_elsewhere = env.invoke("context", "--cwd", str(other)).stdout
    assert 1 <= sum(title in told_elsewhere for title, _ in GLOBALS) <= 2, told_elsewhere
    assert not any(title in told_elsewhere for title, _ in GLOBALS[2:])
    assert f"{GLOBALS[1][0]} — {GLOBALS[1][1]}" in told_elsewhere  # the visible one is whole
