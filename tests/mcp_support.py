"""Talking to ``reflect-jobs mcp`` the way a harness does: the official SDK's stdio client,
the server a real subprocess started in the session's working directory.

One server per test module: a module fixture builds the world, then runs every call of the
module in one session (:func:`run_session`) and the tests assert on the labelled answers.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from support import BIN, STUB_CLAUDE, Env

from reflect_jobs.recall import block


@dataclass
class Answer:
    """One tool call's result as the client saw it."""

    text: str
    is_error: bool


@dataclass
class Session:
    """What one session saw: the server's info, its tools, and the answers by label."""

    server_name: str
    server_version: str
    tools: dict[str, Any]
    answers: dict[str, Answer] = field(default_factory=dict)


#: A call: a label, the tool, and its arguments (or a function of the answers so far).
Call = tuple[str, str, dict[str, Any] | Callable[[dict[str, Answer]], dict[str, Any]]]


def mcp_env(tmp: Path) -> Env:
    """An isolated environment like the ``env`` fixture, for a module-scoped world."""
    base = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("REFLECT_", "STUB_CLAUDE", "GLOBAL_LEARNINGS"))
    }
    e = Env(base)
    e.update(
        REFLECT_HOME=str(tmp / "home"),
        GLOBAL_LEARNINGS_PATH=str(tmp / "kb"),
        REFLECT_DRAIN_CLAUDE_BIN=str(STUB_CLAUDE),
        REFLECT_INDEX_VECTORS="0",
        REFLECT_HOST="here",
        HF_HUB_OFFLINE="1",
        PYTHONDONTWRITEBYTECODE="1",
    )
    return e


def _text(result: Any) -> str:
    return "".join(getattr(c, "text", "") for c in result.content)


def _is_error(result: Any) -> bool:
    value = getattr(result, "is_error", None)
    return bool(getattr(result, "isError", False) if value is None else value)


async def _run(env: Env, cwd: Path, calls: list[Call]) -> Session:
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    params = StdioServerParameters(
        command=str(BIN / "reflect-jobs"), args=["mcp"], env=dict(env), cwd=str(cwd)
    )
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        init = await session.initialize()
        info = getattr(init, "server_info", None) or init.serverInfo
        listed = (await session.list_tools()).tools
        out = Session(info.name, info.version, {t.name: t for t in listed})
        for label, name, args in calls:
            if callable(args):  # arguments that depend on an earlier answer
                args = args(out.answers)
            result = await session.call_tool(name, args)
            out.answers[label] = Answer(_text(result), _is_error(result))
        return out


def run_session(env: Env, cwd: Path, calls: list[Call], *, timeout: float = 120) -> Session:
    """Start the server in ``cwd``, make every call in order in one session, and stop it."""
    return asyncio.run(asyncio.wait_for(_run(env, cwd, calls), timeout=timeout))


def schema_of(tool: Any) -> dict[str, Any]:
    """A listed tool's input schema (SDK 2.x ``input_schema``, 1.x ``inputSchema``)."""
    return getattr(tool, "input_schema", None) or tool.inputSchema


def assert_wrapped(answer: Answer) -> None:
    """A successful answer: between the markers, bounded, one marker pair."""
    from reflect_jobs.recall import tools

    assert not answer.is_error, answer.text
    assert answer.text.startswith(block.OPEN) and answer.text.rstrip().endswith(block.CLOSE)
    assert len(answer.text) <= tools.MAX_RESULT_CHARS
    assert answer.text.count(block.OPEN) == 1 and answer.text.count(block.CLOSE) == 1


def assert_error(answer: Answer, *needles: str) -> None:
    """A failed call: ``isError`` true, one line of text, holding each of ``needles``."""
    assert answer.is_error, answer.text
    assert "\n" not in answer.text.strip(), answer.text
    for needle in needles:
        assert needle in answer.text, (needle, answer.text)
