"""The ``openai`` writer: any OpenAI-compatible chat-completions endpoint.

vLLM, llama.cpp's ``llama-server``, Ollama, LM Studio and hosted APIs all speak
``POST {base_url}/chat/completions``. The official ``openai`` SDK makes the call (imported
here only when this backend runs), with ``max_retries=0`` so that our outcome table, not the
SDK, decides what a failure costs and when it is retried. The answer goes through
``api_result`` into the same ``ModelResult`` the Claude CLI produces; the caller records it
before anything parses it.

A JSON object response (``response_format: {"type": "json_object"}``) is asked for; a server
that rejects the parameter (400/422 naming ``response_format``) is asked once more without
it — the extract parser copes with either.
"""

from __future__ import annotations

import time
from typing import Any

from reflect_jobs.writer.api_result import (
    error_message,
    timeout_result,
)
from reflect_jobs.writer.http_answers import HttpAnswers, elapsed_ms
from reflect_jobs.writer.ratelimit_headers import openai_snapshots
from reflect_jobs.writer.result import BackendMissing, ModelResult

#: Sent as the bearer token when no key is configured (local servers ignore it).
NO_KEY = "sk-no-key-required"
SDK_HINT = "pip install 'reflect-jobs[writers]' (the openai SDK)"


def clean_text(prompt: str) -> str:
    """The prompt as valid UTF-8 (lone surrogates from JSON escapes become ``?``).

    Args:
        prompt: The prompt.

    Returns:
        Text every JSON encoder and server accepts.
    """
    return prompt.encode("utf-8", errors="replace").decode("utf-8")


def parse_chat_completion(body: Any) -> tuple[str, str, dict[str, int]] | None:
    """Text, finish reason and usage of a chat-completions response body.

    Args:
        body: The decoded JSON body.

    Returns:
        ``(text, finish_reason, usage)`` with usage in the four ``USAGE_KEYS`` buckets
        (cached prompt tokens counted as cache reads, not twice), or None when the body has
        no first choice with a message.
    """
    if not isinstance(body, dict):
        return None
    choices = body.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        return None
    message = choices[0].get("message")
    if not isinstance(message, dict):
        return None
    content = message.get("content")
    if isinstance(content, list):  # content parts
        content = "".join(
            str(p.get("text", "")) for p in content if isinstance(p, dict) and "text" in p
        )
    text = content if isinstance(content, str) else ""
    raw_usage = body.get("usage")
    usage = raw_usage if isinstance(raw_usage, dict) else {}
    details = usage.get("prompt_tokens_details")
    cached = details.get("cached_tokens", 0) if isinstance(details, dict) else 0
    cached = cached if isinstance(cached, int) and cached > 0 else 0
    prompt_tokens = usage.get("prompt_tokens", 0)
    prompt_tokens = prompt_tokens if isinstance(prompt_tokens, int) else 0
    out_tokens = usage.get("completion_tokens", 0)
    return (
        text,
        str(choices[0].get("finish_reason") or ""),
        {
            "input_tokens": max(0, prompt_tokens - cached),
            "output_tokens": out_tokens if isinstance(out_tokens, int) else 0,
            "cache_read_input_tokens": cached,
            "cache_creation_input_tokens": 0,
        },
    )


class OpenAIBackend(HttpAnswers):
    """Chat completions through the official SDK (``REFLECT_WRITER_BACKEND=openai``).

    Args:
        model: ``REFLECT_DRAIN_MODEL``, sent as is (``sonnet`` means nothing to a non-Claude
            server: set the served model's name).
        base_url: ``REFLECT_OPENAI_BASE_URL`` (e.g. ``http://127.0.0.1:8000/v1``); empty
            means the SDK's default (``OPENAI_BASE_URL`` or api.openai.com).
        api_key: ``REFLECT_OPENAI_API_KEY`` / ``OPENAI_API_KEY``; may be empty.
        timeout_sec: Seconds for the whole HTTP call.
        max_output_tokens: Not sent (servers differ on the parameter); kept for symmetry.
        json_mode: Ask for ``response_format: {"type": "json_object"}``.
    """

    name = "openai"
    _parse = staticmethod(parse_chat_completion)
    _snapshots = staticmethod(openai_snapshots)
    _what = "a chat completion"
    _finished = ("stop", "")
    _stop_prefix = "finish_"

    def __init__(
        self,
        model: str,
        *,
        base_url: str = "",
        api_key: str = "",
        timeout_sec: float = 60.0,
        max_output_tokens: int = 8192,
        json_mode: bool = True,
    ) -> None:
        """Store the settings; the SDK is imported at :meth:`call`."""
        self.model = model
        self.base_url = base_url
        self.api_key = api_key
        self.timeout_sec = timeout_sec
        self.max_output_tokens = max_output_tokens
        self.json_mode = json_mode

    def client(self) -> tuple[Any, Any]:
        """The SDK module and a client with retries off and our timeout.

        Returns:
            ``(openai, openai.OpenAI(...))``.

        Raises:
            BackendMissing: The ``openai`` package is not installed.
        """
        try:
            import openai
        except ImportError as exc:
            raise BackendMissing(f"the openai writer needs its SDK: {SDK_HINT}") from exc
        return openai, openai.OpenAI(
            base_url=self.base_url or None,
            api_key=self.api_key or NO_KEY,
            max_retries=0,
            timeout=self.timeout_sec,
        )

    def call(self, prompt: str) -> ModelResult:
        """One chat completion; every failure becomes a ``ModelResult``.

        Args:
            prompt: The full prompt (``build_prompt``), sent as one user message.

        Returns:
            A success result, an error result with its ``error_kind``, or a timeout result.

        Raises:
            BackendMissing: The SDK is not installed, or refuses to build the request (a
                configuration fault: halt, free).
        """
        openai, client = self.client()
        started = time.monotonic()
        messages = [{"role": "user", "content": clean_text(prompt)}]
        json_mode = self.json_mode
        while True:
            kwargs: dict[str, Any] = {"model": self.model, "messages": messages}
            if json_mode:
                kwargs["response_format"] = {"type": "json_object"}
            try:
                raw = client.chat.completions.with_raw_response.create(**kwargs)
            except openai.APITimeoutError as exc:
                return timeout_result(
                    backend=self.name,
                    model=self.model,
                    duration_ms=elapsed_ms(started),
                    detail=str(exc),
                )
            except openai.APIStatusError as exc:
                text = exc.response.text
                _, message = error_message(text)
                if json_mode and exc.status_code in (400, 422) and "response_format" in text:
                    json_mode = False  # this server has no JSON mode: ask again without it
                    continue
                return self._error(exc.status_code, exc.response.headers, text, started)
            except openai.APIConnectionError as exc:
                return self._error(None, {}, f"{type(exc).__name__}: {exc}", started)
            except (TypeError, ValueError, openai.OpenAIError) as exc:  # SDK refused to send
                raise BackendMissing(f"openai SDK refused the request: {exc}") from exc
            return self._success(raw.headers, raw.http_response.text, started)
