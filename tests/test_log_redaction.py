"""Log lines are secret-redacted (hardening item 15): ``hook-errors.log`` and ``drain.log``.

A transcript path can hold a token (a session dir named after one, a pasted URL), an error
message can quote a payload, a traceback a connection string; the logs are kept for weeks.
"""

from __future__ import annotations

import json
import logging
import os
import stat
import subprocess

import structlog
from support import BIN

from reflect_jobs import hook
from reflect_jobs.logging import configure_logging

GH = "ghp_16C7e42F292c6912E7710c838347Ae178B4a"
AWS = "AKIAIOSFODNN7EXAMPLE"
PG = "s3cr3tPa55"


def test_hook_errors_log_redacts_a_token_shaped_transcript_path(env, tmp_path):
    missing = tmp_path / f"sessions-{GH}" / f"{AWS}.jsonl"
    payload = json.dumps({"session_id": "s", "transcript_path": str(missing)}).encode()
    previous = os.umask(0o022)
    try:
        proc = subprocess.run(
            [str(BIN / "reflect-jobs-hook"), "claude"],
            input=payload,
            env=dict(env),
            capture_output=True,
            timeout=30,
        )
    finally:
        os.umask(previous)
    assert proc.returncode == 0 and proc.stdout == b""
    log = env.home / "hook-errors.log"
    text = log.read_text()
    (line,) = [json.loads(x) for x in text.splitlines()]
    assert "transcript not found" in line["error"] and "[REDACTED:github_token]" in line["error"]
    assert GH not in text and AWS not in text
    assert stat.S_IMODE(log.stat().st_mode) == 0o600
    assert stat.S_IMODE(env.home.stat().st_mode) == 0o700


def test_log_error_in_process_redacts_and_writes_0600(env, monkeypatch):
    monkeypatch.setenv("REFLECT_HOME", str(env.home))
    previous = os.umask(0o022)
    try:
        hook.log_error(f"OperationalError: cannot open postgres://app:{PG}@db/x with {GH}")
    finally:
        os.umask(previous)
    log = env.home / "hook-errors.log"
    text = log.read_text()
    assert PG not in text and GH not in text and "[REDACTED:url_password]" in text
    assert stat.S_IMODE(log.stat().st_mode) == 0o600


def test_drain_log_lines_and_tracebacks_are_redacted(env, monkeypatch):
    for key, value in (
        ("HF_HUB_DISABLE_PROGRESS_BARS", "1"),
        ("TRANSFORMERS_VERBOSITY", "error"),
        ("TQDM_DISABLE", "1"),
    ):  # configure_logging sets these defaults; monkeypatch restores them
        monkeypatch.setenv(key, value)
    settings = env.settings()
    configure_logging(settings, console=False)
    log = structlog.get_logger("reflect_jobs.test")
    log.info("model call", detail=f"token={GH}", url=f"postgres://app:{PG}@db/x", ids=[AWS])
    try:
        raise RuntimeError(f"connect failed for {AWS}")
    except RuntimeError:
        log.exception("boom")
    logging.getLogger("huey").info("Executing task with args (%r,)", f"/tmp/{GH}/t.jsonl")
    for handler in logging.getLogger("reflect_jobs").handlers:
        handler.flush()
    text = settings.log_path.read_text()
    assert "model call" in text and "RuntimeError" in text and "Executing task" in text
    assert GH not in text and PG not in text and AWS not in text
    assert text.count("[REDACTED:") >= 5
    assert stat.S_IMODE(settings.log_path.stat().st_mode) == 0o600


def test_drain_log_rotates_below_its_size_formatting_each_line_once(tmp_path):
    """The handler formats a record once (it was twice: for the size check and the write)
    and still rolls over before a line would reach ``maxBytes``; every line is whole JSON,
    redacted, in a 0600 file, and the newest line is in ``drain.log``."""
    from reflect_jobs.logging import _PrivateRotatingFileHandler

    path = tmp_path / "drain.log"
    handler = _PrivateRotatingFileHandler(path, maxBytes=1000, backupCount=1, encoding="utf-8")
    formatted: list[str] = []

    class Counting(logging.Formatter):
        def format(self, record: logging.LogRecord) -> str:
            line = json.dumps({"n": record.getMessage(), "token": GH.replace(GH, "[redacted]")})
            formatted.append(line)
            return line

    handler.setFormatter(Counting())
    logger = logging.Logger("rotation-test")
    logger.addHandler(handler)
    for i in range(60):
        logger.info("line %d", i)
    handler.close()
    assert len(formatted) == 60, "one format per record"
    current, backup = path, tmp_path / "drain.log.1"
    assert backup.exists() and current.stat().st_size < 1000 and backup.stat().st_size < 1000
    lines = [json.loads(x) for p in (backup, current) for x in p.read_text().splitlines()]
    assert lines[-1]["n"] == "line 59" and all(GH not in json.dumps(x) for x in lines)
    assert stat.S_IMODE(current.stat().st_mode) == 0o600


def test_a_log_path_that_is_not_a_regular_file_is_never_rolled_over(tmp_path):
    """bpo-45401, kept: a FIFO (as /dev/null would be) is written to, never rotated."""
    from reflect_jobs.logging import _PrivateRotatingFileHandler

    fifo = tmp_path / "drain.log"
    os.mkfifo(fifo, 0o600)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)  # so the handler's open does not block
    try:
        handler = _PrivateRotatingFileHandler(fifo, maxBytes=10, backupCount=1)
        logger = logging.Logger("fifo-test")
        logger.addHandler(handler)
        for i in range(5):
            logger.info("a line longer than ten bytes %d", i)
        handler.close()
        got = os.read(reader, 65536).decode()
    finally:
        os.close(reader)
    assert got.count("a line longer than ten bytes") == 5
    assert stat.S_ISFIFO(fifo.stat().st_mode) and not (tmp_path / "drain.log.1").exists()
