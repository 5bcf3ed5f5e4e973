"""Curation by hand (issue 23 item 3): add, forget, restore, contradiction demotion.

Real commands (click's CliRunner in-process; the SessionStart hook in its own interpreter,
where the process boundary is the point), a real SQLite ledger, real notes and indexes.
What is checked is what a person and an agent see: the told block, search hits, MCP `get`,
the ledger's status and history — with no reindex run between the command and the check.
"""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from recall_support import make_repo, session_start_in_process
from sqlalchemy import select

from reflect_jobs.cli import main
from reflect_jobs.ledger import contradiction
from reflect_jobs.ledger.db import session_scope
from reflect_jobs.ledger.models import Learning, LearningHistory
from reflect_jobs.recall.mcp_scope import ServerScope
from reflect_jobs.recall.tools import ToolError, get_tool, search_tool

KEY = "github.com/acme/shop"
RULE = "Run `pnpm -w install` from the repository root; npm rewrites `pnpm-lock.yaml`."


def _cli(env, *args: str):  # type: ignore[no-untyped-def]
    return CliRunner().invoke(main, list(args), env={**env, "REFLECT_DRAIN_SKIP_REINDEX": "1"})


def _file(tmp_path, name: str, text: str):  # type: ignore[no-untyped-def]
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def _learning_file(tmp_path, title: str = "Use pnpm for installs", rule: str = RULE, extra=""):  # type: ignore[no-untyped-def]
    return _file(
        tmp_path,
        f"{title[:20].replace(' ', '-')}.md",
        f"---\ntitle: {title}\nrule: {json.dumps(rule)}\n{extra}---\nWe learned it the hard way.\n",
    )


def _row(env, learning_id: str) -> Learning | None:
    with session_scope(env.settings().db_url, readonly=True) as s:
        row = s.get(Learning, learning_id)
        if row is not None:
            s.expunge(row)
        return row


def _told(env, repo) -> str:  # type: ignore[no-untyped-def]
    """What a real SessionStart hook process tells a session in ``repo`` ("" for nothing)."""
    try:
        text, heavy = session_start_in_process(env, repo)
    except json.JSONDecodeError:
        return ""
    assert heavy == [], "the hook path stays stdlib-only"
    return text


@pytest.fixture
def shop(tmp_path):  # type: ignore[no-untyped-def]
    return make_repo(tmp_path / "shop", "git@github.com:acme/shop.git")


def test_add_is_told_at_the_next_session_start_with_the_rule_verbatim(env, tmp_path, shop):
    (shop / "pnpm-lock.yaml").write_text("lockfileVersion: 9\n")
    out = _cli(env, "add", str(_learning_file(tmp_path)), "--cwd", str(shop))
    assert out.exit_code == 0, out.output
    learning_id = out.stdout.strip()
    assert learning_id.startswith("lrn-use-pnpm-for-installs-")
    told = _told(env, shop / "src")
    assert f"[{learning_id}]" in told and RULE in told
    assert f"## This repository ({KEY})" in told
    row = _row(env, learning_id)
    assert row is not None and (row.status, row.scope, row.repo_key) == ("active", "repo", KEY)
    assert row.anchors == [{"path": "pnpm-lock.yaml"}]
    assert _told(env, make_repo(tmp_path / "other", "git@github.com:x/other.git")) == ""
    # The same file again is the same id (content-derived), one row, no duplicate note.
    again = _cli(env, "add", str(_learning_file(tmp_path)), "--cwd", str(shop))
    assert again.stdout.strip() == learning_id
    assert len(list((env.kb / "documents").glob("lrn-*.md"))) == 1


def test_global_scope_is_told_everywhere(env, tmp_path, shop):
    path = _learning_file(
        tmp_path, "Never use a bare except", "Catch what you expect.", "scope: global\n"
    )
    learning_id = _cli(env, "add", str(path), "--cwd", str(shop)).stdout.strip()
    other = make_repo(tmp_path / "other", "git@github.com:x/other.git")
    assert f"[{learning_id}]" in _told(env, other)
    assert _row(env, learning_id).scope == "global"


def test_forget_takes_it_out_everywhere_at_once_and_restore_brings_it_back(env, tmp_path, shop):
    learning_id = _cli(env, "add", str(_learning_file(tmp_path)), "--cwd", str(shop)).stdout.strip()
    scope = ServerScope.here(str(shop))
    assert learning_id in get_tool(env.kb, learning_id, scope=scope)
    assert learning_id in search_tool(env.kb, "pnpm install", mode="lexical", scope=scope)
    hits = json.loads(_cli(env, "search", "pnpm", "--mode", "lexical", "--json").stdout)
    assert [h["id"] for h in hits] == [learning_id]

    out = _cli(env, "forget", learning_id)
    assert out.exit_code == 0 and out.stdout.strip() == f"{learning_id}: forgotten"
    assert _told(env, shop) == ""
    assert json.loads(_cli(env, "search", "pnpm", "--mode", "lexical", "--json").stdout) == []
    assert "no matches" in search_tool(env.kb, "pnpm install", mode="lexical", scope=scope)
    with pytest.raises(ToolError, match=f"no learning {learning_id}"):
        get_tool(env.kb, learning_id, scope=scope)
    assert _cli(env, "get", learning_id).exit_code == 1
    row = _row(env, learning_id)
    assert row.status == "archived" and row.retired_reason.startswith("forgotten by cli:")
    away = env.kb / "documents" / ".forgotten"
    assert sorted(p.name for p in away.iterdir()) == [
        f"{learning_id}.entities.yaml",
        f"{learning_id}.md",
    ]
    assert "status: archived" in (away / f"{learning_id}.md").read_text()
    assert _cli(env, "forget", learning_id).stdout.strip() == f"{learning_id}: already forgotten"
    # A reindex (the worker's, later) agrees: the note is gone, nothing comes back.
    assert _cli(env, "reindex").exit_code == 0
    assert _told(env, shop) == ""

    out = _cli(env, "restore", learning_id)
    assert out.exit_code == 0 and out.stdout.strip() == f"{learning_id}: restored (was archived)"
    told = _told(env, shop)
    assert f"[{learning_id}]" in told and RULE in told
    assert learning_id in get_tool(env.kb, learning_id, scope=scope)
    hits = json.loads(_cli(env, "search", "pnpm", "--mode", "lexical", "--json").stdout)
    assert [h["id"] for h in hits] == [learning_id]
    assert _row(env, learning_id).status == "active"
    assert not (env.kb / "documents" / ".forgotten" / f"{learning_id}.md").exists()
    with session_scope(env.settings().db_url, readonly=True) as s:
        changes = list(
            s.scalars(
                select(LearningHistory.change_type)
                .where(LearningHistory.learning_id == learning_id)
                .order_by(LearningHistory.id)
            )
        )
    assert changes[-2:] == ["status_change", "restored"]
    assert _cli(env, "restore", learning_id).stdout.strip() == f"{learning_id}: already active"


def test_a_negating_title_demotes_the_older_learning(env, tmp_path, shop):
    older = _cli(env, "add", str(_learning_file(tmp_path)), "--cwd", str(shop)).stdout.strip()
    negation = _learning_file(tmp_path, "Do not use pnpm for installs", "Use npm ci instead.")
    out = _cli(env, "add", str(negation), "--cwd", str(shop), "--json")
    assert out.exit_code == 0, out.output
    newer = json.loads(out.stdout)
    assert newer["demoted"] == [older]
    row = _row(env, older)
    assert (row.is_latest, row.status, row.superseded_by) == (False, "superseded", newer["id"])
    with session_scope(env.settings().db_url, readonly=True) as s:
        history = s.scalars(
            select(LearningHistory).where(LearningHistory.learning_id == older)
        ).all()
        assert history[-1].change_type == "status_change"
        assert f"contradicted by {newer['id']}" in history[-1].reason
        assert history[-1].snapshot["status"] == "active"  # the snapshot before the change
    told = _told(env, shop)
    assert f"[{newer['id']}]" in told and older not in told
    assert "superseded_by: " + newer["id"] in (env.kb / "documents" / f"{older}.md").read_text()
    # A person can undo it.
    assert _cli(env, "restore", older).stdout.strip() == f"{older}: restored (was superseded)"
    assert _row(env, older).is_latest is True and older in _told(env, shop)


def test_contradiction_rule_is_seed_003s():
    assert contradiction.contradicts("Do not use pnpm for installs", "Use pnpm for installs")
    assert contradiction.contradicts(
        "Never squash merge release branches", "Squash merge release branches"
    )
    assert contradiction.contradicts("Don't pin tenacity", "Pin tenacity")
    # Both negated, neither negated, or words too far apart: no contradiction.
    assert not contradiction.contradicts("Never use npm", "Do not use npm")
    assert not contradiction.contradicts("Use pnpm for installs", "Use pnpm for installs")
    assert not contradiction.contradicts("Do not use pnpm for CI installs", "Use pnpm for installs")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("just a body, no frontmatter\n", "no frontmatter"),
        ("---\ntitle: only a title\n---\n", "needs a non-empty `rule`"),
        ("---\ntitle: t\nrule: r\nscope: team\n---\n", "scope must be `repo` or `global`"),
        ("---\ntitle: [unclosed\nrule: r\n---\n", "not valid YAML"),
        ("---\ntitle: t\nrule: " + "x" * 5_000_000 + "\n---\n", "rule is 5,000,00"),
    ],
)
def test_bad_add_files_are_one_line_and_change_nothing(env, tmp_path, shop, text, message):
    path = _file(tmp_path, "bad.md", text)
    out = _cli(env, "add", str(path), "--cwd", str(shop))
    assert out.exit_code == 1 and message in out.output
    assert out.output.strip().count("\n") == 0
    assert not (env.kb / "documents").exists() or not list((env.kb / "documents").glob("*.md"))


def test_unknown_ids_are_exit_1_and_one_line(env):
    for verb in ("forget", "restore"):
        out = _cli(env, verb, "lrn-nope-000000")
        assert out.exit_code == 1 and out.output.strip() == "Error: no learning lrn-nope-000000"
        bad = _cli(env, verb, "../../etc/passwd")
        assert bad.exit_code == 1 and "not a learning id" in bad.output


def test_secrets_in_an_added_file_are_redacted(env, tmp_path, shop):
    key = "sk-proj-" + "A1b2C3d4E5f6G7h8I9j0" * 3
    path = _learning_file(tmp_path, "Call the API with the service key", f"Use {key} for calls.")
    learning_id = _cli(env, "add", str(path), "--cwd", str(shop)).stdout.strip()
    note = (env.kb / "documents" / f"{learning_id}.md").read_text()
    assert key not in note and "[REDACTED:" in note
    assert key not in _told(env, shop)
