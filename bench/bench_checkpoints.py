"""Paid calls per long session: checkpoints versus a pass at every capture (ARCHITECTURE §14.1).

Run: .venv/bin/python bench/bench_checkpoints.py [--turns 200] [--every 4]

One synthetic Claude Code session of ``--turns`` turns, a Stop hook after every turn, is
captured through the real stage runners (prepare, write, add) against a real SQLite ledger
and the stub ``claude`` of tests/stubs (a subprocess speaking the real CLI's JSON), twice:

* **per capture** — ``REFLECT_CHECKPOINTS=off``: every capture is a pass, as before
  checkpoints (the cascade still skips a capture with nothing new at $0, and the session
  watermark still sends only what came after the last committed pass);
* **checkpoints** — the defaults: a pass when the context fill crosses 20/40/60/80% of
  200,000 tokens (the first with the cheap model), a deep pass at PreCompact and SessionEnd.

The session: every ``--every``-th turn carries a human correction (a signal), the rest are
plain exchanges; the assistant's usage grows the context from 4% to 90% by 80% of the turns,
where Claude Code compacts (PreCompact, then the fill drops to 20%) and the session goes on
growing until its SessionEnd. Caps are raised out of the way (the question is how many calls
the policy makes, not where a cap defers them). Tokens sent = prompt characters / 4.

Every turn also runs two tools (a ``Read`` whose long output is dropped from the condensed
transcript, a ``Bash`` test run whose short summary is kept), as real sessions do. A third
run, **checkpoints, no corrections**, is the same session with no correction anywhere: before
the reflection pass (issue 26) it made no paid call at all and its finished work never
reached the Reflection Store; now each checkpoint and deep pass with at least
``REFLECT_REFLECT_MIN_TURNS`` person turns since the last one reads the condensed transcript
(≤ ``REFLECT_REFLECT_MAX_CHARS``).

Prints one row per mode (with how many of the corrections reached a prompt at all, the
prompt characters and the condensed-transcript characters) and the ratio checkpoints / per
capture.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
STUB = ROOT / "tests" / "stubs" / "claude"

CORRECTIONS = [
    "No, never use a bare except in module {k}; catch KeyError instead.",
    "Wrong: always run the migrations of service {k} with alembic upgrade head.",
    "Stop, don't mock the database in test_{k}.py; use a real SQLite file.",
    "That's incorrect: the cache key of endpoint {k} must include the tenant id.",
]


class Session:
    """A Claude Code transcript written the way the harness appends it."""

    def __init__(self, path: Path) -> None:
        self.path, self.n = path, 0
        path.write_text("", encoding="utf-8")

    def tools(self, turn: int) -> None:
        """The turn's tool calls: a Read (long output, dropped) and a test run (kept)."""
        read = {"type": "tool_use", "id": f"r{turn}", "name": "Read"}
        read["input"] = {"file_path": f"src/m{turn}.py"}
        self.say("assistant", [read])
        body = f"def load_{turn}():\n    return {turn}\n" * 200
        self.say("user", [{"type": "tool_result", "tool_use_id": f"r{turn}", "content": body}])
        run = {"type": "tool_use", "id": f"b{turn}", "name": "Bash"}
        run["input"] = {"command": f"pytest -q tests/test_m{turn}.py"}
        self.say("assistant", [run])
        out = f"...\n3 passed in 0.{turn % 10}2s"
        self.say("user", [{"type": "tool_result", "tool_use_id": f"b{turn}", "content": out}])

    def say(self, role: str, text: str | list, tokens: int | None = None) -> None:
        """Append one record (an assistant record with its usage)."""
        self.n += 1
        content = text if role == "user" or isinstance(text, list) else None
        message: dict = {
            "role": role,
            "content": content if content is not None else [{"type": "text", "text": text}],
        }
        if tokens is not None:
            message["usage"] = {
                "input_tokens": 6,
                "cache_creation_input_tokens": 500,
                "cache_read_input_tokens": max(0, tokens - 506),
                "output_tokens": 120,
            }
        rec = {
            "type": role,
            "uuid": f"u{self.n}",
            "sessionId": "bench-session",
            "timestamp": f"2026-11-01T{10 + self.n // 3600:02d}:{self.n // 60 % 60:02d}:"
            f"{self.n % 60:02d}Z",
            "message": message,
        }
        with self.path.open("a", encoding="utf-8") as fh:
            fh.write(json.dumps(rec) + "\n")


def fill_tokens(turn: int, turns: int) -> tuple[int, bool]:
    """The context after ``turn`` (1-based) and whether Claude Code compacts before it."""
    compact_at = int(turns * 0.8)
    if turn <= compact_at:
        return int(200_000 * (0.04 + 0.86 * turn / compact_at)), False
    grown = (turn - compact_at) / max(1, turns - compact_at)
    return int(200_000 * (0.20 + 0.30 * grown)), turn == compact_at + 1


def run(mode: str, turns: int, every: int, root: Path) -> dict:
    """One session in one mode; returns calls, calls per model, tokens sent, wall time.

    ``every`` 0: no correction anywhere (the clean session).
    """
    home = root / mode
    env = {k: v for k, v in os.environ.items() if not k.startswith(("REFLECT_", "STUB_CLAUDE"))}
    env.update(
        REFLECT_HOME=str(home / "home"),
        GLOBAL_LEARNINGS_PATH=str(home / "kb"),
        REFLECT_DRAIN_CLAUDE_BIN=str(STUB),
        REFLECT_WRITER_BACKEND="claude",
        REFLECT_CAPTURE_SETTLE_SEC="0",
        REFLECT_INDEX_VECTORS="0",
        REFLECT_DRAIN_DAILY_MAX="100000",
        REFLECT_DRAIN_MAX="100000",
        REFLECT_DEEP_MODEL="opus",
        STUB_CLAUDE_MODE="ok",
        STUB_CLAUDE_LOG=str(home / "calls.jsonl"),
        STUB_CLAUDE_PROMPTS=str(home / "prompts"),
        HF_HUB_OFFLINE="1",
    )
    if mode == "per-capture":
        env["REFLECT_CHECKPOINTS"] = "off"
    os.environ.clear()
    os.environ.update(env)  # the stub inherits STUB_CLAUDE_* from this process

    from huey.storage import SqliteStorage

    from reflect_jobs import pipeline
    from reflect_jobs.config import load_settings
    from reflect_jobs.limits import Caps

    settings = load_settings(env)
    settings.home.mkdir(parents=True, exist_ok=True)
    scheduled: list[tuple[str, str]] = []

    class Dispatcher:
        def schedule(self, stage: str, job_id: str, eta: object = None) -> None:
            scheduled.append((stage, job_id))

        def kb_changed(self) -> None:
            pass

    rt = pipeline.Runtime(
        settings=settings,
        dispatcher=Dispatcher(),
        caps=Caps(
            SqliteStorage("reflect", filename=str(home / "q.db")),
            daily_max=100_000,
            run_max=100_000,
            window_sec=600,
        ),
        worker="bench",
    )
    runners = {
        "prepare": pipeline.run_prepare,
        "write": pipeline.run_write,
        "add": pipeline.run_add,
    }

    def capture(event: str) -> None:
        scheduled.clear()
        pipeline.run_capture(rt, "claude", "bench-session", str(session.path), event, 0)
        while scheduled:
            stage, jid = scheduled.pop(0)
            if stage in runners:
                runners[stage](rt, jid)

    session = Session(home / "bench-session.jsonl")
    said: list[str] = []
    started = time.perf_counter()
    for turn in range(1, turns + 1):
        tokens, compacts = fill_tokens(turn, turns)
        if compacts:
            capture("PreCompact")
        if every and turn % every == 0:
            said.append(CORRECTIONS[turn % len(CORRECTIONS)].format(k=turn))
            session.say("user", said[-1])
        else:
            session.say("user", f"Open module m{turn}.py and list its functions.")
        session.tools(turn)
        session.say("assistant", f"m{turn}.py defines load_{turn}, save_{turn} and main.", tokens)
        capture("Stop")
    capture("SessionEnd")
    wall = time.perf_counter() - started
    calls = [json.loads(x) for x in (home / "calls.jsonl").read_text().splitlines()]
    models = Counter(c["argv"][c["argv"].index("--model") + 1] for c in calls)
    texts = [p.read_text() for p in (home / "prompts").glob("*.txt")]
    prompts = "\n".join(texts)
    from reflect_jobs.cascade.condense import SECTION_TITLE

    condensed = sum(len(_section(t, SECTION_TITLE)) for t in texts)
    return {
        "chars": sum(c["prompt_chars"] for c in calls),
        "condensed": condensed,
        "reflection_only": sum("No correction or approval was found" in t for t in texts),
        "covered": sum(c in prompts for c in said),
        "corrections": len(said),
        "calls": len(calls),
        "models": dict(models),
        "tokens": sum(c["prompt_chars"] for c in calls) // 4,
        "captures": turns + 2,
        "wall": wall,
    }


def _section(prompt: str, title: str) -> str:
    """The condensed-transcript section of a prompt ("" when it has none)."""
    _, sep, tail = prompt.partition(title)
    return tail.split("\n## Reflection items (candidates)", 1)[0] if sep else ""


def main() -> int:
    """Run both modes and print the table."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--turns", type=int, default=200)
    ap.add_argument("--every", type=int, default=4, help="a correction every N turns")
    args = ap.parse_args()
    import logging

    import structlog

    # The stage runners log every transition; the table is what this script prints.
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.ERROR))
    saved = dict(os.environ)
    results = {}
    with tempfile.TemporaryDirectory(prefix="rj-bench-cp-") as tmp:
        try:
            for mode in ("per-capture", "checkpoints"):
                results[mode] = run(mode, args.turns, args.every, Path(tmp))
            results["clean"] = run("checkpoints", args.turns, 0, Path(tmp) / "clean")
        finally:
            os.environ.clear()
            os.environ.update(saved)
    print(f"{args.turns} turns, a Stop after each, a correction every {args.every} turns")
    print(
        f"{'mode':<12} {'captures':>8} {'paid calls':>10} {'chars sent':>10} {'condensed':>9} "
        f"{'tokens sent':>11} {'corrections sent':>16}  models  wall"
    )
    for mode, r in results.items():
        sent = f"{r['covered']}/{r['corrections']}"
        print(
            f"{mode:<12} {r['captures']:>8} {r['calls']:>10} {r['chars']:>10,} "
            f"{r['condensed']:>9,} {r['tokens']:>11,} {sent:>16}  {r['models']}  "
            f"{r['wall']:.1f}s" + (f"  reflection-only {r['reflection_only']}")
        )
    print("clean = checkpoints, the same session with no correction anywhere")
    base, cp = results["per-capture"], results["checkpoints"]
    print(
        f"checkpoints / per capture: calls {cp['calls'] / max(1, base['calls']):.3f}, "
        f"tokens {cp['tokens'] / max(1, base['tokens']):.3f}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
