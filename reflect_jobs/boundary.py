"""The data boundary: ask the user's own command whether a session may be read at all.

``REFLECT_BOUNDARY_CMD`` names a command (split like a shell line, never run through a shell)
that answers "is this session restricted?" *before* anything reads the transcript or calls a
model (ARCHITECTURE §2.2). It gets ``{"harness", "session_id", "transcript_path", "cwd"}`` as
JSON on stdin; exit 0 means allowed, exit 1 restricted. Anything else — a command that cannot
be started, exits with another status, is killed by a signal, or runs longer than
``REFLECT_BOUNDARY_TIMEOUT_SEC`` (default 5 s) — counts as restricted: the boundary fails
closed, because a session wrongly let through cannot be unread.

The command runs under :func:`reflect_jobs.children.run`, like the model CLIs: its own
process group, killed whole on a timeout (a wrapper script that started children cannot
leave them behind holding the transcript open), tied to its worker, and killed when the
consumer stops — then the check raises ``ChildCancelled`` instead of answering, so a stop
never reads as "restricted" and the job is simply handed back.

``cwd`` is decided without reading the transcript: the ledger's job row keeps the harness, the
session id and the transcript path but not the hook payload's working directory, so ``cwd`` is
the directory the transcript file is in. A command that needs the session's own working
directory may read the transcript it is given (it is the user's command, not our reader).
"""

from __future__ import annotations

import json
import os
import shlex
from dataclasses import dataclass

from reflect_jobs import children

#: The outcome of a job whose session the boundary command restricted (free, terminal).
RESTRICTED_OUTCOME = "skip_restricted"


@dataclass(frozen=True)
class Verdict:
    """What the boundary command said about one session.

    Attributes:
        allowed: True only when the command ran and exited 0.
        reason: A short, path-free reason for the job's detail (``exit 1``, ``timeout``…).
    """

    allowed: bool
    reason: str


def request(
    harness: str, session_id: str, transcript_path: str, cwd: str | None = None
) -> dict[str, str]:
    """The JSON object the boundary command receives on stdin.

    Args:
        harness: The job's harness (``claude``, ``codex``, ``copilot``…).
        session_id: The harness's session id.
        transcript_path: The transcript file (not opened here).
        cwd: The session's working directory as the hook payload gave it (the job's
            ``cwd``); None for a capture without one (``enqueue``, ``backfill``, a payload
            without ``cwd``).

    Returns:
        ``{"harness", "session_id", "transcript_path", "cwd"}``; without a payload ``cwd``
        it is the transcript's directory, the only one known without reading the transcript.
    """
    return {
        "harness": harness,
        "session_id": session_id,
        "transcript_path": transcript_path,
        "cwd": cwd or os.path.dirname(os.path.abspath(transcript_path)),
    }


#: Our own secrets the boundary command has no use for (the writer's API key).
_WITHHELD = ("REFLECT_OPENAI_API_KEY",)


def command_env(environ: dict[str, str] | None = None) -> dict[str, str]:
    """The boundary command's environment: ours, as a drain child, without our API key.

    ``REFLECT_DRAIN_CHILD=1`` is the child guard (ARCHITECTURE §2.2): an agent the command
    might start to decide does not capture its own session back into the queue.

    Args:
        environ: The environment to start from; ``None`` means ``os.environ``.

    Returns:
        A new mapping.
    """
    env = {k: v for k, v in (os.environ if environ is None else environ).items()}
    for name in _WITHHELD:
        env.pop(name, None)
    env["REFLECT_DRAIN_CHILD"] = "1"
    return env


def check(command: str, payload: dict[str, str], *, timeout_sec: float = 5.0) -> Verdict:
    """Run the boundary command on one session and read its verdict, failing closed.

    Args:
        command: ``REFLECT_BOUNDARY_CMD`` (a program and its arguments, split with
            :func:`shlex.split`; no shell).
        payload: The stdin object (:func:`request`).
        timeout_sec: How long the command may take before it counts as restricted.

    Returns:
        ``Verdict(True, "exit 0")`` only for a command that exited 0 in time; otherwise a
        restricted verdict whose reason says why (``exit 1``, ``exit 3``, ``timeout``,
        ``not runnable``, ``killed by signal 9``, ``empty command``).

    Raises:
        ChildCancelled: The consumer is stopping and killed the command mid-check.
    """
    try:
        argv = shlex.split(command)
    except ValueError:
        return Verdict(False, "unparsable command")
    if not argv:
        return Verdict(False, "empty command")
    try:
        done = children.run(
            argv,
            input=json.dumps(payload).encode(),
            timeout=timeout_sec,
            env=command_env(),
            capture=False,
        )
    except OSError as exc:
        return Verdict(False, f"not runnable ({type(exc).__name__})")
    if done.timed_out:
        return Verdict(False, f"timeout after {timeout_sec:g}s")
    code = done.returncode
    if code == 0:
        return Verdict(True, "exit 0")
    if code is not None and code < 0:
        return Verdict(False, f"killed by signal {-code}")
    return Verdict(False, f"exit {code}")
