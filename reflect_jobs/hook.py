"""``reflect-jobs-hook {claude|codex|copilot}`` — the agent hook entry point.

Contract (ARCHITECTURE §9, SPEC-drain §1.1, §2.4): read the harness's hook JSON on stdin,
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
from reflect_jobs.recall import hook as recall_hook

CAPTURE_TASK = "reflect_jobs.tasks.capture"
MAX_STDIN_BYTES = 1 << 20


class HookInputError(ValueError):
    """The payload cannot become a capture (logged, never raised to the harness)."""


def first_present(payload: dict, *keys: str, default: object = None) -> object:
    """SPEC-drain §2.4: the first key *present* wins (presence, not truthiness).

    A key holding ``""`` or ``None`` still beats a later key.

    Args:
        payload: The decoded hook JSON object.
        *keys: Candidate keys, most preferred first (harnesses spell them snake or camel).
        default: What to return when none of ``keys`` is present.

    Returns:
        ``payload[key]`` for the first present key, else ``default``.
    """
    for key in keys:
        if key in payload:
            return payload[key]
    return default


def parse_payload(raw: str, harness: str, event_arg: str | None = None) -> tuple[str, str, str]:
    """(session_id, transcript_path, event) from a hook payload, or HookInputError.

    Which keys are read comes from the harness's registry entry
    (:attr:`reflect_jobs.harnesses.Harness.payload`): the first *present* key wins for the
    transcript path, the session id, the event name and the working directory. The file
    must exist now, but it is not opened: the capture task reads it later.

    Args:
        raw: The hook's stdin text, a JSON object; blank text counts as no payload.
        harness: A registry name (``claude``, ``codex`` or ``copilot``; the hook's first
            argument).
        event_arg: The ``--event`` value, which overrides the payload's event name; ``None``
            or ``""`` means read it from the payload.

    Returns:
        ``(session_id, transcript_path, event)``: the session id as a string (``"unknown"``
        when absent or empty); the transcript path with ``~`` expanded and a relative path
        joined to the payload's ``cwd`` (else the process's working directory); the event
        name cut to 32 characters (``"unknown"`` when absent).

    Raises:
        HookInputError: Unknown harness, stdin not a JSON object, no transcript path, or no
            file at that path.
    """
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
    """Append one JSON line ``{"ts", "error"}`` to ``$REFLECT_HOME/hook-errors.log``.

    One JSON line per failed hook; one rotated generation (``hook-errors.log.1``) once the
    log passes ``ERROR_LOG_MAX_BYTES`` (1 MiB), so a hook that fails on every agent turn for
    months cannot fill the disk. Never raises: a log that cannot be written (read-only home,
    full disk) is given up on, because the hook must never fail the agent's session.

    Args:
        message: What went wrong, usually ``"<ExceptionType>: <message>"``. The written line
            is cut at 4000 characters.
    """
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
    """Parse and enqueue; raises on any problem (``main`` turns that into a log line).

    A no-op when ``REFLECT_DRAIN_CHILD`` (our own writer's child session) or
    ``REFLECT_DISABLED`` is truthy (:func:`reflect_jobs.envpaths.hook_disabled`). Otherwise
    enqueues ``reflect_jobs.tasks.capture(harness, session_id, transcript_path, event,
    hook_ts)`` on ``$REFLECT_QUEUE_URL``, with ``hook_ts`` the current Unix time, creating the
    SQLite queue's directory if needed.

    Args:
        argv: The hook's arguments: the harness name first, optionally ``--event NAME``.
        stdin_text: The payload read from stdin, decoded (may be empty).

    Raises:
        HookInputError: The payload cannot become a capture (see :func:`parse_payload`).
        ValueError: The queue URL's scheme is not supported by ``fastqueue``.
        OSError: The queue directory cannot be created or the Redis push failed.
        sqlite3.Error: The SQLite queue could not be written (e.g. locked past the timeout).
    """
    if hook_disabled():
        return
    if recall_hook.handle(argv, stdin_text):
        return  # SessionStart / UserPromptSubmit: recall context, no capture (ARCHITECTURE §13)
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
    """The ``reflect-jobs-hook`` console script: run the hook, log any failure, return 0.

    Reads at most ``MAX_STDIN_BYTES`` (1 MiB) of stdin, nothing when stdin is a TTY, and
    decodes it as UTF-8 with replacement characters; every exception becomes one line of
    ``hook-errors.log`` (see :func:`log_error`).

    Args:
        argv: The arguments after the program name; ``None`` means ``sys.argv[1:]``.

    Returns:
        0, always: a hook failure must never fail the agent's session.
    """
    argv = sys.argv[1:] if argv is None else argv
    try:
        data = sys.stdin.buffer.read(MAX_STDIN_BYTES) if not sys.stdin.isatty() else b""
        run(argv, data.decode("utf-8", errors="replace"))
    except Exception as exc:  # noqa: BLE001 - never fail the agent session
        log_error(f"{type(exc).__name__}: {exc}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
