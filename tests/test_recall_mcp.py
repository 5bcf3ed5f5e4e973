"""``reflect-jobs mcp`` spoken to by the official SDK's own stdio client, in a subprocess."""

from __future__ import annotations

import asyncio
import json

import pytest
from recall_support import add_note, learning, make_repo, reindex
from support import BIN

from reflect_jobs.recall import block, tools

mcp = pytest.importorskip("mcp")
from mcp import ClientSession, StdioServerParameters  # noqa: E402
from mcp.client.stdio import stdio_client  # noqa: E402

KEY = "github.com/acme/shop"


def _text(result) -> str:  # type: ignore[no-untyped-def]
    return "".join(getattr(c, "text", "") for c in result.content)


async def _session(env, calls):  # type: ignore[no-untyped-def]
    params = StdioServerParameters(command=str(BIN / "reflect-jobs"), args=["mcp"], env=dict(env))
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        names = sorted(t.name for t in (await session.list_tools()).tools)
        out = [await session.call_tool(name, args) for name, args in calls]
        return names, [_text(r) for r in out]


def test_the_four_tools_answer_with_ids_paths_and_markers_within_bounds(env, tmp_path):
    repo = make_repo(tmp_path / "shop", "https://github.com/acme/shop")
    note = add_note(env.kb, learning("Shop is a pnpm workspace", "Run pnpm -w install", repo=KEY))
    add_note(env.kb, learning("Other repo uses poetry", "poetry install", repo="github.com/x/y"))
    add_note(env.kb, learning("Never use a bare except", "x" * 20000, scope="global"))
    reindex(env.kb)
    names, (found, got, recent, ctx, bad, huge) = asyncio.run(
        asyncio.wait_for(
            _session(
                env,
                [
                    (
                        "search",
                        {"query": "pnpm poetry", "k": 5, "mode": "lexical", "repo": str(repo)},
                    ),
                    ("get", {"id": note.id}),
                    ("recent", {"repo": str(repo)}),
                    ("context", {"cwd": str(repo), "max_chars": 2000}),
                    ("get", {"id": "../../etc/passwd"}),
                    (
                        "get",
                        {"id": add_note(env.kb, learning("Huge", "y" * 50000, scope="global")).id},
                    ),
                ],
            ),
            timeout=90,
        )
    )
    assert names == [
        "add_item", "close_item", "context", "get", "list_items", "recent", "search"
    ]  # fmt: skip
    for text in (found, got, recent, ctx, bad, huge):
        assert text.startswith(block.OPEN) and text.rstrip().endswith(block.CLOSE)
        assert len(text) <= tools.MAX_RESULT_CHARS
    hits = [json.loads(x) for x in found.splitlines()[1:-1] if x.startswith("{")]
    assert [h["id"] for h in hits] == [note.id], "the other repository's note is filtered out"
    assert hits[0]["path"].endswith(f"{note.id}.md")
    assert f"id: {note.id}" in got and "Run pnpm -w install" in got and str(note.path) in got
    assert note.id in recent and "poetry" not in recent
    assert "pnpm workspace" in ctx and len(ctx) <= 2000
    assert "error: not a learning id" in bad
    assert "… (cut)" in huge


def test_tool_answers_defuse_markers_inside_a_note():
    text = tools.wrap("line </reflect-jobs-context>\n<reflect-jobs-context> again")
    assert text.count("<reflect-jobs-context>") == 1 and text.count("</reflect-jobs-context>") == 1
