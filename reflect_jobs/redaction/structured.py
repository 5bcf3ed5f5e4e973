"""Redaction of JSON-bearing text (model answers, CLI envelopes) that keeps the JSON valid."""

from __future__ import annotations

import json
from typing import Any

from reflect_jobs.redaction.checks import (
    is_code_reference,
    is_placeholder,
    is_prose,
    is_word_value,
    looks_generated,
)
from reflect_jobs.redaction.engine import redact_secrets, secret_key, tag

_MAX_DEPTH = 3


def _walk(value: Any, depth: int) -> tuple[Any, int]:
    """Redact every string of a decoded JSON value; a credential-named key (judged by its
    words, :mod:`reflect_jobs.redaction.names`) redacts a value that could be a secret."""
    if isinstance(value, str):
        return _structured(value, depth + 1)
    if isinstance(value, list):
        out, total = [], 0
        for item in value:
            new, n = _walk(item, depth)
            out.append(new)
            total += n
        return out, total
    if isinstance(value, dict):
        result: dict[Any, Any] = {}
        total = 0
        # {"name": "DB_PASSWORD", "value": "…"} (Kubernetes env, many config formats)
        label = value.get("name", value.get("key"))
        if isinstance(label, str) and isinstance(value.get("value"), str):
            kind = secret_key(label)
            if kind and _secret_value(value["value"], kind):
                value = {**value, "value": tag("secret" if kind == "weak" else kind)}
                total += 1
        for key, item in value.items():
            new_key, n = redact_secrets(key) if isinstance(key, str) else (key, 0)
            total += n
            kind = secret_key(key) if isinstance(key, str) else None
            if kind and _secret_value(item, kind):
                result[new_key] = tag("secret" if kind == "weak" else kind)
                total += 1
                continue
            new, n = _walk(item, depth)
            result[new_key] = new
            total += n
        return result, total
    return value, 0


def redact_value(value: Any) -> tuple[Any, int]:
    """Redact a decoded JSON value (dicts, lists, strings; other values are kept).

    Args:
        value: What ``json.loads`` returns, or any structure of dicts, lists and scalars.

    Returns:
        ``(new_value, count)``: a copy with every string redacted as
        :func:`redact_structured` does and the value under a secret-named key (``password``,
        ``"auth"``, ``client_secret``; ``{"name": "DB_PASSWORD", "value": …}``) replaced
        whole.
    """
    return _walk(value, 0)


def _secret_value(item: Any, kind: str) -> bool:
    if isinstance(item, bool) or item is None:
        return False
    if isinstance(item, int | float):
        return kind == "password"
    if isinstance(item, str):
        value = item.strip()
        if kind == "weak":
            return looks_generated(value) and not is_code_reference(value)
        if kind != "password" and is_word_value(value):
            return False
        # Ordinary prose is never a secret value, whatever its field is called.
        return (
            len(value) >= 4
            and not is_placeholder(value)
            and not is_prose(value)
            and not is_code_reference(value)
            and "[REDACTED:" not in value
        )
    return False


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def redact_structured(text: str) -> tuple[str, int]:
    """Redact text that may be (or contain) JSON, keeping the JSON valid.

    A model's answer is JSON inside prose or a fence, and the CLI's stdout is a JSON
    envelope (or JSON lines) whose ``result`` is that answer as a string: redacting the raw
    text could cut an escaped quote in half and turn a paid answer into an unparseable one.
    So a JSON document (the whole text, the span from its first ``{`` to its last ``}``, or
    each JSON line) is decoded, every string in it redacted (recursively: a string holding
    JSON is treated the same way), a value under a secret-named key replaced whole, and the
    document dumped again; text outside it is redacted as text. Without JSON this is
    :func:`redact_secrets`.

    Args:
        text: A model answer, CLI stdout or stderr.

    Returns:
        ``(text, count)`` as :func:`redact_secrets`; the text is unchanged when nothing was
        redacted (a JSON document is re-dumped only when a secret was found in it).
    """
    return _structured(text, 0)


def _structured(text: str, _depth: int) -> tuple[str, int]:
    if not text or _depth > _MAX_DEPTH:
        return redact_secrets(text)
    if "{" not in text and "[" not in text:
        return redact_secrets(text)
    stripped = text.strip()
    if stripped[:1] in "{[":
        try:
            obj = json.loads(stripped)
        except (ValueError, RecursionError):
            obj = None
        else:
            new, n = _walk(obj, _depth)
            return (_dumps(new), n) if n else (text, 0)
    start, end = text.find("{"), text.rfind("}")
    if 0 <= start < end:
        try:
            obj = json.loads(text[start : end + 1])
        except (ValueError, RecursionError):
            obj = None
        if obj is not None:
            new, n = _walk(obj, _depth)
            head, n_head = redact_secrets(text[:start])
            tail, n_tail = redact_secrets(text[end + 1 :])
            body = _dumps(new) if n else text[start : end + 1]
            return head + body + tail, n + n_head + n_tail
    if "\n" in stripped:
        lines, total = [], 0
        for line in text.split("\n"):
            new_line, n = (
                _structured(line, _depth + 1)
                if line.lstrip().startswith(("{", "["))
                else redact_secrets(line)
            )
            lines.append(new_line)
            total += n
        return "\n".join(lines), total
    return redact_secrets(text)
