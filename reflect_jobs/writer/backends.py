"""Model backends: one ``call(prompt) -> ModelResult`` per way of reaching a model.

``ClaudeCliBackend`` runs the Claude Code CLI exactly as ARCHITECTURE §5 says. Differences from the
original, all deliberate (SPEC-drain §4.2, §10 B11):

* the prompt goes on STDIN (argv hit E2BIG on multi-byte slices);
* no ``--permission-mode bypassPermissions``: the call is tool-free (``--allowedTools ""``);
* cwd is really ``REFLECT_DRAIN_CWD`` (the original silently ran in ``$HOME``);
* the CLI runs under :func:`reflect_jobs.children.run`: its own process group, killed whole
  at the timeout (the CLI spawns helpers that would otherwise keep the pipes open and the
  money flowing; what stdout there was is kept), and it never outlives its worker
  (parent-death signal or watchdog, the live registry a stopping consumer kills). Before, a
  SIGKILLed worker left the CLI running in its own session: it finished and billed while
  the restarted job called again;
* nothing raises except ``BackendMissing``: any output becomes a ``ModelResult`` so the
  telemetry reaches the ledger before anything parses it.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from reflect_jobs import children
from reflect_jobs.markers import CHILD_ENV
from reflect_jobs.writer.heuristic import heuristic_actions
from reflect_jobs.writer.prompt import slice_of
from reflect_jobs.writer.result import (
    TIMEOUT_EXIT_CODE,
    BackendMissing,
    ModelResult,
    coerce_usage,
    result_from_cli,
)


@runtime_checkable
class Backend(Protocol):
    """Anything that turns a prompt into a ``ModelResult``.

    ``name`` labels the attempt in the ledger. ``call(prompt)`` returns a ``ModelResult`` for
    whatever happened (errors and timeouts included) and raises only ``BackendMissing``.
    """

    @property
    def name(self) -> str:
        """The backend's label (a class attribute in every implementation)."""
        ...

    def call(self, prompt: str) -> ModelResult: ...


def resolve_binary(binary: str) -> str:
    """Absolute path of an executable, or ``BackendMissing`` (an install fault: halt, free).

    Args:
        binary: A name looked up on ``PATH``, or a path (anything containing ``os.sep``;
            ``~`` is expanded, a relative path is taken from the current directory).

    Returns:
        The executable's absolute path.

    Raises:
        BackendMissing: ``binary`` is empty, not found, or not an executable file.
    """
    if not binary:
        raise BackendMissing("no model binary configured")
    if os.sep in binary:
        path = os.path.abspath(os.path.expanduser(binary))
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return path
        raise BackendMissing(f"model binary not found or not executable: {binary}")
    found = shutil.which(binary)
    if not found:
        raise BackendMissing(f"model binary not on PATH: {binary}")
    return found


def _encode(prompt: str) -> bytes:
    """UTF-8; lone surrogates (from JSON ``\\ud800`` escapes in transcripts) become ``?``
    instead of crashing the call."""
    return prompt.encode("utf-8", errors="replace")


def _decode(data: bytes | None) -> str:
    return data.decode("utf-8", errors="replace") if data else ""


@dataclass(frozen=True)
class CliOutput:
    """What one run of a writer CLI printed (decoded) and how it ended."""

    stdout: str
    stderr: str
    #: The child's exit code; ``TIMEOUT_EXIT_CODE`` (124) after a timeout.
    exit_code: int | None
    timed_out: bool
    duration_ms: int


class CliWriter(Protocol):
    """What :func:`run_writer_cli` needs of a CLI writer (``ClaudeCliBackend``,
    ``CodexCliBackend``): the configured binary (a name on ``PATH`` or a path), its working
    directory, timeout and orphan guard (``"pdeathsig"``, ``"watchdog"`` or ``None`` for
    :func:`reflect_jobs.children.orphan_guard`), its command line for the resolved binary
    and the child's environment."""

    binary: str
    cwd: str
    timeout_sec: float
    guard: str | None

    def argv(self, binary: str | None = None) -> list[str]: ...

    def env(self) -> dict[str, str]: ...


def run_writer_cli(writer: CliWriter, prompt: str) -> CliOutput:
    """Run a writer CLI (``claude -p``, ``codex exec``) once with ``prompt`` on stdin.

    The one way the CLI writers start their child: through :func:`reflect_jobs.children.run`
    (own process group, orphan guard, live registry, group kill on timeout), so the Claude
    and Codex writers cannot drift apart again (the Codex copy once had no orphan guard).

    Args:
        writer: The backend (its binary, command line, cwd, timeout, environment, guard).
        prompt: The full prompt; lone surrogates are sent as ``?``.

    Returns:
        What it printed, its exit code (``TIMEOUT_EXIT_CODE`` after a timeout; the output
        read before the kill is kept) and how long it ran.

    Raises:
        BackendMissing: The binary is missing or not executable, ``cwd`` does not exist, or
            the process cannot be started.
        ChildCancelled: :func:`reflect_jobs.children.kill_live_children` killed the child
            (this process is stopping).
    """
    resolved = resolve_binary(writer.binary)
    if not os.path.isdir(writer.cwd):
        raise BackendMissing(f"writer cwd does not exist: {writer.cwd}")
    started = time.monotonic()
    try:
        done = children.run(
            writer.argv(resolved),
            input=_encode(prompt),
            timeout=writer.timeout_sec,
            cwd=writer.cwd,
            env=writer.env(),
            guard=writer.guard,
        )
    except (FileNotFoundError, PermissionError, NotADirectoryError) as exc:
        raise BackendMissing(f"cannot start {resolved}: {exc}") from exc
    return CliOutput(
        stdout=_decode(done.stdout),
        stderr=_decode(done.stderr),
        exit_code=TIMEOUT_EXIT_CODE if done.timed_out else done.returncode,
        timed_out=done.timed_out,
        duration_ms=int((time.monotonic() - started) * 1000),
    )


class ClaudeCliBackend:
    """``claude -p --output-format json`` with the prompt on stdin (ARCHITECTURE §5).

    Args:
        binary: The ``claude`` executable, a name or a path (resolved at every call).
        model: The ``--model`` value, e.g. ``sonnet``.
        cwd: The call's working directory (``REFLECT_DRAIN_CWD``); must exist at call time.
        timeout_sec: Seconds before the whole process group is killed.
        max_turns: The ``--max-turns`` value: 1 for extract, more for the agentic writer.
        extra_env: Variables added to the inherited environment (keys and values made
            strings).
        guard: How the child is tied to this process (``"pdeathsig"`` or
            ``"watchdog"``); ``None`` picks :func:`reflect_jobs.children.orphan_guard`.
    """

    name = "claude"

    def __init__(
        self,
        binary: str,
        model: str,
        cwd: str,
        timeout_sec: float,
        max_turns: int = 1,
        extra_env: dict[str, Any] | None = None,
        guard: str | None = None,
    ) -> None:
        """Store the call's settings; nothing is checked until :meth:`call`."""
        self.guard = guard
        self.binary = binary
        self.model = model
        self.cwd = cwd
        self.timeout_sec = timeout_sec
        self.max_turns = max_turns
        self.extra_env = dict(extra_env or {})

    def argv(self, binary: str | None = None) -> list[str]:
        """The exact command line (no prompt: that goes on stdin).

        Args:
            binary: The executable to put first (the resolved path); ``None`` means
                ``self.binary`` as configured.

        Returns:
            The argv list: tool-free (``--allowedTools ""``), JSON output, the model and
            ``--max-turns``.
        """
        return [
            binary or self.binary,
            "-p",
            "--output-format",
            "json",
            "--model",
            self.model,
            "--allowedTools",
            "",
            "--max-turns",
            str(self.max_turns),
        ]

    def env(self) -> dict[str, str]:
        """Inherited env + extras + the child guard that makes our own hooks no-ops.

        Returns:
            A new dict: ``os.environ``, updated with ``extra_env``, then
            ``REFLECT_DRAIN_CHILD=1``.
        """
        env = dict(os.environ)
        env.update({str(k): str(v) for k, v in self.extra_env.items()})
        env[CHILD_ENV] = "1"
        return env

    def call(self, prompt: str) -> ModelResult:
        """Run the CLI once with ``prompt`` on stdin and wrap whatever came back.

        Args:
            prompt: The full prompt (``build_prompt``); lone surrogates are sent as ``?``.

        Returns:
            The ``ModelResult`` of ``result_from_cli``. After a timeout the exit code is
            ``TIMEOUT_EXIT_CODE`` (124), ``timed_out`` is set and the output read before
            the kill is kept (none if the pipes still were not closed 5 s after the kill).

        Raises:
            BackendMissing: The binary is missing or not executable, ``cwd`` does not
                exist, or the process cannot be started.
            ChildCancelled: :func:`reflect_jobs.children.kill_live_children` killed the
                child (this process is stopping).
        """
        out = run_writer_cli(self, prompt)
        return result_from_cli(
            out.stdout,
            out.stderr,
            backend=self.name,
            model=self.model,
            exit_code=out.exit_code,
            timed_out=out.timed_out,
            duration_ms=out.duration_ms,
        )


class HeuristicBackend:
    """No model at all: explicit corrections become low-confidence CREATEs (free, offline)."""

    name = "heuristic"
    model = "heuristic"

    def call(self, prompt: str) -> ModelResult:
        """Answer as the CLI would, from the slice part of ``prompt``, with no model at all.

        Args:
            prompt: A prompt from ``build_prompt`` (or bare slice text).

        Returns:
            A successful ``ModelResult`` (one turn, no tokens, no cost) whose text is the
            ``{"actions": [...]}`` of ``heuristic_actions`` and whose stdout is a matching
            CLI envelope.
        """
        started = time.monotonic()
        text = json.dumps({"actions": heuristic_actions(slice_of(prompt))}, ensure_ascii=False)
        envelope = {
            "type": "result",
            "subtype": "success",
            "is_error": False,
            "num_turns": 1,
            "result": text,
            "total_cost_usd": 0,
            "usage": coerce_usage(None),
        }
        return ModelResult(
            backend=self.name,
            model=self.model,
            text=text,
            raw_stdout=json.dumps(envelope, ensure_ascii=False),
            stderr="",
            exit_code=0,
            timed_out=False,
            num_turns=1,
            is_error=False,
            subtype="success",
            envelope_ok=True,
            duration_ms=int((time.monotonic() - started) * 1000),
        )
