"""The ``anthropic`` writer: the Messages API through the official ``anthropic`` SDK.

The key is ``ANTHROPIC_API_KEY`` and the endpoint ``ANTHROPIC_BASE_URL``, both read by the SDK
itself. The prompt's static instruction prefix (``prompt.STATIC_PREFIX``, always first) is
sent as its own content block marked ``cache_control: ephemeral``, so repeated calls read it
from the prompt cache; the cache reads and writes the API reports land in the cost row.
Every response's ``anthropic-ratelimit-*`` headers become quota-gate snapshots, and a
429/529 closes the gate until its ``retry-after``. ``max_retries=0``: the outcome table
decides retries, not the SDK.
"""

from __future__ import annotations

import os
import time
from typing import Any

from reflect_jobs.writer.api_result import (
    timeout_result,
)
from reflect_jobs.writer.http_answers import HttpAnswers, elapsed_ms
from reflect_jobs.writer.openai_backend import clean_text
from reflect_jobs.writer.prompt import STATIC_PREFIX
from reflect_jobs.writer.ratelimit_headers import anthropic_snapshots
from reflect_jobs.writer.result import BackendMissing, ModelResult

SDK_HINT = "pip install 'reflect-jobs[writers]' (the anthropic SDK)"
#: The Claude Code CLI's model aliases (``REFLECT_DRAIN_MODEL`` defaults to ``sonnet``) as
#: Messages-API model aliases; any other value is sent as is.
MODEL_ALIASES = {
    "sonnet": "claude-sonnet-4-5",
    "opus": "claude-opus-4-1",
    "haiku": "claude-haiku-4-5",
}


def api_model(model: str) -> str:
    """The Messages-API model for ``REFLECT_DRAIN_MODEL``.

    Args:
        model: A CLI alias (``sonnet``, ``opus``, ``haiku``) or an API model id.

    Returns:
        The API alias from :data:`MODEL_ALIASES`, or ``model`` unchanged.
    """
    return MODEL_ALIASES.get(model.strip().lower(), model.strip())


def content_blocks(prompt: str) -> list[dict[str, Any]]:
    """The user message's content: the static prefix as a cached block, then the rest.

    Args:
        prompt: The full prompt (``build_prompt``).

    Returns:
        Two text blocks (the first with ``cache_control: {"type": "ephemeral"}``) when the
        prompt starts with ``STATIC_PREFIX``, else one plain block; their texts concatenate
        to exactly the prompt (lone surrogates as ``?``).
    """
    text = clean_text(prompt)
    prefix = clean_text(STATIC_PREFIX)
    if text.startswith(prefix) and len(text) > len(prefix):
        return [
            {"type": "text", "text": prefix, "cache_control": {"type": "ephemeral"}},
            {"type": "text", "text": text[len(prefix) :]},
        ]
    return [{"type": "text", "text": text}]


def parse_message(body: Any) -> tuple[str, str, dict[str, int]] | None:
    """Text, stop reason and usage of a Messages API response body.

    Args:
        body: The decoded JSON body (``type: message``).

    Returns:
        ``(text, stop_reason, usage)``: the text blocks joined, and usage with
        ``input_tokens``, ``output_tokens``, ``cache_read_input_tokens``,
        ``cache_creation_input_tokens``; None when the body is not a message.
    """
    if not isinstance(body, dict) or not isinstance(body.get("content"), list):
        return None
    text = "".join(
        str(block.get("text", ""))
        for block in body["content"]
        if isinstance(block, dict) and block.get("type") == "text"
    )
    raw_usage = body.get("usage")
    usage = raw_usage if isinstance(raw_usage, dict) else {}
    return text, str(body.get("stop_reason") or ""), dict(usage)


class AnthropicBackend(HttpAnswers):
    """``POST /v1/messages`` with the SDK (``REFLECT_WRITER_BACKEND=anthropic``).

    Args:
        model: ``REFLECT_DRAIN_MODEL`` (CLI aliases resolved by :func:`api_model`).
        timeout_sec: Seconds for the whole HTTP call.
        max_output_tokens: ``max_tokens`` of the request.
    """

    name = "anthropic"
    _parse = staticmethod(parse_message)
    _snapshots = staticmethod(anthropic_snapshots)
    _what = "a message"
    _finished = ("end_turn", "stop_sequence", "")
    _stop_prefix = "stop_"

    def __init__(self, model: str, *, timeout_sec: float = 60.0, max_output_tokens: int = 8192):
        """Store the settings; the SDK is imported at :meth:`call`."""
        self.model = api_model(model)
        self.timeout_sec = timeout_sec
        self.max_output_tokens = max_output_tokens

    def client(self) -> tuple[Any, Any]:
        """The SDK module and a client (key and base URL from the environment, as the SDK does).

        Returns:
            ``(anthropic, anthropic.Anthropic(max_retries=0, timeout=...))``.

        Raises:
            BackendMissing: The SDK is not installed, or no ``ANTHROPIC_API_KEY`` is set.
        """
        try:
            import anthropic
        except ImportError as exc:
            raise BackendMissing(f"the anthropic writer needs its SDK: {SDK_HINT}") from exc
        if not (os.environ.get("ANTHROPIC_API_KEY") or os.environ.get("ANTHROPIC_AUTH_TOKEN")):
            raise BackendMissing("the anthropic writer needs ANTHROPIC_API_KEY (not set)")
        try:
            return anthropic, anthropic.Anthropic(max_retries=0, timeout=self.timeout_sec)
        except anthropic.AnthropicError as exc:
            raise BackendMissing(f"anthropic writer: {exc} (set ANTHROPIC_API_KEY)") from exc

    def call(self, prompt: str) -> ModelResult:
        """One Messages API call; every failure becomes a ``ModelResult``.

        Args:
            prompt: The full prompt (``build_prompt``).

        Returns:
            A success result (with the cache usage and the rate-limit snapshots), an error
            result with its ``error_kind``, or a timeout result.

        Raises:
            BackendMissing: The SDK is not installed, no key is configured, or the SDK
                refuses to build the request (a configuration fault: halt, free).
        """
        anthropic, client = self.client()
        started = time.monotonic()
        try:
            raw = client.messages.with_raw_response.create(
                model=self.model,
                max_tokens=self.max_output_tokens,
                messages=[{"role": "user", "content": content_blocks(prompt)}],
            )
        except anthropic.APITimeoutError as exc:
            return timeout_result(
                backend=self.name,
                model=self.model,
                duration_ms=elapsed_ms(started),
                detail=str(exc),
            )
        except anthropic.APIStatusError as exc:
            return self._error(exc.status_code, exc.response.headers, exc.response.text, started)
        except anthropic.APIConnectionError as exc:
            return self._error(None, {}, f"{type(exc).__name__}: {exc}", started)
        except (TypeError, ValueError, anthropic.AnthropicError) as exc:  # SDK refused to send
            raise BackendMissing(f"anthropic SDK refused the request: {exc}") from exc
        return self._success(raw.headers, raw.http_response.text, started)
