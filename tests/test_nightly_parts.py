"""The nightly layer's pure parts: the MEMORY.md splice, the schedule, the commit scan, the
revert scan's bound, Claude Code's project directory, the synthesis answer parser."""

from __future__ import annotations

import json
import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path

from reflect_jobs.nightly import schedule
from reflect_jobs.nightly.commits import reverts, session_commits
from reflect_jobs.nightly.memory_md import (
    BEGIN,
    END,
    HEADING,
    bullet,
    canonical_root,
    memory_file,
    project_name,
    splice,
)
from reflect_jobs.nightly.synthesis import parse_observations

B = [bullet("Use pnpm, never npm", "lrn-use-pnpm-abc123"), bullet("Run tests", "lrn-run-0f0f0f")]
PERSON = "# My notes\n\n- deploy with `make ship`\n- ask Ana before schema changes\n"


def test_the_section_is_appended_and_a_second_run_changes_nothing():
    first = splice(PERSON, B, max_lines=40)
    assert first.changed and first.text.startswith(PERSON)
    assert first.text.endswith(f"\n{BEGIN}\n{HEADING}\n{B[0]}\n{B[1]}\n{END}\n")
    again = splice(first.text, B, max_lines=40)
    assert not again.changed and again.text == first.text
    # a learning that leaves: its line goes, the person's lines stay
    fewer = splice(first.text, B[:1], max_lines=40)
    assert B[1] not in fewer.text and fewer.text.startswith(PERSON)


def test_the_section_is_rewritten_in_place_and_lines_around_it_are_kept():
    placed = (
        PERSON + f"{BEGIN}\n{HEADING}\n- stale line (lrn-old-111111)\n{END}\n" + "# After\nmine\n"
    )
    out = splice(placed, B, max_lines=40)
    assert out.text == PERSON + f"{BEGIN}\n{HEADING}\n{B[0]}\n{B[1]}\n{END}\n# After\nmine\n"


def test_a_half_deleted_marker_is_repaired_without_duplicating_or_deleting_the_persons_text():
    whole = splice(PERSON, B, max_lines=40).text
    no_end = whole.replace(END + "\n", "") + "- a line the person added after\n"
    out = splice(no_end, B, max_lines=40)
    assert out.repaired and out.text.count(BEGIN) == 1 and out.text.count(END) == 1
    assert out.text.count(B[0]) == 1
    assert "- a line the person added after\n" in out.text and out.text.startswith(PERSON)
    no_begin = whole.replace(BEGIN + "\n", "")
    out2 = splice(no_begin, B, max_lines=40)
    assert out2.text.count(BEGIN) == 1 and out2.text.count(B[1]) == 1
    assert out2.text.startswith(PERSON)
    twice = whole + whole[len(PERSON) :]  # the section pasted twice
    out3 = splice(twice, B, max_lines=40)
    assert out3.text.count(BEGIN) == 1 and out3.text.count(B[0]) == 1
    assert not splice(out.text, B, max_lines=40).changed


def test_a_file_over_claude_codes_limit_is_not_made_worse():
    big = "".join(f"line {i}\n" for i in range(230))
    out = splice(big, B, max_lines=40)
    assert not out.changed and out.text == big and "over Claude Code's limit" in out.refused
    # near the limit: the section shrinks to fit instead of pushing the file over
    near = "".join(f"line {i}\n" for i in range(194))
    fits = splice(near, B * 5, max_lines=40)
    assert fits.changed and fits.text.count("\n") <= 200 and fits.lines == 2


def test_no_learning_and_no_file_writes_nothing():
    assert not splice(None, [], max_lines=40).changed
    emptied = splice(splice(PERSON, B, max_lines=40).text, [], max_lines=40)
    assert BEGIN not in emptied.text and emptied.text.startswith(PERSON)


def test_claude_codes_project_directory(tmp_path):
    assert project_name("/home/cole/src/my.repo") == "-home-cole-src-my-repo"
    main = tmp_path / "main"
    subprocess.run(["git", "init", "-q", str(main)], check=True)
    subprocess.run(
        ["git", "-C", str(main), "-c", "user.email=a@b", "-c", "user.name=a", "commit",
         "--allow-empty", "-qm", "x"],
        check=True,
    )  # fmt: skip
    wt = tmp_path / "wt"
    subprocess.run(["git", "-C", str(main), "worktree", "add", "-q", str(wt)], check=True)
    assert canonical_root(str(wt)) == str(main)  # every worktree shares the main one's memory
    found = memory_file(str(tmp_path / "claude"), str(wt))
    assert (
        found == tmp_path / "claude" / "projects" / project_name(str(main)) / "memory" / "MEMORY.md"
    )
    long_root = "/" + "x" * 250
    assert memory_file(str(tmp_path / "claude"), long_root) is None  # never guessed


def test_the_schedule_catches_a_missed_slot_up_once():
    at = "03:30"
    now = datetime.now(UTC)
    slot = schedule.latest_slot(now, at)
    assert slot <= now < slot + timedelta(days=1)
    assert schedule.due(now, at, None)
    assert schedule.due(now, at, slot - timedelta(days=2))  # asleep for two nights: one run
    assert not schedule.due(now, at, slot + timedelta(seconds=1))


def _tool_result(text: str) -> str:
    return json.dumps(
        {"type": "user", "message": {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "t1", "content": text}]}}
    )  # fmt: skip


def test_the_commits_a_session_made_are_read_from_its_tool_output(tmp_path):
    t = tmp_path / "t.jsonl"
    lines = [
        _tool_result("[main 4f2a9c1] Fix the login retry\n 1 file changed, 2 insertions(+)"),
        _tool_result("[feature/x (root-commit) 00aa11b] First\n"),
        json.dumps({"type": "assistant", "message": {"content": "commit 1234567 looks fine"}}),
    ]
    t.write_text("\n".join(lines) + "\n")
    assert session_commits(t) == ["4f2a9c1", "00aa11b"]
    assert session_commits(t, since=len(lines[0]) + 1) == ["00aa11b"]
    assert session_commits(tmp_path / "missing.jsonl") == []


def _git(root: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(root), "-c", "user.email=a@b", "-c", "user.name=a", *args],
        check=True,
        capture_output=True,
        text=True,
    ).stdout


def test_the_revert_scan_reads_a_bounded_history(tmp_path):
    root = tmp_path / "r"
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    (root / "f").write_text("1")
    _git(root, "add", "f")
    _git(root, "commit", "-qm", "one")
    (root / "f").write_text("2")
    _git(root, "commit", "-qam", "two")
    bad = _git(root, "rev-parse", "HEAD").strip()
    _git(root, "revert", "--no-edit", "HEAD")
    for i in range(5):
        _git(root, "commit", "--allow-empty", "-qm", f"later {i}")
    since = datetime.now(UTC) - timedelta(days=1)
    found = reverts(str(root), since)
    assert [r.reverted for r in found] == [bad]
    assert reverts(str(root), since, max_commits=5) == []  # beyond the bound: not read


def test_a_hostile_synthesis_answer_keeps_only_what_it_may():
    offered = {"lrn-a-000001", "lrn-b-000002", "lrn-c-000003"}
    answer = json.dumps({"observations": [
        {"text": "Fixtures go stale <script>x</script>\nin checkout", "learnings":
            ["lrn-a-000001", "lrn-b-000002", "lrn-zz-999999"]},
        {"text": "only one id", "learnings": ["lrn-c-000003"]},
        {"text": 7, "learnings": list(offered)},
    ] + [{"text": f"p{i}", "learnings": sorted(offered)} for i in range(9)]})  # fmt: skip
    parsed = parse_observations(answer, offered)
    assert parsed is not None and len(parsed) == 5
    text, ids = parsed[0]
    assert ids == ["lrn-a-000001", "lrn-b-000002"] and "<" not in text and "\n" not in text
    assert parse_observations("not json", offered) is None
    assert parse_observations('{"groups": []}', offered) is None


def test_one_promoter_wins_the_lease_and_another_takes_it_only_after_it_lapsed(tmp_path):
    from reflect_jobs.nightly import state

    db = f"sqlite:///{tmp_path / 'reflect.db'}"
    now = datetime.now(UTC)
    assert state.claim_promoter(db, "laptop-a", now) == (True, "")
    won, why = state.claim_promoter(db, "laptop-b", now)
    assert not won and "laptop-a holds the promoter lease" in why
    assert state.claim_promoter(db, "laptop-a", now + timedelta(hours=1))[0]  # renewed
    later = now + state.PROMOTER_LEASE + timedelta(hours=2)
    assert state.claim_promoter(db, "laptop-b", later) == (True, "")  # a lapsed lease moves
    assert not state.claim_promoter(db, "laptop-a", later)[0]


def test_a_run_is_claimed_once_and_a_dead_runs_claim_is_taken_over(tmp_path):
    from reflect_jobs.nightly import state

    db = f"sqlite:///{tmp_path / 'reflect.db'}"
    now = datetime.now(UTC)
    assert state.claim_run(db, now)
    assert not state.claim_run(db, now)  # this process still runs it
    value = state.read(db, state.RUN_KEY)
    dead = subprocess.Popen(["true"])
    dead.wait()
    state.write(db, state.RUN_KEY, {**value, "pid": dead.pid})  # its owner is gone
    assert state.claim_run(db, now)
    state.finish_run(db, now, completed=True)
    assert state.last_run(db) == now


def test_the_synthesis_is_due_weekly_or_after_thirty_new_learnings(tmp_path):
    from reflect_jobs.ledger import learnings
    from reflect_jobs.ledger.db import session_scope
    from reflect_jobs.nightly import state
    from reflect_jobs.nightly.synthesis import _due

    db = f"sqlite:///{tmp_path / 'reflect.db'}"
    key = "github.com/acme/shop"

    def add(n: int, start: int = 0) -> None:
        with session_scope(db) as s:
            for i in range(start, start + n):
                learnings.upsert_learning(
                    s, learning_id=f"lrn-x-{i:06x}", title=f"t{i}", category="Tools",
                    learning_type="pattern", confidence_num=0.8, note_path="", content_hash="",
                    source=f"/t{i}", session_id=f"s{i}", signal_hash=None, job_id=None,
                    scope="repo", repo_key=key,
                )  # fmt: skip

    now = datetime.now(UTC)
    assert not _due(db, key, now)[0]  # nothing to consolidate
    add(3)
    assert _due(db, key, now)[0]  # never synthesised, 3 learnings this week
    state.write(db, state.flag_key("synthesis", key), {"at": now.isoformat()})
    later = now + timedelta(days=2)
    assert not _due(db, key, later)[0]  # synthesised two days ago: not weekly yet
    add(30, start=100)
    assert _due(db, key, later)[0]  # 30 new learnings since: the auto-trigger
