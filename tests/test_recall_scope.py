"""Every learning records the repository it was learned in (or says it is global)."""

from __future__ import annotations

import json

from recall_support import make_repo
from sqlalchemy import select
from support import write_claude_transcript

from reflect_jobs import kb
from reflect_jobs.kb.render import note_frontmatter
from reflect_jobs.ledger.db import session_scope
from reflect_jobs.ledger.models import Learning
from reflect_jobs.recall.block import OPEN
from reflect_jobs.transcripts.cwd import record_cwd
from reflect_jobs.writer.actions import plan_actions
from reflect_jobs.writer.heuristic import heuristic_actions


def _create(title, **kw):
    return {
        "action": "CREATE",
        "learning": {"title": title, "rule": "r", **kw.pop("lrn", {})},
        **kw,
    }


def test_create_scope_defaults_to_repo_and_accepts_global_in_either_place():
    plan = plan_actions(
        [
            _create("a"),
            _create("b", lrn={"scope": " GLOBAL "}),
            _create("c", scope="global", lrn={"scope": "repo"}),
            _create("d", lrn={"scope": ["nonsense"]}),
        ],
        allowed_ids=set(),
    )
    assert [c["scope"] for c in plan.creates] == ["repo", "global", "global", "repo"]
    assert {a["learning"]["scope"] for a in heuristic_actions("No, never use var.")} == {"repo"}


def test_a_repo_learning_without_a_known_repository_is_written_global():
    base = dict(note_id="lrn-x", created="t", updated="t", source_path=None, session_id=None)
    fm = note_frontmatter({"title": "t", "scope": "repo"}, **base)
    assert fm["scope"] == "global" and "repo" not in fm
    fm = note_frontmatter({"title": "t", "scope": "repo", "repo": "github.com/a/b"}, **base)
    assert fm["scope"] == "repo" and fm["repo"] == "github.com/a/b"
    fm = note_frontmatter({"title": "t", "scope": "global", "repo": "github.com/a/b"}, **base)
    assert fm["scope"] == "global" and "repo" not in fm


def test_cwd_is_found_in_each_harness_record_shape():
    assert record_cwd({"type": "user", "cwd": "/w"}) == "/w"
    assert record_cwd({"type": "session_meta", "payload": {"cwd": "/c"}}) == "/c"
    assert record_cwd({"type": "turn_context", "payload": {"cwd": "/t"}}) == "/t"
    assert record_cwd({"type": "response_item", "payload": {"cwd": "/no"}}) is None
    assert record_cwd({"type": "session.start", "data": {"context": {"cwd": "/p"}}}) == "/p"
    assert record_cwd({"type": "x", "cwd": ""}) is None and record_cwd([1]) is None


def test_drain_scopes_notes_ledger_and_context_to_the_transcripts_repository(env, tmp_path):
    repo = make_repo(tmp_path / "shop", "git@github.com:acme/shop.git")
    (repo / "web").mkdir()
    t = write_claude_transcript(
        tmp_path / "s.jsonl",
        [
            "No, this repo is a pnpm workspace: run pnpm -w install.",
            "No, never use a bare except; catch KeyError.",
        ],
    )
    lines = [json.loads(x) for x in t.read_text().splitlines()]
    t.write_text("\n".join(json.dumps({**r, "cwd": str(repo / "web")}) for r in lines) + "\n")
    actions = {
        "actions": [
            _create(
                "Shop is a pnpm workspace",
                lrn={
                    "key_insight": "pnpm -w",
                    "category": "Tools",
                    "evidence": "this repo is a pnpm workspace",
                },
            ),
            _create(
                "Never use a bare except",
                lrn={
                    "key_insight": "catch KeyError",
                    "category": "Code Style",
                    "scope": "global",
                    "evidence": "never use a bare except; catch KeyError",
                },
            ),
        ]
    }
    env.update(STUB_CLAUDE_MODE="echo_actions", STUB_CLAUDE_ACTIONS=json.dumps(actions))
    env.invoke("enqueue", str(t))
    env.invoke("drain", "--until-idle", "--max-seconds", "120")

    notes = {
        n.frontmatter["title"]: n.frontmatter for n in map(kb.parse_note, kb.iter_notes(env.kb))
    }
    assert notes["Shop is a pnpm workspace"]["scope"] == "repo"
    assert notes["Shop is a pnpm workspace"]["repo"] == "github.com/acme/shop"
    # A new global learning is told only in its repository until a second session or a
    # person confirms it (issue 24): here, a person's review.
    pending = notes["Never use a bare except"]
    assert (pending["scope"], pending["repo"]) == ("repo", "github.com/acme/shop")
    assert pending["proposed_scope"] == "global"
    with session_scope(env.settings().db_url) as s:
        rows = {r.title: (r.scope, r.repo_key) for r in s.scalars(select(Learning))}
    assert rows["Shop is a pnpm workspace"] == ("repo", "github.com/acme/shop")
    assert rows["Never use a bare except"] == ("repo", "github.com/acme/shop")
    assert "bare except" not in env.invoke("context", "--cwd", str(tmp_path)).stdout
    (listed,) = json.loads(env.invoke("review", "--json").stdout)
    assert listed["title"] == "Never use a bare except"
    assert listed["proposed_scope"] == "global" and listed["status"] == "active"
    env.invoke("review", "accept", listed["id"])
    env.invoke("drain", "--until-idle", "--max-seconds", "120")  # the reindex it asked for
    promoted = kb.parse_note(next(p for p in kb.iter_notes(env.kb) if "bare" in p.name))
    assert promoted.frontmatter["scope"] == "global" and "repo" not in promoted.frontmatter
    assert "proposed_scope" not in promoted.frontmatter
    with session_scope(env.settings().db_url) as s:
        rows = {r.title: (r.scope, r.repo_key) for r in s.scalars(select(Learning))}
    assert rows["Never use a bare except"] == ("global", None)
    assert json.loads(env.invoke("review", "--json").stdout) == []

    here = env.invoke("context", "--cwd", str(repo)).stdout
    assert here.startswith(OPEN) and "pnpm workspace" in here and "bare except" in here
    elsewhere = env.invoke("context", "--cwd", str(tmp_path)).stdout
    assert "bare except" in elsewhere and "pnpm workspace" not in elsewhere
    hook_json = json.loads(env.invoke("context", "--cwd", str(repo), "--format", "claude").stdout)
    assert hook_json["hookSpecificOutput"]["hookEventName"] == "SessionStart"
    assert json.loads(env.invoke("context", "--cwd", str(repo), "--format", "copilot").stdout)

    def titles(*args):
        # One query per learning: a query sharing one word of three with a learning is below
        # the relevance floor (tests/test_search_relevance.py).
        found = set()
        for query in ("pnpm workspace", "bare except"):
            out = env.invoke("search", query, "--mode", "lexical", "--json", *args)
            found |= {h["title"] for h in json.loads(out.stdout)["results"]}
        return found

    assert titles("--repo", str(repo)) == {"Shop is a pnpm workspace", "Never use a bare except"}
    assert titles("--repo", str(tmp_path)) == {"Never use a bare except"}
    assert titles("--global") == {"Never use a bare except"}
    bad = env.invoke("search", "x", "--repo", str(repo), "--global", check=False)
    assert bad.returncode == 2 and "exclude each other" in bad.stderr
