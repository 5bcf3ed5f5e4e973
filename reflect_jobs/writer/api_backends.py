"""Selecting and configuring the openai, anthropic and codex writers.

Kept apart from ``backends.py`` (the Claude CLI and the heuristic writer; ``selection.py``
chooses between them all) so that nothing on the hook or status path imports an SDK: each
backend module imports its SDK only inside ``call``, and this module imports a backend
module only when it is selected.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from reflect_jobs.writer.backends import Backend

API_BACKENDS = ("openai", "anthropic", "codex")


def writer_options(settings: Any) -> dict[str, Any]:
    """The settings the API backends need, as ``make_backend(options=...)`` takes them.

    Args:
        settings: A ``config.Settings`` (read by attribute, so tests may pass any object).

    Returns:
        ``openai_base_url``, ``openai_api_key``, ``codex_bin`` and ``max_output_tokens``.
    """
    return {
        "openai_base_url": getattr(settings, "openai_base_url", ""),
        "openai_api_key": getattr(settings, "openai_api_key", ""),
        "codex_bin": getattr(settings, "codex_bin", "codex"),
        "max_output_tokens": getattr(settings, "max_output_tokens", 8192),
    }


def make_api_backend(
    name: str,
    *,
    model: str,
    cwd: str,
    timeout_sec: float,
    options: dict[str, Any],
) -> Backend:
    """Build one API backend (``openai``, ``anthropic`` or ``codex``).

    Args:
        name: The backend.
        model: ``REFLECT_DRAIN_MODEL`` (every backend uses it; ``sonnet`` is a Claude alias
            that the anthropic backend resolves, the others send as is).
        cwd: ``REFLECT_DRAIN_CWD`` (the codex child's working directory).
        timeout_sec: The call's timeout (``timeout_for`` the stage timeout).
        options: :func:`writer_options` of the settings.

    Returns:
        The configured backend.

    Raises:
        ValueError: An unknown ``name``.
    """
    max_out = int(options.get("max_output_tokens") or 8192)
    if name == "openai":
        from reflect_jobs.writer.openai_backend import OpenAIBackend

        return OpenAIBackend(
            model,
            base_url=str(options.get("openai_base_url") or ""),
            api_key=str(options.get("openai_api_key") or ""),
            timeout_sec=timeout_sec,
            max_output_tokens=max_out,
        )
    if name == "anthropic":
        from reflect_jobs.writer.anthropic_backend import AnthropicBackend

        return AnthropicBackend(model, timeout_sec=timeout_sec, max_output_tokens=max_out)
    if name == "codex":
        from reflect_jobs.writer.codex_backend import CodexCliBackend

        return CodexCliBackend(
            str(options.get("codex_bin") or "codex"), model, cwd, timeout_sec=timeout_sec
        )
    raise ValueError(f"unknown API backend: {name!r}")
