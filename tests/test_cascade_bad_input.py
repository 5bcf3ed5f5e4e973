"""Bad and huge input through read_transcript + prepare (SPEC-drain §9.4, §10 B9)."""

from __future__ import annotations

import json
import os
import random
import tracemalloc
from pathlib import Path

import pytest

from reflect_jobs.cascade import EmptyLedger, prepare
from reflect_jobs.transcripts import UnreadableTranscript, read_transcript


def make_big_transcript(path: Path, size: int) -> None:
    """A Claude Code transcript of ``size`` bytes: text turns, tool traffic, a final correction."""
    rng = random.Random(7)
    words = [
        "alpha",
        "beta",
        "gamma",
        "delta",
        "config",
        "module",
        "worker",
        "queue",
        "index",
        "retry",
    ]
    tool_blob = "".join(rng.choice("abcdef0123456789") for _ in range(16_000))
    with path.open("w") as fh:
        written = 0
        i = 0
        while written < size:
            i += 1
            text = " ".join(rng.choice(words) for _ in range(400))
            rec = {
                "type": "assistant",
                "message": {
                    "role": "assistant",
                    "content": [
                        {"type": "text", "text": f"step {i}: {text}"},
                        {
                            "type": "tool_use",
                            "id": f"t{i}",
                            "name": "Bash",
                            "input": {"command": "ls"},
                        },
                    ],
                },
            }
            res = {
                "type": "user",
                "message": {
                    "role": "user",
                    "content": [
                        {"type": "tool_result", "tool_use_id": f"t{i}", "content": tool_blob},
                    ],
                },
            }
            chunk = json.dumps(rec) + "\n" + json.dumps(res) + "\n"
            fh.write(chunk)
            written += len(chunk)
        last = {
            "type": "user",
            "message": {
                "role": "user",
                "content": "No, never write to the shared tmp dir; the root cause was FINAL-BUG-42.",
            },
        }
        fh.write(json.dumps(last) + "\n")


def test_50mb_transcript_bounded_memory_and_tail_reaches_slice(tmp_path: Path) -> None:
    path = tmp_path / "huge.jsonl"
    make_big_transcript(path, 50 * 1024 * 1024)
    size = path.stat().st_size
    assert size >= 50 * 1024 * 1024
    tracemalloc.start()
    try:
        t = read_transcript(path)
        out = prepare(t, EmptyLedger(), source_name=str(path))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < size / 4, f"peak {peak} for a {size}-byte file"
    assert t.dropped_chars > 0
    assert out.action == "reflect"
    assert "FINAL-BUG-42" in out.slice_text
    assert len(out.slice_text) <= 60_000


@pytest.mark.parametrize(
    "content",
    [b"", os.urandom(4096), b'{"type": "user", "message": {"role": "us', b"[1]\n[2]\n"],
    ids=["empty", "binary", "truncated-only", "wrong-shape"],
)
def test_unusable_files_raise_unreadable(tmp_path: Path, content: bytes) -> None:
    p = tmp_path / "bad.jsonl"
    p.write_bytes(content)
    with pytest.raises(UnreadableTranscript) as info:
        read_transcript(p)
    assert str(info.value)


def test_mostly_garbage_with_one_good_line_still_reflects(tmp_path: Path) -> None:
    good = json.dumps({"type": "user", "message": {"role": "user", "content": "Never use var."}})
    p = tmp_path / "mixed.jsonl"
    p.write_bytes(os.urandom(2048).replace(b"\n", b" ") + b"\n" + good.encode() + b'\n{"trunc')
    t = read_transcript(p)
    assert t.malformed_lines == 2
    out = prepare(t, EmptyLedger(), source_name="mixed.jsonl")
    assert out.action == "reflect" and "Never use var." in out.slice_text
