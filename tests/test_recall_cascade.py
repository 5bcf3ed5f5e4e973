"""Never learn from what we injected: the marked block is dropped wherever it turns up."""

from __future__ import annotations

import json

from reflect_jobs.recall import block
from reflect_jobs.recall.tools import wrap
from reflect_jobs.transcripts import read_transcript
from reflect_jobs.writer.heuristic import heuristic_actions

BLOCK = block.render(
    "github.com/acme/shop",
    [{"id": "lrn-pnpm-aaaaaa", "title": "Never use npm here", "rule": "Always use pnpm"}],
    [{"id": "lrn-except-bbbbbb", "title": "Never use a bare except", "rule": "Catch KeyError"}],
)


def _claude(tmp_path, records):
    path = tmp_path / "s.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in records) + "\n")
    return path


def _user(text, **kw):
    return {"type": "user", "sessionId": "s", "message": {"role": "user", "content": text}, **kw}


def _said(path, harness="claude"):
    return "\n".join(t.text for t in read_transcript(path, harness=harness).turns)


def test_block_in_hook_system_or_pasted_user_records_is_never_dialogue(tmp_path):
    path = _claude(
        tmp_path,
        [
            {
                "type": "attachment",
                "attachment": {"type": "hook_additional_context", "content": [BLOCK]},
            },
            {"type": "system", "content": BLOCK, "subtype": "informational"},
            _user(BLOCK, isMeta=True),
            _user(f"Here is what you told me:\n{BLOCK}\nNo, never commit on main."),
            _user(f"{BLOCK[: len(BLOCK) // 2]}"),  # a paste cut in half: fail closed
            _user(f"…{BLOCK[len(BLOCK) // 2 :]}\nthanks"),
            {
                "type": "assistant",
                "message": {"role": "assistant", "content": [{"type": "text", "text": BLOCK}]},
            },
        ],
    )
    said = _said(path)
    assert "never commit on main" in said
    for recalled in ("pnpm", "bare except", "lrn-", "reflect-jobs-context", "KeyError"):
        assert recalled not in said, recalled
    titles = [a["learning"]["title"] for a in heuristic_actions(said)]
    assert titles == ["Never commit on main"]


def test_our_mcp_tool_results_are_dropped_too(tmp_path):
    result = wrap('{"id": "lrn-x-cccccc", "title": "Always run make lint", "path": "/k/x.md"}')
    path = _claude(
        tmp_path,
        [
            {
                "type": "assistant",
                "message": {
                    "role": "assistant",
                    "content": [
                        {
                            "type": "tool_use",
                            "id": "t1",
                            "name": "mcp__reflect-jobs__search",
                            "input": {"query": "lint"},
                        },
                    ],
                },
            },
            _user([{"type": "tool_result", "tool_use_id": "t1", "content": result}]),
            _user(f"as the tool said: {result} — ok"),
        ],
    )
    said = _said(path)
    assert "make lint" not in said and "lrn-x" not in said


def test_codex_and_copilot_records_drop_it_as_well(tmp_path):
    codex = tmp_path / "rollout.jsonl"
    codex.write_text(
        "\n".join(
            json.dumps(r)
            for r in (
                {"type": "session_meta", "payload": {"id": "x", "cwd": "/r"}},
                {
                    "type": "response_item",
                    "payload": {
                        "type": "message",
                        "role": "user",
                        "content": [{"type": "input_text", "text": f"{BLOCK}\nNo, use tabs."}],
                    },
                },
            )
        )
        + "\n"
    )
    assert _said(codex, "codex") == "No, use tabs."
    copilot = tmp_path / "events.jsonl"
    copilot.write_text(
        json.dumps({"type": "user.message", "id": "e", "data": {"content": BLOCK + " hi"}}) + "\n"
    )
    assert _said(copilot, "copilot") == "hi"
