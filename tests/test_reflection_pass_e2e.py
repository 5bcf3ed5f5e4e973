"""Every working session is reflected (issue 26 item 1): a clean session — no correction
anywhere — that finishes an open item closes it at SessionEnd, with one paid pass that read
the condensed transcript (tool calls included); short and machine sessions stay at $0.

Through the real hook, a real drain, the stub ``claude`` (which records every prompt) and a
real repository with its Reflection Store.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from recall_support import make_repo
from sqlalchemy import select
from support import BIN

from reflect_jobs.ledger.db import session_scope
from reflect_jobs.ledger.models import Job, JobEvent

SESSION = "s-clean"


class ToolSession:
    """A Claude Code session file with prompts, text, tool calls and their results."""

    def __init__(self, path: Path, cwd: Path, *, entrypoint: str = "cli") -> None:
        self.path, self.cwd, self.entrypoint, self.n = path, cwd, entrypoint, 0
        path.write_text("", encoding="utf-8")

    def _rec(self, role: str, content: object, tokens: int = 4_000) -> None:
        self.n += 1
        message: dict = {"role": role, "content": content}
        if role == "assistant":
            message["usage"] = {"input_tokens": tokens, "output_tokens": 30}
        rec = {
            "type": role,
            "uuid": f"u{self.n}",
            "sessionId": SESSION,
            "cwd": str(self.cwd),
            "entrypoint": self.entrypoint,
            "timestamp": f"2026-11-01T10:{self.n // 60 % 60:02d}:{self.n % 60:02d}Z",
            "message": message,
        }
        with self.path.open("a", encoding="utf-8") as fh:
            fh.write(json.dumps(rec) + "\n")

    def prompt(self, text: str) -> None:
        self._rec("user", text)

    def say(self, text: str) -> None:
        self._rec("assistant", [{"type": "text", "text": text}])

    def tool(self, name: str, args: dict, output: str, *, error: bool = False) -> None:
        tid = f"t{self.n}"
        self._rec("assistant", [{"type": "tool_use", "id": tid, "name": name, "input": args}])
        block = {"type": "tool_result", "tool_use_id": tid, "content": output}
        if error:
            block["is_error"] = True
        self._rec("user", [block])


def _hook(env, path: Path, event: str) -> None:  # type: ignore[no-untyped-def]
    payload = {"session_id": SESSION, "transcript_path": str(path), "hook_event_name": event}
    proc = subprocess.run(
        [str(BIN / "reflect-jobs-hook"), "claude"],
        input=json.dumps(payload).encode(),
        env=dict(env),
        capture_output=True,
        timeout=30,
    )
    assert proc.returncode == 0, proc.stderr


def _calls(env) -> list[dict]:  # type: ignore[no-untyped-def]
    log = Path(env["STUB_CLAUDE_LOG"])
    return [json.loads(x) for x in log.read_text().splitlines()] if log.exists() else []


def _items(env, repo: Path) -> dict[str, dict]:  # type: ignore[no-untyped-def]
    out = env.run("reflections", "list", "--status", "all", "--repo", str(repo), "--json")
    return {i["title"]: i for i in json.loads(out.stdout)}


def _jobs(env) -> list[tuple[str, str | None, str]]:  # type: ignore[no-untyped-def]
    with session_scope(env.settings().db_url) as s:
        rows = s.scalars(select(Job).order_by(Job.created_at)).all()
        events = s.scalars(select(JobEvent)).all()
        return [
            (j.event, j.outcome, " ".join(e.detail or "" for e in events if e.job_id == j.id))
            for j in rows
        ]


def _work(s: ToolSession) -> None:
    """A session that does the work: no correction, no approval, just the job done."""
    s.prompt("Please wire the retry budget into the importer module.")
    s.say("I'll read the importer first.")
    s.tool("Read", {"file_path": "src/importer.py"}, "def run():\n    ...\n" * 400)
    s.tool("Edit", {"file_path": "src/importer.py", "old_string": "x", "new_string": "y"}, "ok")
    s.prompt("Run the test suite for it.")
    s.tool("Bash", {"command": "pytest -q tests/test_importer.py"}, "E   assert 0 == 3", error=True)
    s.say("One test failed: the budget was read before it was set. Fixing the order.")
    s.tool("Bash", {"command": "pytest -q tests/test_importer.py"}, "5 passed in 0.31s")
    s.prompt("Commit it with a short message.")
    s.tool("Bash", {"command": "git commit -am 'importer: retry budget'"}, "[main 1a2b3c] x")
    s.say("Committed: the importer now spends its retry budget.")


def _setup(env, tmp_path: Path):  # type: ignore[no-untyped-def]
    env.pop("REFLECT_CHECKPOINTS")  # the real checkpoints: a Stop at 2% makes no call
    repo = make_repo(tmp_path / "shop", "git@github.com:acme/shop.git")
    out = env.run(
        "reflections",
        "add",
        "--kind",
        "action",
        "--title",
        "Wire the retry budget into the importer",
        "--repo",
        str(repo),
    )
    item = out.stdout.strip()
    prompts = tmp_path / "prompts"
    prompts.mkdir()
    env.update(
        STUB_CLAUDE_MODE="close_offered",
        STUB_CLAUDE_PROMPTS=str(prompts),
        STUB_CLAUDE_CLOSE="retry budget",
        STUB_CLAUDE_EVIDENCE="5 passed in 0.31s",
        STUB_CLAUDE_SUMMARY="Wired the retry budget into the importer; tests pass.",
    )
    return repo, item, prompts


def test_a_clean_session_that_finishes_an_item_closes_it_at_session_end(env, tmp_path):
    repo, item, prompts = _setup(env, tmp_path)
    s = ToolSession(tmp_path / f"{SESSION}.jsonl", repo)
    _work(s)
    _hook(env, s.path, "Stop")  # 2% of the context: below every checkpoint, $0
    env.invoke("drain", "--until-idle", "--max-seconds", "60")
    assert _calls(env) == []
    _hook(env, s.path, "SessionEnd")
    env.invoke("drain", "--until-idle", "--max-seconds", "60")

    assert len(_calls(env)) == 1  # one paid pass for the whole session
    prompt = (prompts / "1.txt").read_text()
    assert item in prompt  # the open item was offered with its id
    assert "## Condensed transcript since the last pass" in prompt
    assert '[tool call] Bash(command="pytest -q tests/test_importer.py")' in prompt
    assert '[tool call] Edit(file_path="src/importer.py"' in prompt
    assert "[tool error] E assert 0 == 3" in prompt
    assert "[tool result] 5 passed in 0.31s" in prompt
    assert "[person] Commit it with a short message." in prompt
    assert "def run()" not in prompt  # the file the session read is dropped
    closed = _items(env, repo)["Wire the retry budget into the importer"]
    assert closed["status"] == "done" and closed["notes"][-1]["by"] == "reflector"
    assert '[evidence: "5 passed in 0.31s"]' in closed["notes"][-1]["text"]
    jobs = _jobs(env)
    assert [j[1] for j in jobs] == ["skip_below_checkpoint", "ok"]
    assert "reflection: 3 person turns" in jobs[1][2] and "learning cascade: skip_no" in jobs[1][2]


def test_a_close_without_evidence_in_the_session_is_dropped(env, tmp_path):
    repo, _item, _prompts = _setup(env, tmp_path)
    env.update(STUB_CLAUDE_EVIDENCE="all importer tests are green now")  # never said
    s = ToolSession(tmp_path / f"{SESSION}.jsonl", repo)
    _work(s)
    _hook(env, s.path, "SessionEnd")
    env.invoke("drain", "--until-idle", "--max-seconds", "60")
    assert len(_calls(env)) == 1
    assert _items(env, repo)["Wire the retry budget into the importer"]["status"] == "open"
    with session_scope(env.settings().db_url) as db:
        details = " ".join(e.detail or "" for e in db.scalars(select(JobEvent)))
    assert "unevidenced=1" in details


def test_short_and_machine_sessions_stay_free(env, tmp_path):
    repo, _item, _prompts = _setup(env, tmp_path)
    short = ToolSession(tmp_path / f"{SESSION}.jsonl", repo)
    short.prompt("Please wire the retry budget into the importer module.")
    short.tool("Bash", {"command": "pytest -q"}, "5 passed in 0.31s")
    short.prompt("Thanks.")
    _hook(env, short.path, "SessionEnd")
    env.invoke("drain", "--until-idle", "--max-seconds", "60")
    assert _calls(env) == []
    ((_event, outcome, detail),) = _jobs(env)
    assert outcome == "skip_no_signal" and "2 person turns since the last pass (< 3)" in detail

    headless = ToolSession(tmp_path / "headless.jsonl", repo, entrypoint="sdk-cli")
    _work(headless)
    env.invoke("enqueue", str(headless.path))  # a deep pass a person asked for: still $0
    env.invoke("drain", "--until-idle", "--max-seconds", "60")
    assert _calls(env) == [] and _jobs(env)[-1][1] == "skip_not_interactive"
