"""The hook's Redis push on URLs with a password and a db other than 0 (real servers).

The reply reader used to read both pipelined replies (``AUTH``/``SELECT`` then ``LPUSH``) in
one ``recv`` and then wait for a second segment that never came: every such hook took the
3 s timeout and logged ``TimeoutError``. These tests push through real servers — the
shared one on db ``RJ_TEST_REDIS_DB`` and a private ``redis-server --requirepass`` started
on a free port — and check the message lands in the right db with no error.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from support import BIN, private_redis, transcripts_dir

from reflect_jobs import fastqueue

pytestmark = pytest.mark.services

REDIS_DB = int(os.environ.get("RJ_TEST_REDIS_DB", "11"))
KEY = f"huey.redis.{fastqueue.QUEUE_NAME}"


def _message() -> bytes:
    return fastqueue.encode_message(
        "reflect_jobs.tasks.capture", ("claude", "s", "/t.jsonl", "Stop", 1.0)
    )


def test_push_to_a_db_other_than_0_gets_both_replies():
    import redis

    assert REDIS_DB != 0
    client = redis.Redis.from_url(f"redis://127.0.0.1:6379/{REDIS_DB}")
    client.delete(KEY)
    # Before the fix this raised TimeoutError: SELECT's and LPUSH's replies came in one read.
    fastqueue.push_redis(f"redis://127.0.0.1:6379/{REDIS_DB}", _message())
    assert client.llen(KEY) == 1
    client.delete(KEY)


def test_push_with_password_and_db(tmp_path: Path):
    import redis

    with private_redis(tmp_path / "redis", password="s3cr:et") as port:
        client = redis.Redis(host="127.0.0.1", port=port, password="s3cr:et", db=5)
        fastqueue.push_redis(f"redis://:s3cr%3Aet@127.0.0.1:{port}/5", _message())
        fastqueue.push_redis(f"redis://default:s3cr%3Aet@127.0.0.1:{port}/5", _message())
        assert client.llen(KEY) == 2
        assert redis.Redis(host="127.0.0.1", port=port, password="s3cr:et", db=0).llen(KEY) == 0
        with pytest.raises(ConnectionError, match="redis error"):  # wrong password: one line
            fastqueue.push_redis(f"redis://:wrong@127.0.0.1:{port}/5", _message())
        assert client.llen(KEY) == 2
        client.close()


def test_hook_on_a_password_redis_url_pushes_without_error(env, tmp_path: Path):
    import redis

    t = transcripts_dir() / "hello-world-script.jsonl"
    with private_redis(tmp_path / "redis", password="hunter2") as port:
        env["REFLECT_QUEUE_URL"] = f"redis://:hunter2@127.0.0.1:{port}/7"
        proc = subprocess.run(
            [str(BIN / "reflect-jobs-hook"), "claude"],
            input=json.dumps({"session_id": "r1", "transcript_path": str(t)}).encode(),
            env=dict(env),
            capture_output=True,
            timeout=30,  # a hang guard; latency is bench/bench_hook.py's job
        )
        assert proc.returncode == 0 and proc.stdout == b""
        errors = env.home / "hook-errors.log"
        assert not errors.exists(), errors.read_text()
        client = redis.Redis(host="127.0.0.1", port=port, password="hunter2", db=7)
        assert client.llen(KEY) == 1
        client.close()
