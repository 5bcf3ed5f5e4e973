"""The nightly layer end to end: real drains through the stub ``claude``, a real SQLite
ledger, real git repositories, the real ``reflect-jobs nightly`` command; what is checked is
what a person sees — the dated report, MEMORY.md, the items, the ledger row and the note,
the next write prompt."""

from __future__ import annotations

import json
import subprocess
from datetime import datetime
from pathlib import Path

from support import STUB_CLAUDE, Env, write_claude_transcript

from reflect_jobs import kb
from reflect_jobs.ledger.db import session_scope
from reflect_jobs.ledger.models import Learning
from reflect_jobs.nightly.memory_md import BEGIN, END, memory_file

CORRECTION = (
    "No, that's wrong: always run pnpm install from the repository root; npm rewrites the lockfile."
)
AGAIN = "No, run pnpm install from the repository root again, never npm install."
PERSON = "# My own notes\n\n- deploy with `make ship`\n"


def _git(root: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(root), "-c", "user.email=a@b", "-c", "user.name=a", *args],
        check=True,
        capture_output=True,
        text=True,
    ).stdout


def _repo(path: Path) -> Path:
    subprocess.run(["git", "init", "-q", "-b", "main", str(path)], check=True)
    _git(path, "remote", "add", "origin", "git@github.com:acme/shop.git")
    (path / "README").write_text("shop\n")
    _git(path, "add", "README")
    _git(path, "commit", "-qm", "init")
    return path


def _env(env, tmp_path: Path):  # type: ignore[no-untyped-def]
    (tmp_path / "user").mkdir()
    env.update(HOME=str(tmp_path / "user"), CLAUDE_CONFIG_DIR=str(tmp_path / "claude"))
    return env


def _transcript(path: Path, corrections: list[str], cwd: Path, session: str, extra=()) -> Path:  # type: ignore[no-untyped-def]
    t = write_claude_transcript(path, corrections, session=session)
    lines = [json.loads(x) for x in t.read_text().splitlines()]
    lines += list(extra)
    t.write_text("\n".join(json.dumps({**r, "cwd": str(cwd)}) for r in lines) + "\n")
    return t


def _answer(env, tmp_path: Path, actions: list[dict], name: str) -> None:  # type: ignore[no-untyped-def]
    envelope = json.loads((STUB_CLAUDE.parent / "answers" / "success.json").read_text())
    envelope["result"] = json.dumps({"actions": actions})
    answer = tmp_path / name
    answer.write_text(json.dumps(envelope))
    env.update(STUB_CLAUDE_MODE="file", STUB_CLAUDE_FILE=str(answer))


def _learning(title: str, rule: str, evidence: str) -> dict:
    return {
        "title": title,
        "category": "Tools",
        "key_insight": "",
        "problem": "npm install rewrote the lockfile",
        "root_cause": "the repository is a pnpm workspace",
        "fix": "run pnpm install from the root",
        "rule": rule,
        "confidence_num": 0.9,
        "scope": "repo",
        "tags": ["pnpm"],
        "entities": ["pnpm"],
        "causal_relations": [],
        "body": "## Problem\nnpm broke the lockfile.",
        "evidence": evidence,
    }


PNPM = _learning(
    "Run pnpm install from the repository root",
    "Run pnpm install from the repository root; never npm.",
    "always run pnpm install from the repository root",
)
PNPM_ID = kb.learning_id(PNPM["title"], PNPM["rule"])


def _session(env, tmp_path, repo, name, corrections, actions, extra=()):  # type: ignore[no-untyped-def]
    t = _transcript(tmp_path / f"{name}.jsonl", corrections, repo, name, extra)
    _answer(env, tmp_path, actions, f"{name}.json")
    env.cli("enqueue", str(t), "--session-id", name)
    env.cli("drain", "--until-idle", "--max-seconds", "120")
    return t


def _confirmed_twice(env, tmp_path, repo) -> None:  # type: ignore[no-untyped-def]
    _session(env, tmp_path, repo, "sess-a", [CORRECTION], [{"action": "CREATE", "learning": PNPM}])
    update = {
        "action": "UPDATE",
        "target_id": PNPM_ID,
        "reason": "said again",
        "evidence": "run pnpm install from the repository root again",
    }
    _session(env, tmp_path, repo, "sess-b", [AGAIN], [update])


def _nightly(env, *args: str, check: bool = True) -> dict:  # type: ignore[no-untyped-def]
    out = env.cli("nightly", "--now", "--json", *args, check=check)
    return json.loads(out.stdout)


def _row(env, lid: str) -> Learning:  # type: ignore[no-untyped-def]
    with session_scope(env.settings().db_url) as s:
        row = s.get(Learning, lid)
        s.expunge_all()
    return row


def test_repeated_correction_is_reported_and_promoted_into_memory_md_by_the_promoter_only(
    env, tmp_path
):
    _env(env, tmp_path)
    repo = _repo(tmp_path / "shop")
    _confirmed_twice(env, tmp_path, repo)
    target = memory_file(str(tmp_path / "claude"), str(repo))
    assert target is not None
    target.parent.mkdir(parents=True)
    target.write_text(PERSON)

    result = _nightly(env)
    assert result["status"] == "done", result
    report = Path(result["report"])
    assert report.name == f"{datetime.now().astimezone():%Y-%m-%d}.md"
    text = report.read_text()
    assert "## github.com/acme/shop" in text
    line = next(x for x in text.splitlines() if PNPM["title"] in x and "sessions:" in x)
    assert "sess-a" in line and "sess-b" in line and "2 sessions" in line
    assert oct(report.stat().st_mode & 0o777) == "0o600"

    memory = target.read_text()
    assert memory.startswith(PERSON) and BEGIN in memory and END in memory
    assert f"({PNPM_ID})" in memory and PNPM["rule"] in memory
    first_bytes = target.read_bytes()
    mtime = target.stat().st_mtime_ns

    # Nothing changed: the second run leaves MEMORY.md byte-identical (not even rewritten).
    again = _nightly(env)
    assert again["repos"][0]["memory"] == "unchanged"
    assert target.read_bytes() == first_bytes and target.stat().st_mtime_ns == mtime

    # The report is searchable beside the items and the learnings.
    found = json.loads(
        env.run("reflections", "search", "pnpm", "--repo", str(repo), "--json").stdout
    )
    assert any(r["repo"] == "github.com/acme/shop" for r in found["reports"])

    # A second machine (its own host name, the same ledger) is not the promoter: it logs
    # why and never writes its MEMORY.md.
    env_b = Env(env, REFLECT_HOST="laptop-b", CLAUDE_CONFIG_DIR=str(tmp_path / "claude-b"))
    target_b = memory_file(str(tmp_path / "claude-b"), str(repo))
    assert target_b is not None
    target_b.parent.mkdir(parents=True)
    target_b.write_text(PERSON)
    out_b = env_b.cli("nightly", "--now", "--json")
    result_b = json.loads(out_b.stdout)
    assert result_b["repos"][0]["memory"] == "not_promoter"
    assert target_b.read_text() == PERSON
    report_b = Path(result_b["report"]).read_text()
    assert "holds the promoter lease" in report_b

    # REFLECT_PROMOTE=0: never, whatever the lease.
    env_c = Env(env_b, REFLECT_PROMOTE="0")
    out_c = env_c.cli("nightly", "--now", "--json")
    assert json.loads(out_c.stdout)["repos"][0]["memory"] == "not_promoter"
    assert target_b.read_text() == PERSON

    # A learning forgotten leaves the section at the next run; the person's lines stay.
    note = Path(_row(env, PNPM_ID).note_path)
    note.rename(note.with_suffix(".gone"))
    _nightly(env)
    memory = target.read_text()
    assert PNPM_ID not in memory and memory.startswith(PERSON)
