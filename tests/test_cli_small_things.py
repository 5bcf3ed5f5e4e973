"""The small things a new user trips on (issue 28, item 7), each as the user sees it.

One line for a bad option value (no usage dump), ``context --cwd`` of a missing directory,
``get ID`` and ``reflections show ID``, ``cost`` that explains its columns and refuses a
window it cannot read. In-process (click's runner): none of this is about a process boundary.
"""

from __future__ import annotations

import json
import subprocess

import pytest
from click.testing import CliRunner
from support import write_note

from reflect_jobs.cli import main
from reflect_jobs.reflections.cli import main as reflections


def _run(env, *args: str, cli=main):  # type: ignore[no-untyped-def]
    return CliRunner().invoke(cli, list(args), env=dict(env))


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["cost", "--by", "week"], "Invalid value for '--by': 'week' is not one of"),
        (["cost", "--since", "7x"], "'7x': use a number and a unit, like 30d, 24h, 2w or 90m"),
        (["cost", "--since", "-3d"], "use a number and a unit"),
        (["jobs", "--limit", "many"], "Invalid value for '--limit'"),
        (["show"], "Missing argument 'JOB_ID'"),
        (["frobnicate"], "No such command 'frobnicate'"),
        (["items", "list", "--status", "pending"], "Invalid value for '--status'"),
    ],
)
def test_a_bad_option_is_one_line_with_where_to_look(env, args, says):
    out = _run(env, *args)
    assert out.exit_code == 2
    assert out.output.count("\n") == 1 and "Usage:" not in out.output
    assert out.output.startswith("Error: ") and says in out.output
    assert out.output.rstrip().endswith("--help`)")


def test_context_of_a_missing_directory_says_so(env, tmp_path):
    out = _run(env, "context", "--cwd", str(tmp_path / "nope"))
    assert out.exit_code == 2 and f"--cwd {tmp_path / 'nope'}: no such directory" in out.output


def test_get_prints_a_learning_by_id(env):
    note = write_note(env.kb, "Pin the pnpm version", "corepack enable")
    out = _run(env, "get", note.id)
    assert out.exit_code == 0
    assert out.stdout == (env.kb / "documents" / f"{note.id}.md").read_text().rstrip("\n") + "\n"
    assert _run(env, "get", note.id, "--path").stdout.strip() == str(
        env.kb / "documents" / f"{note.id}.md"
    )
    for bad, says in (("../../etc/passwd", "not a learning id"), ("lrn-nope", "no learning")):
        out = _run(env, "get", bad)
        assert out.exit_code == 1 and says in out.output


def test_reflections_show_prints_an_item_with_its_notes(env, tmp_path, monkeypatch):
    repo = tmp_path / "repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    monkeypatch.chdir(repo)
    added = _run(
        env, "add", "--kind", "action", "--title", "Wire X", "--body", "all of it", cli=reflections
    )
    assert added.exit_code == 0, added.output
    ident = added.stdout.strip()
    assert _run(env, "done", ident, "--note", "shipped in abc123", cli=reflections).exit_code == 0
    out = _run(env, "show", ident, cli=reflections)
    assert out.exit_code == 0, out.output
    lines = out.stdout.splitlines()
    assert lines[0].startswith(f"{ident}  action  done  by person")
    assert "title: Wire X" in lines and "all of it" in lines
    assert lines[-1].endswith("done by person: shipped in abc123")
    data = json.loads(_run(env, "items", "show", ident, "--json").stdout)
    assert (data["id"], data["status"], data["notes"][0]["text"]) == (
        ident,
        "done",
        "shipped in abc123",
    )
    missing = _run(env, "show", "#ffff", cli=reflections)
    assert missing.exit_code != 0


def test_cost_explains_its_columns(env):
    from reflect_jobs.ledger.db import session_scope
    from reflect_jobs.ledger.models import CostRow, utcnow

    now = utcnow()
    with session_scope(env.settings().db_url) as s:
        s.add(CostRow(at=now, day=now.strftime("%Y-%m-%d"), outcome="ok", entries=1, tokens=10))
    out = _run(env, "cost", "--since", "all")
    assert out.exit_code == 0, out.output
    assert "runs: model calls recorded; entries: budget units charged" in out.stdout
    help_text = _run(env, "cost", "--help").stdout
    assert "cache_rd = tokens read from the prompt cache" in help_text
