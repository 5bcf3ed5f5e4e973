"""``reflect-jobs-hook {claude|codex|copilot} [--event NAME]`` — the agent hook entry point.

Contract (ARCHITECTURE §9, docs/HARNESSES.md, SPEC-drain §1.1, §2.4): read the harness's hook JSON on stdin,
write the capture to the spool (``spool.py``) and enqueue one ``capture`` task, print
nothing, exit 0 — always, well within the harnesses' 1 s hook budget. A malformed payload,
a missing transcript, a queue that is down or locked (the capture stays spooled) or any
bug is written to ``$REFLECT_HOME/hook-errors.log`` and the agent's session goes on
untouched.

The hook never reads the transcript (the original's Stop hook re-parsed it on every turn
and cost 50–180 ms) and imports nothing but the standard library: see ``fastqueue`` for
why not even Huey.
"""

from __future__ import annotations

import json
import os
import sys
import time

from reflect_jobs import fastqueue, harnesses, spool, userconfig
from reflect_jobs.envpaths import home_dir_str, hook_disabled, queue_url
from reflect_jobs.hook_log import log_error
from reflect_jobs.perms import DIR_MODE, private_umask
from reflect_jobs.recall import hook as recall_hook

CAPTURE_TASK = "reflect_jobs.tasks.capture"
MAX_STDIN_BYTES = 1 << 20
# The whole queue push (busy wait on a locked SQLite file, Redis connect and replies):
# Codex kills a hook after 1 s and Claude Code after 1.5 s; past this the spool holds it.
QUEUE_BUDGET_SEC = 0.25
# Huey re-runs a capture that raised (a ledger that is down) this often, this far apart.
CAPTURE_RETRIES = 3
CAPTURE_RETRY_DELAY_SEC = 30


class HookInputError(ValueError):
    """The payload cannot become a capture (logged, never raised to the harness)."""


def _given(value: object) -> bool:
    """Whether a payload value counts: not ``null``, not an empty or blank string."""
    return value is not None and not (isinstance(value, str) and not value.strip())


def first_given(payload: dict, *keys: str, default: object = None) -> object:
    """The value of the first key that holds one; ``null`` and ``""`` count as absent.

    The original read the first key *present* (SPEC-drain §2.4), so Codex's
    ``"agent_transcript_path": null`` hid the ``transcript_path`` after it; a present but
    empty value is not information, so it no longer wins.

    Args:
        payload: The decoded hook JSON object.
        *keys: Candidate keys, most preferred first (harnesses spell them snake or camel).
        default: What to return when no key holds a value.

    Returns:
        ``payload[key]`` for the first key whose value is neither None nor a blank string,
        else ``default``.
    """
    for key in keys:
        if _given(payload.get(key)):
            return payload[key]
    return default


def parse_payload(
    raw: str, harness: str, event_arg: str | None = None, environ: dict[str, str] | None = None
) -> tuple[str, str, str, str | None] | None:
    """(session_id, transcript_path, event, cwd) from a hook payload; None if no capture.

    Which keys are read comes from the harness's registry entry
    (:attr:`reflect_jobs.harnesses.Harness.payload`), the first key holding a value winning.
    Not a capture (None, nothing logged): an event the harness record ignores (a subagent's
    start or stop), an event of another role (a ``SessionStart`` that prints context), and a
    payload fired inside a subagent — the session's job must keep reading the parent's
    transcript. A payload without a transcript path (Copilot's ``sessionEnd``) gets the file
    the session id names under the harness home (:func:`harnesses.transcript_candidates`).
    The file must exist now, but it is not opened: the capture task reads it later.

    Args:
        raw: The hook's stdin text, a JSON object; blank text counts as no payload.
        harness: A registry name (``claude``, ``codex`` or ``copilot``; the hook's first
            argument).
        event_arg: The ``--event`` value, which overrides the payload's event name; ``None``
            or ``""`` means read it from the payload.
        environ: The environment that locates the harness home (default ``os.environ``).

    Returns:
        ``(session_id, transcript_path, event, cwd)``: the session id as a string
        (``"unknown"`` when none); the transcript path with ``~`` expanded and a relative
        path joined to the payload's ``cwd`` (else the process's working directory); the
        event name cut to 32 characters (``"unknown"`` when none); the payload's ``cwd``
        (None when it has none that is a non-empty string: the data boundary is told it).
        None when the payload is not a capture.

    Raises:
        HookInputError: Unknown harness, stdin not a JSON object, no transcript path and
            none derivable, or no file at that path.
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
    event = str(event_arg or first_given(payload, *keys.event, default="unknown"))[:32]
    ours = spec.event(event)
    if event in spec.ignored_events or (ours is not None and ours.role != "capture"):
        return None
    if first_given(payload, *keys.subagent) is not None:
        return None
    session = first_given(payload, *keys.session_id, default="unknown")
    session_id = str(session)
    transcript = first_given(payload, *keys.transcript_path)
    if transcript is None:
        try:
            candidates = harnesses.transcript_candidates(spec, session_id, environ)
        except ValueError as exc:
            raise HookInputError(f"payload has no transcript_path; {exc}") from None
        if not candidates:
            raise HookInputError("payload has no transcript_path")
        path = next((c for c in candidates if os.path.isfile(c)), candidates[0])
    elif not isinstance(transcript, str):
        raise HookInputError(f"payload's transcript_path is a JSON {type(transcript).__name__}")
    else:
        path = os.path.expanduser(transcript.strip())
    cwd = first_given(payload, *keys.cwd)
    cwd = cwd if isinstance(cwd, str) and cwd.strip() else None
    if not os.path.isabs(path):
        path = os.path.join(cwd or os.getcwd(), path)
    if not os.path.isfile(path):
        raise HookInputError(f"transcript not found: {path}")
    return session_id, path, event, cwd


class CaptureSpooled(RuntimeError):
    """The queue could not take the capture in time; it waits in the spool (logged)."""


def run(argv: list[str], stdin_text: str) -> None:
    """Parse, spool, enqueue; raises on any problem (``main`` turns that into a log line).

    A no-op when ``REFLECT_DRAIN_CHILD`` (our own writer's child session) or
    ``REFLECT_DISABLED`` is truthy (:func:`reflect_jobs.envpaths.hook_disabled`), and for a
    payload that is not a capture (:func:`parse_payload` returns None). Otherwise
    the capture is first written to the spool (:func:`reflect_jobs.spool.append`), so it is
    durable from here on, then ``reflect_jobs.tasks.capture(harness, session_id,
    transcript_path, event, hook_ts, spool_id=..., cwd=...)`` is pushed onto ``$REFLECT_QUEUE_URL``
    within :data:`QUEUE_BUDGET_SEC`, with ``hook_ts`` the current Unix time, creating the
    SQLite queue's directory if needed. A queue that is down or locked past the budget
    leaves the capture in the spool, where the consumer's recovery finds it
    (ARCHITECTURE §2.3): harnesses kill a hook after 1–1.5 s, so waiting longer loses it.

    Args:
        argv: The hook's arguments: the harness name first, optionally ``--event NAME``.
        stdin_text: The payload read from stdin, decoded (may be empty).

    Raises:
        HookInputError: The payload cannot become a capture (see :func:`parse_payload`).
        CaptureSpooled: The queue push failed; the capture is safe in the spool.
        ValueError: The queue URL's scheme is not supported by ``fastqueue`` (and the
            spool could not be written either).
        OSError: The spool could not be written (the message was still pushed), or both
            the spool and the queue failed.
        sqlite3.Error: Both the spool and the SQLite queue failed.
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
    capture = parse_payload(stdin_text, harness, event_arg)
    if capture is None:
        return
    session_id, path, event, cwd = capture
    hook_ts = time.time()
    spool_id: str | None = None
    spool_error: OSError | None = None
    try:
        spool_id = spool.append(
            home_dir_str(),
            harness=harness,
            session_id=session_id,
            transcript_path=path,
            event=event,
            hook_ts=hook_ts,
            cwd=cwd,
        )
    except OSError as exc:
        spool_error = exc
    url = queue_url()
    try:
        if url.startswith("sqlite:///"):
            os.makedirs(
                os.path.dirname(url[len("sqlite:///") :]) or ".", mode=DIR_MODE, exist_ok=True
            )
        fastqueue.enqueue(
            url,
            CAPTURE_TASK,
            (harness, session_id, path, event, hook_ts),
            {
                **({"spool_id": spool_id} if spool_id else {}),
                **({"cwd": cwd} if cwd else {}),
            }
            or None,
            timeout=QUEUE_BUDGET_SEC,
            retries=CAPTURE_RETRIES,
            retry_delay=CAPTURE_RETRY_DELAY_SEC,
        )
    except Exception as exc:
        if spool_id is None:
            raise
        raise CaptureSpooled(
            f"queue {redact_url(url)} unavailable, capture spooled as {spool_id}: "
            f"{type(exc).__name__}: {exc}"
        ) from None
    if spool_error is not None:
        raise spool_error


def redact_url(url: str) -> str:
    """``url`` with any password replaced by ``***``, for the hook's error log.

    Args:
        url: A queue URL.

    Returns:
        The URL, its ``user:password@`` part reduced to ``user:***@``.
    """
    scheme, sep, rest = url.partition("://")
    creds, at, hostpart = rest.rpartition("@")
    if not sep or not at or ":" not in creds:
        return url
    return f"{scheme}://{creds.split(':', 1)[0]}:***@{hostpart}"


def main(argv: list[str] | None = None) -> int:
    """The ``reflect-jobs-hook`` console script: run the hook, log any failure, return 0.

    Reads at most ``MAX_STDIN_BYTES`` (1 MiB) of stdin, nothing when stdin is a TTY, and
    decodes it as UTF-8 with replacement characters; every exception becomes one line of
    ``hook-errors.log`` (see :func:`log_error`). Runs under umask 077 (restored on return),
    so everything the hook creates is private.

    Args:
        argv: The arguments after the program name; ``None`` means ``sys.argv[1:]``.

    Returns:
        0, always: a hook failure must never fail the agent's session.
    """
    argv = sys.argv[1:] if argv is None else argv
    with private_umask():  # the queue, its -wal/-shm, the log: 0600 in a 0700 home
        try:
            data = sys.stdin.buffer.read(MAX_STDIN_BYTES) if not sys.stdin.isatty() else b""
            run(argv, data.decode("utf-8", errors="replace"))
        except Exception as exc:  # noqa: BLE001 - never fail the agent session
            log_error(f"{type(exc).__name__}: {exc}")
        try:
            # A config file that is not TOML or names an unknown key: the defaults were
            # used; say so where `status`, `errors` and `doctor` count hook problems.
            for problem in userconfig.load().problems:
                log_error(f"config: {problem}")
        except Exception:  # noqa: BLE001 - never fail the agent session
            pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
