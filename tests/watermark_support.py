"""A Claude Code session file that grows the way the harness writes it: appended records."""

from __future__ import annotations

import json
from pathlib import Path


class GrowingSession:
    """Appends user/assistant records to ``path``, one JSON line each, as Claude Code does."""

    def __init__(self, path: Path, session: str = "s-grow") -> None:
        self.path = path
        self.session = session
        self.n = 0
        path.write_text("", encoding="utf-8")

    def say(self, role: str, text: str, tokens: int | None = None) -> None:
        """Append one record; an assistant record with ``tokens`` carries the usage Claude
        Code writes (the prompt split into fresh, cache-creation and cache-read tokens)."""
        self.n += 1
        content = text if role == "user" else [{"type": "text", "text": text}]
        message: dict = {"role": role, "content": content}
        if role == "assistant" and tokens is not None:
            message["usage"] = {
                "input_tokens": 6,
                "cache_creation_input_tokens": tokens // 10,
                "cache_read_input_tokens": tokens - 6 - tokens // 10,
                "output_tokens": 40,
            }
        rec = {
            "type": role,
            "uuid": f"u{self.n}",
            "sessionId": self.session,
            "timestamp": f"2026-11-01T10:{self.n // 60 % 60:02d}:{self.n % 60:02d}Z",
            "message": message,
        }
        with self.path.open("a", encoding="utf-8") as fh:
            fh.write(json.dumps(rec) + "\n")

    def turn(self, k: int, correction: str, filler: int = 1, tokens: int | None = None) -> None:
        """``filler`` plain exchanges, then a human correction and the agent's reply (whose
        usage, with ``tokens``, says how full the context is now)."""
        for j in range(filler):
            self.say("user", f"Open module m{k}_{j}.py next.")
            self.say("assistant", f"Opened m{k}_{j}.py; it has {40 + j} lines.", tokens)
        self.say("user", correction)
        self.say("assistant", f"Understood, fixing it (turn {k}).", tokens)


CORRECTIONS = [
    "No, never use a bare except in this codebase; catch KeyError.",
    "Wrong: always run the migrations with alembic upgrade head, not create_all.",
    "Stop, don't mock the database in tests; use a real SQLite file.",
    "That's incorrect: the cache key must include the tenant id.",
]


def slice_body(prompt: str) -> str:
    """The dialogue excerpt of a prompt: its slice without header lines or revision block."""
    from reflect_jobs.cascade import REVISION_MARKER
    from reflect_jobs.writer.prompt import slice_of

    body = slice_of(prompt).split(REVISION_MARKER, 1)[0]
    return "\n".join(ln for ln in body.splitlines() if not ln.startswith("# "))


class InProcess:
    """The stage runners called in this process against a real SQLite ledger and the stub
    ``claude`` subprocess (as ``test_stage_runners_are_idempotent`` does): the pipeline
    without a consumer's start-up cost, for the tests that need many captures."""

    def __init__(self, env, tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
        from huey.storage import SqliteStorage

        from reflect_jobs import pipeline
        from reflect_jobs.limits import Caps

        for k, v in env.items():
            if k.startswith("STUB_"):
                monkeypatch.setenv(k, v)
        self.settings = env.settings()
        self.scheduled: list[tuple[str, str]] = []
        recorder = self

        class Dispatcher:
            def schedule(self, stage: str, job_id: str, eta=None) -> None:  # type: ignore[no-untyped-def]
                recorder.scheduled.append((stage, job_id))

            def kb_changed(self) -> None:
                pass

        self.rt = pipeline.Runtime(
            settings=self.settings,
            dispatcher=Dispatcher(),
            caps=Caps(
                SqliteStorage("reflect", filename=str(tmp_path / "q.db")),
                daily_max=100,
                run_max=100,
                window_sec=600,
            ),
            worker="w1",
        )

    def capture(
        self, path: Path, session_id: str, event: str = "Stop", deep: bool | None = None
    ) -> str:
        """Capture ``path`` (as hook ``event``) and run its job until nothing more is
        scheduled for it."""
        from reflect_jobs import pipeline

        runners = {
            "prepare": pipeline.run_prepare,
            "write": pipeline.run_write,
            "add": pipeline.run_add,
        }
        self.scheduled.clear()
        job_id = pipeline.run_capture(self.rt, "claude", session_id, str(path), event, 0, deep=deep)
        while self.scheduled:
            stage, jid = self.scheduled.pop(0)
            if stage in runners:
                runners[stage](self.rt, jid)
        return job_id

    def job(self, job_id: str):  # type: ignore[no-untyped-def]
        from reflect_jobs.ledger.db import session_scope
        from reflect_jobs.ledger.models import Job

        with session_scope(self.settings.db_url) as s:
            job = s.get(Job, job_id)
            s.expunge(job)
            return job

    def mark(self, session_id: str) -> int | None:
        from reflect_jobs.ledger.db import session_scope
        from reflect_jobs.ledger.models import SessionWatermark

        with session_scope(self.settings.db_url) as s:
            row = s.get(SessionWatermark, ("claude", session_id))
            return None if row is None else row.byte_offset
