"""Which backend a pass calls: the configured writer, built with the settings it needs.

Above every backend module (``backends.py`` for the Claude CLI and the heuristic writer,
``api_backends.py`` for openai, anthropic and codex): the backends import nothing of each
other's selection, so the writer package has no import cycle (it had a 7-file one while
``backends.py`` both chose the API writers and was imported by them).
"""

from __future__ import annotations

from typing import Any

from reflect_jobs.writer.backends import Backend, ClaudeCliBackend, HeuristicBackend

__all__ = ["make_backend", "timeout_for"]


def timeout_for(drain_timeout: int) -> int:
    """Model-call timeout: TIMEOUT-90 when the cap is above 150 s, else 60 s (SPEC-drain §4.2).

    Args:
        drain_timeout: The stage timeout in seconds (``REFLECT_DRAIN_TIMEOUT``).

    Returns:
        The model call's timeout in seconds (60 even when the stage timeout is shorter).
    """
    return drain_timeout - 90 if drain_timeout > 150 else 60


def make_backend(
    name: str,
    *,
    claude_bin: str,
    model: str,
    cwd: str,
    drain_timeout: int,
    options: dict[str, Any] | None = None,
) -> Backend:
    """Build the configured backend: one tool-free turn (the extract writer, ARCHITECTURE §6).

    Args:
        name: ``claude``, ``heuristic``, ``openai``, ``anthropic`` or ``codex``
            (``Settings.resolved_writer_backend()``, never ``auto``).
        claude_bin: The Claude CLI, a name or a path.
        model: The ``--model`` value.
        cwd: The writer's working directory.
        drain_timeout: The stage timeout in seconds; the call gets :func:`timeout_for` it.
        options: For ``openai``/``anthropic``/``codex``: ``api_backends.writer_options``
            of the settings (base URL, key, binary).

    Returns:
        A ``HeuristicBackend`` (every other argument ignored), a configured
        ``ClaudeCliBackend`` (``--max-turns 1``), or an API backend from
        ``api_backends.make_api_backend``.

    Raises:
        ValueError: An unknown ``name``.
        BackendMissing: An API backend without its SDK installed.
    """
    if name == "heuristic":
        return HeuristicBackend()
    if name == "claude":
        return ClaudeCliBackend(claude_bin, model, cwd, timeout_for(drain_timeout), max_turns=1)
    if name in ("openai", "anthropic", "codex"):
        from reflect_jobs.writer.api_backends import make_api_backend  # SDKs load lazily

        return make_api_backend(
            name,
            model=model,
            cwd=cwd,
            timeout_sec=timeout_for(drain_timeout),
            options=options or {},
        )
    raise ValueError(
        f"unknown backend: {name!r} (expected claude, heuristic, openai, anthropic or codex)"
    )
