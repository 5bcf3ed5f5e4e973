"""Shared fixtures: an isolated REFLECT_HOME/KB per test, real SQLite files, real processes.

Nothing of ours is mocked: subprocess tests run the installed console scripts against the
test's own home directory, with the stub ``claude`` executable from ``tests/stubs``.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from support import STUB_CLAUDE, Env


@pytest.fixture
def env(tmp_path: Path) -> Env:
    base = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("REFLECT_", "STUB_CLAUDE", "GLOBAL_LEARNINGS"))
    }
    e = Env(base)
    e.update(
        REFLECT_HOME=str(tmp_path / "home"),
        GLOBAL_LEARNINGS_PATH=str(tmp_path / "kb"),
        REFLECT_DRAIN_CLAUDE_BIN=str(STUB_CLAUDE),
        REFLECT_WRITER_BACKEND="claude",
        REFLECT_CAPTURE_SETTLE_SEC="0",
        REFLECT_INDEX_VECTORS="0",
        REFLECT_RETRY_BASE_SEC="0",
        STUB_CLAUDE_MODE="ok",
        STUB_CLAUDE_LOG=str(tmp_path / "claude-calls.jsonl"),
        HF_HUB_OFFLINE="1",
        PYTHONDONTWRITEBYTECODE="1",
    )
    return e
