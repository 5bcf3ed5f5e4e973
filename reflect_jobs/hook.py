"""``reflect-jobs-hook {claude|codex|copilot}`` — the agent hook entry point.

Contract (DESIGN §9, SPEC-drain §1.1, §2.4): read the harness's hook JSON on stdin,
enqueue one ``capture`` task, print nothing, exit 0 — always. A malformed payload, a
missing transcript, a locked queue or any bug is written to ``$REFLECT_HOME/hook-errors.log``
and the agent's session goes on untouched.

The hook never reads the transcript (the original's Stop hook re-parsed it on every turn
and cost 50–180 ms) and imports nothing but the standard library: see ``fastqueue`` for
why not even Huey.
"""

from __future__ import annotations

import json
import os
import sys
import time

from reflect_jobs import fastqueue, harnesses
from reflect_jobs.envpaths import home_dir_str, hook_disabled, queue_url

CAPTURE_TASK = "reflect_jobs.tasks.capture"
MAX_STDIN_BYTES = 1 << 20


class HookInputError(ValueError):
    """The payload cannot become a capture (logged, never raised to the harness)."""


def first_present(payload: dict, *keys: str, default: object = None) -> object:
    """SPEC §2.4: the first key *present* wins (presence, not truthiness)."""
    for key in keys:
        if key in payload:
            return payload[key]
    return default


def parse_payload(raw: str, harness: str, event_arg: str | None = None) -> tuple[str, str, str]:
    """(session_id, transcript_path, event) from a hook payload, or HookInputError."""
    spec = harnesses.REGISTRY.get(harness)
    if spec is None:
        raise HookInputError(
            f"unknown harness {harness!r}; expected one of {', '.join(harnesses.NAMES)}"
        )
    keys = spec.payload
    try:
        payload = json.loads(raw) if raw.strip() else None
    except ValueError as exc:
        raise HookInputError(f"stdin is not JSON: {exc}") from None
    if not isinstance(payload, dict):
        raise HookInputError("stdin JSON is not an object")
    transcript = first_present(payload, *keys.transcript_path)
    if not isinstance(transcript, str) or not transcript.strip():
        raise HookInputError("payload has no transcript_path")
    session = first_present(payload, *keys.session_id, default="unknown")
    session_id = str(session) if session not in (None, "") else "unknown"
    event = event_arg or first_present(payload, *keys.event, default="unknown")
    path = os.path.expanduser(transcript.strip())
    if not os.path.isabs(path):
        cwd = first_present(payload, *keys.cwd, default=None)
        path = os.path.join(cwd if isinstance(cwd, str) and cwd else os.getcwd(), path)
    if not os.path.isfile(path):
        raise HookInputError(f"transcript not found: {path}")
    return session_id, path, str(event)[:32]


ERROR_LOG_MAX_BYTES = 1 << 20


def log_error(message: str) -> None:
    """One JSON line per failed hook; one rotated generation at 1 MiB, so a hook that fails
    on every agent turn for months cannot fill the disk."""
    try:
        home = home_dir_str()
        os.makedirs(home, exist_ok=True)
        path = os.path.join(home, "hook-errors.log")
        try:
            if os.stat(path).st_size > ERROR_LOG_MAX_BYTES:
                os.replace(path, path + ".1")
        except FileNotFoundError:
            pass
        line = json.dumps(
            {"ts": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "error": message}
        )
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(line[:4000] + "\n")
    except Exception:  # noqa: BLE001 - the hook must never fail the session
        pass


def run(argv: list[str], stdin_text: str) -> None:
    """Parse and enqueue; raises on any problem (``main`` turns that into a log line)."""
    if hook_disabled():
        return
    harness = argv[0] if argv else ""
    event_arg = None
    if "--event" in argv:
        idx = argv.index("--event")
        event_arg = argv[idx + 1] if idx + 1 < len(argv) else None
    session_id, path, event = parse_payload(stdin_text, harness, event_arg)
    url = queue_url()
    if url.startswith("sqlite:///"):
        os.makedirs(os.path.dirname(url[len("sqlite:///") :]) or ".", exist_ok=True)
    fastqueue.enqueue(url, CAPTURE_TASK, (harness, session_id, path, event, time.time()))


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    try:
        data = sys.stdin.buffer.read(MAX_STDIN_BYTES) if not sys.stdin.isatty() else b""
        run(argv, data.decode("utf-8", errors="replace"))
    except Exception as exc:  # noqa: BLE001 - never fail the agent session
        log_error(f"{type(exc).__name__}: {exc}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
