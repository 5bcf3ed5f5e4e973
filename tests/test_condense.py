"""The condensed transcript a reflection pass reads (cascade/condense.py): prompts, text, tool
calls with short arguments, errors and short results, in each harness's real record shapes;
bounded (one 50 MB tool error, a long session) and redacted."""

from __future__ import annotations

import json
from pathlib import Path

from reflect_jobs.cascade.condense import condense, section

TOKEN = "ghp_" + "a1B2c3D4e5F6" * 3  # a GitHub token's shape


def _claude(path: Path, records: list[dict]) -> Path:
    lines = []
    for n, (role, content) in enumerate(records):
        lines.append(
            json.dumps(
                {
                    "type": role,
                    "uuid": f"u{n}",
                    "sessionId": "s",
                    "message": {"role": role, "content": content},
                }
            )
        )
    path.write_text("\n".join(lines) + "\n")
    return path


def _use(name: str, args: dict, tid: str = "t") -> tuple[str, list]:
    return ("assistant", [{"type": "tool_use", "id": tid, "name": name, "input": args}])


def _result(text: str, *, error: bool = False, tid: str = "t") -> tuple[str, list]:
    block = {"type": "tool_result", "tool_use_id": tid, "content": text}
    if error:
        block["is_error"] = True
    return ("user", [block])


def test_claude_prompts_text_calls_errors_and_short_results(tmp_path):
    path = _claude(
        tmp_path / "s.jsonl",
        [
            ("user", f"Fix the importer; the token is {TOKEN}"),
            ("assistant", [{"type": "text", "text": "Reading it."}]),
            _use("Read", {"file_path": "src/importer.py"}),
            _result("line\n" * 5_000),  # a file the session read: dropped
            _use("Bash", {"command": "pytest -q", "description": "run tests"}),
            _result("Traceback …\nE   KeyError: 'budget'\n" + "x" * 5_000, error=True),
            _use("Bash", {"command": "pytest -q"}),
            _result("collected 5 items\n" + "." * 500 + "\n5 passed in 0.31s"),
        ],
    )
    c = condense(path, "claude")
    text = c.text
    assert text.splitlines()[0].startswith("[person] Fix the importer")
    assert TOKEN not in text and "[REDACTED" in text
    assert '[tool call] Read(file_path="src/importer.py")' in text
    assert '[tool call] Bash(command="pytest -q", description="run tests")' in text
    assert "[tool error] Traceback … E KeyError: 'budget'" in text
    assert "[tool result] 5 passed in 0.31s" in text
    assert "line line" not in text
    assert (c.person_turns, c.tool_calls, c.errors) == (1, 3, 1)
    error_line = next(x for x in c.lines if x.startswith("[tool error]"))
    assert len(error_line) <= 620
    codes = dict(zip(c.lines, c.origins, strict=True))
    assert codes[c.lines[0]] == "p" and codes["[assistant] Reading it."] == "a"
    assert codes["[tool result] 5 passed in 0.31s"] == "t"


def test_one_50_mb_tool_error_is_passed_over_and_the_session_is_bounded(tmp_path):
    path = _claude(
        tmp_path / "big.jsonl",
        [
            ("user", "Run the whole suite."),
            _use("Bash", {"command": "make test"}),
            _result("E" * (50 * 1024 * 1024), error=True),
            ("user", "What happened?"),
        ],
    )
    c = condense(path, "claude", max_chars=24_000)
    assert c.skipped_records == 1 and len(c.text) < 2_000
    assert "[a record of 50.0 MiB was too long to read]" in c.text
    assert c.text.endswith("[person] What happened?")

    turns = [("user", f"Step {n}: open module m{n}.py and fix it.") for n in range(2_000)]
    long = condense(_claude(tmp_path / "long.jsonl", turns), "claude", max_chars=24_000)
    assert len(long.text) <= 24_000 + 100 and long.dropped_chars > 0
    assert long.lines[0].startswith("[person] Step 0:")  # the head is kept…
    assert long.lines[-1].startswith("[person] Step 1999:")  # …and the latest work
    assert any("characters of the session left out" in x for x in long.lines)


def test_since_reads_only_what_came_after_the_last_pass(tmp_path):
    path = _claude(tmp_path / "s.jsonl", [("user", "First task."), ("user", "Second task.")])
    first_line = path.read_bytes().split(b"\n")[0]
    c = condense(path, "claude", since=len(first_line) + 1)
    assert c.lines == ["[person] Second task."] and c.person_turns == 1


def test_codex_function_calls_and_outputs(tmp_path):
    def rec(kind: str, payload: dict) -> str:
        return json.dumps({"timestamp": "2026-11-01T10:00:00Z", "type": kind, "payload": payload})

    call = {"command": ["bash", "-lc", "pytest -q"], "workdir": "/repo"}
    lines = [
        rec("session_meta", {"id": "s", "originator": "codex_cli_rs", "source": "cli"}),
        rec("event_msg", {"type": "user_message", "message": "Run the tests", "kind": "plain"}),
        rec(
            "response_item",
            {"type": "function_call", "name": "shell", "arguments": json.dumps(call)},
        ),
        rec(
            "response_item",
            {
                "type": "function_call_output",
                "output": json.dumps(
                    {"output": "FAILED test_x - assert 1 == 2", "metadata": {"exit_code": 1}}
                ),
            },
        ),
        rec(
            "response_item",
            {
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": "Fixed."}],
            },
        ),
    ]
    path = tmp_path / "rollout.jsonl"
    path.write_text("\n".join(lines) + "\n")
    c = condense(path, "codex")
    assert c.lines[0] == "[person] Run the tests"
    assert c.lines[1] == '[tool call] shell(command="bash -lc pytest -q", workdir="/repo")'
    assert c.lines[2] == "[tool error] FAILED test_x - assert 1 == 2"
    assert c.lines[3] == "[assistant] Fixed."


def test_the_section_marks_its_lines_as_no_ones_but_the_transcripts(tmp_path):
    path = _claude(tmp_path / "s.jsonl", [("user", "Ship it."), _use("Bash", {"command": "ls"})])
    c = condense(path, "claude")
    text, codes = section(c, source_name="s.jsonl", alone=True)
    lines = text.split("\n")
    assert len(lines) == len(codes)
    assert lines[0].startswith("# Reflect slice of s.jsonl")
    assert codes[lines.index("[person] Ship it.")] == "p"
    assert all(code == "-" for line, code in zip(lines, codes, strict=True) if line[:1] in "#")
