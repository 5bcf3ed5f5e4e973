"""Per-model prices: a built-in table users extend with ``REFLECT_PRICES`` (a JSON file).

The Claude CLI reports what a call cost; an HTTP API reports tokens only, so the writer
prices them itself. A model the table does not know costs $0 on the openai and codex
backends (a local llama.cpp/Ollama/vLLM model is free) and is priced as sonnet on the Claude
backends (the conservative guess the cost report always made). Either way the call still
takes one budget unit, so the caps keep meaning "calls", not dollars.

File format (USD per 1M tokens; either form; a user entry replaces a built-in one)::

    {"my-model": {"input": 0.5, "output": 1.5, "cache_read": 0.05, "cache_write": 0.6},
     "qwen2.5-coder": [0, 0, 0, 0]}

A model's price is its exact entry, else the LONGEST entry contained in its name (case
ignored), so ``gpt-4o-mini-2024-07-18`` matches ``gpt-4o-mini`` before ``gpt-4o``.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

PRICES_ENV = "REFLECT_PRICES"

#: USD per 1M tokens: input, output, cache read, cache write.
Price = tuple[float, float, float, float]

BUILTIN_PRICES: dict[str, Price] = {
    "opus": (15.0, 75.0, 1.5, 18.75),
    "sonnet": (3.0, 15.0, 0.3, 3.75),
    "haiku": (0.8, 4.0, 0.08, 1.0),
    "gpt-4o": (2.5, 10.0, 1.25, 0.0),
    "gpt-4o-mini": (0.15, 0.6, 0.075, 0.0),
    "gpt-4.1": (2.0, 8.0, 0.5, 0.0),
    "gpt-4.1-mini": (0.4, 1.6, 0.1, 0.0),
    "gpt-5": (1.25, 10.0, 0.125, 0.0),
    "gpt-5-mini": (0.25, 2.0, 0.025, 0.0),
}
#: Backends whose unknown models are priced as sonnet (everything else: $0).
CLAUDE_BACKENDS = ("claude", "anthropic", "")
_FIELDS = ("input", "output", "cache_read", "cache_write")


class PricesError(ValueError):
    """The ``REFLECT_PRICES`` file is missing or malformed; the message says where."""


def _number(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise PricesError(f"{where} must be a number, got {value!r}")
    if value < 0:
        raise PricesError(f"{where} must be >= 0, got {value!r}")
    return float(value)


def parse_prices(text: str, source: str = PRICES_ENV) -> dict[str, Price]:
    """Validate a prices document.

    Args:
        text: The JSON text: an object of model name -> ``[in, out, cache_read,
            cache_write]`` or ``{"input", "output", "cache_read", "cache_write"}`` (missing
            cache prices are 0).
        source: Named in error messages.

    Returns:
        Lower-cased model name -> price tuple.

    Raises:
        PricesError: Not JSON, not an object, or an entry is not four non-negative numbers.
    """
    try:
        doc = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise PricesError(f"{source}: not JSON ({exc})") from None
    if not isinstance(doc, dict):
        raise PricesError(f"{source}: must be a JSON object of model -> prices")
    table: dict[str, Price] = {}
    for name, entry in doc.items():
        where = f"{source}: {name!r}"
        if isinstance(entry, list):
            if len(entry) != 4:
                raise PricesError(f"{where} needs [input, output, cache_read, cache_write]")
            values = [_number(v, where) for v in entry]
        elif isinstance(entry, dict):
            unknown = set(entry) - set(_FIELDS)
            if unknown or "input" not in entry or "output" not in entry:
                raise PricesError(f"{where} needs keys input, output (cache_read, cache_write)")
            values = [_number(entry.get(f, 0), f"{where}.{f}") for f in _FIELDS]
        else:
            raise PricesError(f"{where} must be a list or an object")
        table[str(name).strip().lower()] = (values[0], values[1], values[2], values[3])
    return table


def load_prices_file(path: str | os.PathLike[str]) -> dict[str, Price]:
    """Read and validate a ``REFLECT_PRICES`` file.

    Args:
        path: The file (``~`` expanded).

    Returns:
        Its table (see :func:`parse_prices`).

    Raises:
        PricesError: The file cannot be read or is malformed.
    """
    p = Path(os.path.expanduser(str(path)))
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise PricesError(f"{PRICES_ENV}: cannot read {p}: {exc.strerror or exc}") from None
    return parse_prices(text, f"{PRICES_ENV} {p}")


def price_table(environ: dict[str, str] | None = None) -> tuple[dict[str, Price], set[str]]:
    """The built-in table merged with the user's file. Never raises.

    A broken file here (it was valid when the settings were loaded) is ignored rather than
    failing a call that has already been paid for; ``load_settings`` reports it up front.

    Args:
        environ: The environment; ``None`` means ``os.environ``.

    Returns:
        ``(table, user_keys)``: the merged table and the names that came from the file.
    """
    from reflect_jobs.envpaths import environ as merged_environ

    env = merged_environ(environ)
    table = dict(BUILTIN_PRICES)
    path = (env.get(PRICES_ENV) or "").strip()
    if not path:
        return table, set()
    try:
        user = load_prices_file(path)
    except PricesError:
        return table, set()
    table.update(user)
    return table, set(user)


def price_for(model: str, backend: str = "", environ: dict[str, str] | None = None) -> Price:
    """The price of one model.

    Args:
        model: The model name as sent (``claude-opus-4-1``, ``gpt-4o-mini``, ``llama3.1``).
        backend: The writer backend; decides what an unknown model costs.
        environ: The environment (for ``REFLECT_PRICES``); ``None`` means ``os.environ``.

    Returns:
        The exact entry, else the longest contained entry, else sonnet's price for a
        Claude backend and ``(0, 0, 0, 0)`` for any other.
    """
    table, _ = price_table(environ)
    name = (model or "").strip().lower()
    if name in table:
        return table[name]
    matches = [key for key in table if key and key in name]
    if matches:
        return table[max(matches, key=len)]
    if backend in CLAUDE_BACKENDS:
        return table["sonnet"]
    return (0.0, 0.0, 0.0, 0.0)


def cost_usd(
    model: str,
    backend: str,
    usage: dict[str, int],
    environ: dict[str, str] | None = None,
) -> float:
    """What one call cost, from its token usage.

    Args:
        model: The model name.
        backend: The writer backend (see :func:`price_for`).
        usage: ``input_tokens``, ``output_tokens``, ``cache_read_input_tokens``,
            ``cache_creation_input_tokens`` (missing ones count 0).
        environ: The environment; ``None`` means ``os.environ``.

    Returns:
        USD, rounded to 8 places.
    """
    p = price_for(model, backend, environ)
    total = (
        usage.get("input_tokens", 0) * p[0]
        + usage.get("output_tokens", 0) * p[1]
        + usage.get("cache_read_input_tokens", 0) * p[2]
        + usage.get("cache_creation_input_tokens", 0) * p[3]
    )
    return round(total / 1_000_000, 8)
