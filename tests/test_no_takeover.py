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


def _global_answer(env, pairs) -> None:  # type: ignore[no-untyped-def]
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
        for title, rule in pairs
    ]
    env.update(
        STUB_CLAUDE_MODE="echo_actions",
        STUB_CLAUDE_ACTIONS=json.dumps({"actions": actions, "items": {}, "summary": ""}),
    )


def test_one_session_proposes_at_most_two_globals_told_only_at_home(env, tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "shop", "git@github.com:acme/shop.git")
    other = make_repo(tmp_path / "blog", "git@github.com:acme/blog.git")
    _global_answer(env, GLOBALS)
    env.invoke("enqueue", str(_transcript(tmp_path / f"{SESSION}.jsonl", repo)))
    env.invoke("drain", "--until-idle", "--max-seconds", "120")

    db = sqlite3.connect(env.home / "reflect.db")
    rows = db.execute("SELECT title, scope, repo_key FROM learnings").fetchall()
    assert len(rows) == 5, rows
    # Every one is repository-scoped in the ledger; the first two propose going global.
    assert {(scope, key) for _, scope, key in rows} == {("repo", "github.com/acme/shop")}
    fms = {
        fm["title"]: fm
        for fm in (parse_note(p).frontmatter for p in (env.kb / "documents").glob("*.md"))
    }
    assert [t for t, _ in GLOBALS if fms[t].get("proposed_scope") == "global"] == [
        t for t, _ in GLOBALS[:2]
    ]
    assert all(fms[t]["scope"] == "repo" and fms[t]["repo"] for t, _ in GLOBALS)

    told_elsewhere = env.invoke("context", "--cwd", str(other)).stdout
    assert not any(title in told_elsewhere for title, _ in GLOBALS), told_elsewhere
    told_home = env.invoke("context", "--cwd", str(repo)).stdout
    assert f"{GLOBALS[1][0]} — {GLOBALS[1][1]}" in told_home  # told where it was learned


def test_a_second_session_makes_a_pending_global_global(env, tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "shop", "git@github.com:acme/shop.git")
    other = make_repo(tmp_path / "blog", "git@github.com:acme/blog.git")
    _global_answer(env, GLOBALS[:2])
    env.invoke("enqueue", str(_transcript(tmp_path / "a.jsonl", repo, "s-a")))
    env.invoke("drain", "--until-idle", "--max-seconds", "120")
    assert not any(t in env.invoke("context", "--cwd", str(other)).stdout for t, _ in GLOBALS)

    # Another session (in another repository) UPDATEs the first with its person's words,
    # and writes the second again as a trusted CREATE: both go global.
    from reflect_jobs import kb

    first = kb.learning_id(*GLOBALS[0])
    again = "No, pin the Python version in every CI workflow, as we always do."
    update = {
        "action": "UPDATE",
        "target_id": first,  # offered: the slice names it (the revision block)
        "reason": "seen again",
        "evidence": again,
    }
    _global_answer(env, GLOBALS[1:2])
    answer = json.loads(env["STUB_CLAUDE_ACTIONS"])
    answer["actions"].append(update)
    env.update(STUB_CLAUDE_ACTIONS=json.dumps(answer))
    second = _transcript(tmp_path / "b.jsonl", other, "s-b")
    write_claude_transcript(second, [CORRECTION, again], session="s-b")
    lines = [json.loads(x) for x in second.read_text().splitlines()]
    second.write_text("\n".join(json.dumps({**r, "cwd": str(other)}) for r in lines) + "\n")
    env.invoke("enqueue", str(second))
    env.invoke("drain", "--until-idle", "--max-seconds", "120")

    db = sqlite3.connect(env.home / "reflect.db")
    rows = {
        t: (sc, ps)
        for t, sc, ps in db.execute("SELECT title, scope, proposed_scope FROM learnings")
    }
    # Promoted by the UPDATE and by the trusted CREATE: the ledger's pending mark is gone too.
    assert rows == {GLOBALS[0][0]: ("global", None), GLOBALS[1][0]: ("global", None)}, rows
    for path in (env.kb / "documents").glob("*.md"):
        fm = parse_note(path).frontmatter
        assert fm["scope"] == "global" and "proposed_scope" not in fm and "repo" not in fm
    third = make_repo(tmp_path / "docs", "git@github.com:acme/docs.git")
    (third / "pyproject.toml").write_text('[project]\nname = "docs"\n')  # the CI rule fits
    told = env.invoke("context", "--cwd", str(third)).stdout
    assert all(title in told for title, _ in GLOBALS[:2]), told


def test_the_promotion_rule() -> None:
    from reflect_jobs.pipeline.global_cap import Known, promotes, scope_creates

    ok = {"first_session": "a", "session_id": "b", "trusted": True}
    assert promotes(True, **ok, proof=False)  # a trusted CREATE from another session
    assert promotes(True, **ok, origin="person", proof=True)
    assert promotes(True, **ok, origin="assistant", proof=True)
    assert not promotes(True, **ok, origin="tool", proof=True)  # what the session read
    assert not promotes(True, **ok, origin=None, proof=True)  # an UPDATE with no evidence
    assert not promotes(False, **ok, proof=False)  # not pending: nothing to promote
    assert not promotes(True, **{**ok, "session_id": "a"}, proof=False)  # the same session
    assert not promotes(True, **{**ok, "session_id": None}, proof=False)
    assert not promotes(True, **{**ok, "trusted": False}, proof=False)

    def create(title: str, review: list[str] | None = None) -> dict:
        return {
            "title": title,
            "rule": title,
            "scope": "global",
            "repo": "k/a",
            "review": review or [],
        }

    creates = [create(f"new {n}") for n in range(3)] + [create("pending"), create("global")]
    known = {
        "p": Known("active", "s0", "repo", "k/home", True),
        "g": Known("active", "s0", "global", None, False),
    }
    counts = scope_creates(
        creates, known=known, ids=["n0", "n1", "n2", "p", "g"], session_id="s0", already=1, cap=2
    )
    assert (counts.proposed, counts.narrowed, counts.promoted) == (1, 2, 0)
    assert [c.get("proposed_scope") for c in creates] == ["global", None, None, "global", None]
    assert [c["scope"] for c in creates] == ["repo", "repo", "repo", "repo", "global"]
    assert creates[3]["repo"] == "k/home"  # a pending one stays in its first repository
    again = [create("pending")]
    counts = scope_creates(again, known=known, ids=["p"], session_id="s1", already=0, cap=2)
    assert counts.promoted == 1 and again[0]["scope"] == "global"


def test_a_person_rejects_a_pending_global(env, tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "shop", "git@github.com:acme/shop.git")
    _global_answer(env, GLOBALS[:1])
    env.invoke("enqueue", str(_transcript(tmp_path / "a.jsonl", repo, "s-a")))
    env.invoke("drain", "--until-idle", "--max-seconds", "120")
    (listed,) = json.loads(env.invoke("review", "--json").stdout)
    assert (listed["status"], listed["proposed_scope"]) == ("active", "global")
    assert listed["repo_key"] == "github.com/acme/shop"
    env.invoke("review", "reject", listed["id"])
    env.invoke("drain", "--until-idle", "--max-seconds", "120")
    assert GLOBALS[0][0] not in env.invoke("context", "--cwd", str(repo)).stdout
    (path,) = (env.kb / "documents").glob("*.md")
    assert parse_note(path).frontmatter["status"] == "rejected"
    assert json.loads(env.invoke("review", "--json").stdout) == []
