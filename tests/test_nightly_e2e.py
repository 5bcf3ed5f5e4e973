"""The nightly layer end to end: real drains through the stub ``claude``, a real SQLite
ledger, real git repositories, the real ``reflect-jobs nightly`` command; what is checked is
what a person sees — the dated report, MEMORY.md, the items, the ledger row and the note,
the next write prompt."""

from __future__ import annotations

import json
import subprocess
from datetime import datetime
from pathlib import Path

from sqlalchemy import select
from support import STUB_CLAUDE, Env, write_claude_transcript

from reflect_jobs import kb
from reflect_jobs.ledger.db import session_scope
from reflect_jobs.ledger.models import Learning, LearningHistory
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
    env.invoke("enqueue", str(t), "--session-id", name)
    env.invoke("drain", "--until-idle", "--max-seconds", "120")
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
    out = env.invoke("nightly", "--now", "--json", *args, check=check)
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

    # A person deletes the end marker by hand and writes below: the section is restored
    # once, nothing of theirs goes.
    target.write_text(target.read_text().replace(END + "\n", "") + "- my line after\n")
    repaired = _nightly(env)
    memory = target.read_text()
    assert memory.count(BEGIN) == 1 and memory.count(END) == 1 and memory.count(PNPM_ID) == 1
    assert memory.startswith(PERSON) and memory.endswith("- my line after\n")
    assert "repaired: markers found: begin" in Path(repaired["report"]).read_text()

    # A learning forgotten leaves the section at the next run; the person's lines stay.
    note = Path(_row(env, PNPM_ID).note_path)
    note.rename(note.with_suffix(".gone"))
    _nightly(env)
    memory = target.read_text()
    assert PNPM_ID not in memory and memory.startswith(PERSON)


def _tool_result(text: str) -> dict:
    return {
        "type": "user",
        "message": {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "t1", "content": text}],
        },
    }


def test_a_revert_of_a_sessions_commit_demotes_its_learning(env, tmp_path):
    _env(env, tmp_path)
    repo = _repo(tmp_path / "shop")
    (repo / "pkg.json").write_text("{}\n")
    _git(repo, "add", "pkg.json")
    _git(repo, "commit", "-qm", "Use pnpm for installs")
    short = _git(repo, "rev-parse", "--short=7", "HEAD").strip()
    commit_output = _tool_result(f"[main {short}] Use pnpm for installs\n 1 file changed")
    _session(
        env,
        tmp_path,
        repo,
        "sess-a",
        [CORRECTION],
        [{"action": "CREATE", "learning": PNPM}],
        extra=[commit_output],
    )
    update = {"action": "UPDATE", "target_id": PNPM_ID, "reason": "again",
              "evidence": "run pnpm install from the repository root again"}  # fmt: skip
    _session(env, tmp_path, repo, "sess-b", [AGAIN], [update])
    assert _row(env, PNPM_ID).status == "active"
    first = _nightly(env)
    target = memory_file(str(tmp_path / "claude"), str(repo))
    assert first["repos"][0]["demoted"] == [] and PNPM_ID in target.read_text()

    _git(repo, "revert", "--no-edit", "HEAD")
    reverting = _git(repo, "rev-parse", "HEAD").strip()
    result = _nightly(env)
    assert result["repos"][0]["demoted"] == [PNPM_ID]
    row = _row(env, PNPM_ID)
    assert row.status == "reverted" and reverting[:12] in row.retired_reason
    assert row.is_latest is False
    with session_scope(env.settings().db_url) as s:
        history = list(
            s.scalars(select(LearningHistory).where(LearningHistory.learning_id == PNPM_ID))
        )
        assert any(h.change_type == "status_change" and reverting[:12] in h.reason for h in history)
    note = kb.parse_note(Path(row.note_path))
    assert note.frontmatter["status"] == "reverted"
    # no longer told: it left MEMORY.md in the same run, and the session-start block
    assert PNPM_ID not in target.read_text() and target.read_text().count(BEGIN) == 0
    env.invoke("drain", "--until-idle", "--max-seconds", "60")  # the reindex it asked for
    assert PNPM["title"] not in env.invoke("context", "--cwd", str(repo)).stdout
    report = Path(result["report"]).read_text()
    assert f"commit {short} (session sess-a) reverted by {reverting[:12]}" in report


def test_observations_from_the_weekly_synthesis_appear_in_the_next_write_prompt(env, tmp_path):
    _env(env, tmp_path)
    repo = _repo(tmp_path / "shop")
    corrections = [
        "No: the checkout tests use stale fixtures, regenerate them first.",
        "Wrong again, the cart fixture is stale too; regenerate fixtures before the run.",
        "No, that is wrong: the payment fixture is also stale, regenerate it from the schema.",
    ]
    made = [
        _learning(f"Regenerate the {w} fixture before the checkout tests", f"Regenerate {w}.", q)
        for w, q in (
            ("checkout", "the checkout tests use stale fixtures"),
            ("cart", "the cart fixture is stale too"),
            ("payment schema", "the payment fixture is also stale"),
        )
    ]
    ids = [kb.learning_id(x["title"], x["rule"]) for x in made]
    _session(
        env, tmp_path, repo, "s1", corrections, [{"action": "CREATE", "learning": x} for x in made]
    )
    with session_scope(env.settings().db_url) as s:
        rows = [(r.id, r.repo_key, r.status) for r in s.scalars(select(Learning))]
    assert sorted(r[0] for r in rows) == sorted(ids), rows
    text = "Three learnings this week are about stale fixtures in the checkout tests."
    env.update(
        STUB_CLAUDE_MODE="echo_actions",
        STUB_CLAUDE_ACTIONS=json.dumps({"observations": [{"text": text, "learnings": ids}]}),
        REFLECT_NIGHTLY_DAILY_MAX="0",
    )
    calls = len(Path(env["STUB_CLAUDE_LOG"]).read_text().splitlines())
    held = _nightly(env)
    assert held["deferred"] and "daily cap" in held["deferred"][0]  # its own units: none
    assert len(Path(env["STUB_CLAUDE_LOG"]).read_text().splitlines()) == calls
    env.update(REFLECT_NIGHTLY_DAILY_MAX="1")
    result = _nightly(env)
    assert not result["deferred"] and result["repos"][0]["observations"] == 1
    notes = list((env.kb / "observations").rglob("obs-*.md"))
    assert len(notes) == 1 and all(i in notes[0].read_text() for i in ids)
    assert "Three learnings this week" in Path(result["report"]).read_text()
    cost = json.loads(env.invoke("cost", "--by", "outcome", "--json").stdout)
    assert cost["rows"]["nightly_ok"]["runs"] == 1
    again = _nightly(env)  # synthesised this week: no second call
    assert len(Path(env["STUB_CLAUDE_LOG"]).read_text().splitlines()) == calls + 1
    assert again["repos"][0]["observations"] == 1

    prompts = tmp_path / "prompts"
    env["STUB_CLAUDE_PROMPTS"] = str(prompts)
    _session(env, tmp_path, repo, "s2", ["No, never mock the payment gateway in e2e tests."], [])
    sent = (prompts / "1.txt").read_text()
    assert text in sent and "Consolidated observations" in sent


def test_unfinished_sessions_get_one_item_and_a_killed_run_resumes_to_the_same_end(env, tmp_path):
    _env(env, tmp_path)
    repo = _repo(tmp_path / "shop")
    interrupted = {"type": "user", "message": {"role": "user",
                   "content": "[Request interrupted by user for tool use]"}}  # fmt: skip
    failing = _tool_result("===== 2 failed, 40 passed in 3.1s =====")
    _session(env, tmp_path, repo, "sess-x", [CORRECTION], [], extra=[failing, interrupted])
    target = memory_file(str(tmp_path / "claude"), str(repo))
    target.parent.mkdir(parents=True)
    target.write_text(PERSON)

    killed = env.cli("nightly", "--now", "--json", check=False, **{})
    assert killed.returncode == 0  # not armed yet: sanity of the command itself
    items = json.loads(env.run("reflections", "list", "--repo", str(repo), "--json").stdout)
    assert len(items) == 1 and items[0]["kind"] == "action"
    assert "interrupted" in items[0]["title"] and "tests failing" in items[0]["title"]
    report = Path(json.loads(killed.stdout)["report"]).read_text()
    assert "session sess-x (claude): interrupted, tests failing" in report
    whole = target.read_bytes()

    # The same night again, killed after the repository's parts (its window not recorded).
    env["REFLECT_FAILPOINTS"] = "nightly:after_repo=kill"
    died = env.cli("nightly", "--now", "--json", check=False)
    assert died.returncode == -9
    del env["REFLECT_FAILPOINTS"]
    resumed = _nightly(env)
    assert resumed["status"] == "done"
    items = json.loads(env.run("reflections", "list", "--repo", str(repo), "--json").stdout)
    assert len(items) == 1, "no duplicate item"
    assert target.read_bytes() == whole
    assert Path(resumed["report"]).read_text() == report
    diary = next((env.kb / "reports" / "diary").glob("*.md")).read_text()
    assert diary.count(f"## {datetime.now().astimezone():%Y-%m-%d}") == 1


def test_a_directory_without_git_and_a_memory_md_over_the_limit(env, tmp_path):
    _env(env, tmp_path)
    plain = tmp_path / "notes-dir"
    plain.mkdir()
    target = memory_file(str(tmp_path / "claude"), str(plain))
    target.parent.mkdir(parents=True)
    big = "".join(f"- my line {i}\n" for i in range(240))
    target.write_text(big)
    result = _nightly(env, "--repo", str(plain))
    assert result["status"] == "done" and result["repos"][0]["memory"] == "refused"
    assert target.read_text() == big
    report = Path(result["report"]).read_text()
    assert "over Claude Code's limit already (240 lines" in report
    assert "no git repository here: the revert check was skipped" in report
    env.invoke("ignore", str(plain))  # an ignored repository: nothing promoted nor reported
    assert _nightly(env, "--repo", str(plain))["repos"] == []
    bad = env.invoke("nightly", "--now", "--repo", str(tmp_path / "nope"), check=False)
    assert bad.returncode == 1 and bad.stderr.count("\n") == 1 and "not a directory" in bad.stderr
