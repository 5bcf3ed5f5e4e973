"""Per-prompt recall's latency when the worker is absent, slow, broken or well, vs a bare interpreter.

Run: .venv/bin/python bench/bench_recall_prompt.py [--runs N] [--notes N]

A context store of ``--notes`` learnings (default 2,000; ``bench_recall_hook.fill``) and a
repository checkout; ``reflect-jobs-hook claude`` on a UserPromptSubmit payload (a new
session id each run, so the told-set never silences it) with ``REFLECT_RECALL_ON_PROMPT=1``
and ``REFLECT_RECALL_WORKER_MS`` at its default (60), in five worker states:

* ``none`` — no socket file (no worker running);
* ``stale`` — a socket file nobody listens on (a worker killed);
* ``never`` — a listener that accepts and never answers (a wedged worker): the budget ends it;
* ``garbage`` — a listener answering a line that is not JSON (logged, lexical ranking);
* ``warm`` — a listener answering a valid ``recall_similar`` answer at once (the round trip
  a warm worker costs, without the model's own time).

Runs are interleaved with ``python -c pass`` of the same venv, so a load change on the shared
machine hits all alike: compare the ratios. The bound (issue 25) is ≤ 3× the bare
interpreter when the worker is slow or down.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]
BIN = Path(sys.executable).parent

from bench_recall_hook import fill  # noqa: E402

PROMPT = "the nightly job fails with database is locked when the web app writes to sqlite"


class Listener:
    """A unix socket at ``path`` that answers ``reply`` to each request, or holds it open."""

    def __init__(self, path: Path, reply: bytes | None) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(str(path))
        self.sock.listen(16)
        self.reply = reply
        self.held: list[socket.socket] = []
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            data = b""
            while not data.endswith(b"\n"):
                chunk = conn.recv(65536)
                if not chunk:
                    break
                data += chunk
            if self.reply is None:
                self.held.append(conn)
            else:
                conn.sendall(self.reply)
                conn.close()

    def close(self) -> None:
        self.sock.close()
        for c in self.held:
            c.close()


def timed(argv: list[str], stdin: bytes, env: dict[str, str]) -> float:
    t0 = time.perf_counter()
    subprocess.run(argv, input=stdin, env=env, check=True, stdout=subprocess.DEVNULL)
    return (time.perf_counter() - t0) * 1000


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=15)
    ap.add_argument("--notes", type=int, default=2000)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        repo = base / "r1"
        (repo / ".git").mkdir(parents=True)
        (repo / ".git" / "config").write_text(
            '[remote "origin"]\n\turl = git@github.com:acme/r1.git\n'
        )
        (repo / "pyproject.toml").write_text('[project]\nname = "r1"\ndependencies = ["flask"]\n')
        kb_root = base / "kb"
        fill(kb_root, args.notes)
        run_dir = base / "home" / "run"
        run_dir.mkdir(parents=True, mode=0o700)
        sock_path = run_dir / "model.sock"
        env = {
            # An installed package has its bytecode: let the first run write it, as an
            # install does (with PYTHONDONTWRITEBYTECODE every run would compile the hook).
            **{k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"},
            "REFLECT_HOME": str(base / "home"),
            "GLOBAL_LEARNINGS_PATH": str(kb_root),
            "REFLECT_RECALL_ON_PROMPT": "1",
        }
        hook = [str(BIN / "reflect-jobs-hook"), "claude"]
        bare = [sys.executable, "-c", "pass"]
        hits = json.dumps({"ok": True, "hits": [["lrn-x", 0.5]], "via": "worker"}).encode()
        states: dict[str, bytes | None | str] = {
            "none": "absent",
            "stale": "stale",
            "never": None,
            "garbage": b"garbage\n",
            "warm": hits + b"\n",
        }
        warm_up = {"hook_event_name": "UserPromptSubmit", "cwd": str(repo), "prompt": PROMPT}
        subprocess.run(hook, input=json.dumps(warm_up).encode(), env=env, check=True)
        times: dict[str, list[float]] = {"bare": [], **{k: [] for k in states}}
        told: dict[str, int] = {}
        n = 0
        for _ in range(args.runs):
            times["bare"].append(timed(bare, b"", env))
            for state, reply in states.items():
                sock_path.unlink(missing_ok=True)
                listener = None
                if state == "stale":
                    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                    s.bind(str(sock_path))
                    s.close()  # the file stays, nobody listens
                elif reply != "absent":
                    listener = Listener(sock_path, reply)  # type: ignore[arg-type]
                n += 1
                payload = json.dumps(
                    {
                        "hook_event_name": "UserPromptSubmit",
                        "cwd": str(repo),
                        "session_id": f"bench-{n}",
                        "prompt": PROMPT,
                    }
                ).encode()
                try:
                    times[state].append(timed(hook, payload, env))
                    out = subprocess.run(
                        hook,
                        input=payload.replace(b"bench-", b"check-"),
                        env=env,
                        capture_output=True,
                        check=True,
                    )
                    told[state] = out.stdout.count(b"- [")
                finally:
                    if listener is not None:
                        listener.close()
        med = {k: statistics.median(v) for k, v in times.items()}
        print(
            f"per-prompt recall at {args.notes} notes, {args.runs} runs, medians in ms "
            f"(ratio to the bare interpreter, learnings told)"
        )
        print(f"  bare interpreter   {med['bare']:7.1f}")
        for state in states:
            print(
                f"  worker {state:<10}  {med[state]:7.1f}  ({med[state] / med['bare']:.2f}x, "
                f"{told.get(state, 0)} told)"
            )


if __name__ == "__main__":
    main()
