"""Helpers for the API-writer tests: the scripted HTTP server as a subprocess, real wire bodies.

The bodies follow the providers' documented formats (OpenAI chat completions and its error
object; Anthropic Messages and its ``{"type": "error", "error": {...}}`` object); see
``tests/stubs/README.md``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from support import ROOT, wait_for

API_SERVER = ROOT / "tests" / "stubs" / "api_server.py"
STUB_CODEX = ROOT / "tests" / "stubs" / "codex"

ONE_CREATE = {
    "actions": [
        {
            "action": "CREATE",
            "reason": "the user corrected the config handling",
            "learning": {
                "title": "Never mutate shared config at import time",
                "category": "Python",
                "key_insight": "Import-time mutation of shared config leaks between tests",
                "problem": "a module changed the shared config when imported",
                "root_cause": "side effects at import time",
                "fix": "build config in a function and pass it in",
                "rule": "No side effects at import time",
                "evidence": "never mutate the shared config at import time",
                "confidence_num": 0.9,
                "tags": ["python", "config"],
                "entities": ["config"],
                "body": "## Problem\nImport-time mutation.\n\n## Solution\nA factory.",
            },
        }
    ]
}


class ApiServer:
    """A running ``api_server.py``: its base URL and the requests it logged."""

    def __init__(self, proc: subprocess.Popen, port: int, log: Path) -> None:
        self.proc = proc
        self.port = port
        self.log = log

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def requests(self, path: str | None = None) -> list[dict]:
        if not self.log.exists():
            return []
        rows = [json.loads(line) for line in self.log.read_text().splitlines() if line]
        return [r for r in rows if path is None or r["path"] == path]


@contextmanager
def api_server(directory: Path, routes: dict) -> Iterator[ApiServer]:
    """Start the server with ``routes`` (``{"POST /v1/...": [response, ...]}``)."""
    directory.mkdir(parents=True, exist_ok=True)
    script = directory / "script.json"
    script.write_text(json.dumps({"routes": routes}))
    port_file, log = directory / "port", directory / "requests.jsonl"
    proc = subprocess.Popen(
        [
            sys.executable,
            str(API_SERVER),
            "--script",
            str(script),
            "--log",
            str(log),
            "--port-file",
            str(port_file),
        ]
    )
    try:
        wait_for(port_file.exists, 20, what="api server port file")
        yield ApiServer(proc, int(port_file.read_text()), log)
    finally:
        proc.kill()
        proc.wait(timeout=10)


# --- OpenAI chat completions -------------------------------------------------------------


def openai_completion(text: str, *, prompt_tokens=1200, completion_tokens=80, cached=0) -> dict:
    return {
        "status": 200,
        "headers": {
            "x-ratelimit-limit-requests": "500",
            "x-ratelimit-remaining-requests": "499",
            "x-ratelimit-reset-requests": "120ms",
        },
        "body": {
            "id": "chatcmpl-9x",
            "object": "chat.completion",
            "created": 1764600000,
            "model": "served-model",
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": text, "refusal": None},
                    "logprobs": None,
                    "finish_reason": "stop",
                }
            ],
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "total_tokens": prompt_tokens + completion_tokens,
                "prompt_tokens_details": {"cached_tokens": cached, "audio_tokens": 0},
                "completion_tokens_details": {"reasoning_tokens": 0},
            },
            "system_fingerprint": "fp_test",
        },
    }


def openai_error(status: int, message: str, etype: str, code: str | None = None, **headers):
    return {
        "status": status,
        "headers": {k.replace("_", "-"): v for k, v in headers.items()},
        "body": {"error": {"message": message, "type": etype, "param": None, "code": code}},
    }


def openai_models(*ids: str) -> dict:
    return {
        "status": 200,
        "body": {
            "object": "list",
            "data": [{"id": i, "object": "model", "created": 0, "owned_by": "me"} for i in ids],
        },
    }


# --- Anthropic Messages ------------------------------------------------------------------


def anthropic_message(
    text: str, *, input_tokens=40, output_tokens=90, cache_write=0, cache_read=0
) -> dict:
    return {
        "status": 200,
        "headers": {
            "anthropic-ratelimit-requests-limit": "50",
            "anthropic-ratelimit-requests-remaining": "49",
            "anthropic-ratelimit-requests-reset": "2026-12-01T23:59:00Z",
            "anthropic-ratelimit-tokens-limit": "100000",
            "anthropic-ratelimit-tokens-remaining": "98000",
            "anthropic-ratelimit-tokens-reset": "2026-12-01T23:59:00Z",
            "request-id": "req_test",
        },
        "body": {
            "id": "msg_01test",
            "type": "message",
            "role": "assistant",
            "model": "claude-sonnet-4-5-20250929",
            "content": [{"type": "text", "text": text}],
            "stop_reason": "end_turn",
            "stop_sequence": None,
            "usage": {
                "input_tokens": input_tokens,
                "cache_creation_input_tokens": cache_write,
                "cache_read_input_tokens": cache_read,
                "output_tokens": output_tokens,
            },
        },
    }


def anthropic_error(status: int, etype: str, message: str, **headers) -> dict:
    return {
        "status": status,
        "headers": {k.replace("_", "-"): v for k, v in headers.items()},
        "body": {"type": "error", "error": {"type": etype, "message": message}, "request_id": "r"},
    }


def anthropic_models(*ids: str) -> dict:
    return {
        "status": 200,
        "body": {
            "data": [
                {"type": "model", "id": i, "display_name": i, "created_at": "2025-09-29T00:00:00Z"}
                for i in ids
            ],
            "has_more": False,
            "first_id": ids[0] if ids else None,
            "last_id": ids[-1] if ids else None,
        },
    }
