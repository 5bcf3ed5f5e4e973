"""The hook's stdlib enqueue writes exactly what Huey reads — checked against real Huey."""

from __future__ import annotations

import pickle
import sqlite3

import pytest
from huey import RedisHuey, SqliteHuey
from huey.registry import Message
from huey.storage import SqliteStorage

from reflect_jobs import fastqueue


def test_message_unpickles_to_hueys_message():
    data = fastqueue.encode_message(
        "reflect_jobs.tasks.capture", ("claude", "s1", "/t.jsonl", "Stop", 1.5)
    )
    msg = pickle.loads(data)
    assert isinstance(msg, Message)
    assert msg.name == "reflect_jobs.tasks.capture"
    assert msg.args == ("claude", "s1", "/t.jsonl", "Stop", 1.5) and msg.kwargs == {}
    assert msg.eta is None and msg.retries == 0 and msg.on_complete is None
    assert len(msg.id) == 36 and msg.id[14] == "4"


def test_ddl_matches_installed_huey():
    assert SqliteStorage.table_task == fastqueue.TASK_TABLE_DDL
    assert fastqueue.TASK_INDEX_DDL.split() == SqliteStorage.index_task.split()


def _huey_with_task(path):
    huey = SqliteHuey(fastqueue.QUEUE_NAME, filename=str(path), results=False)
    seen = []

    def capture(*args):
        seen.append(args)

    capture.__module__ = "reflect_jobs.tasks"  # register under the production task name
    huey.task()(capture)
    return huey, seen


def test_huey_executes_a_fast_enqueued_message_on_a_fresh_file(tmp_path):
    path = tmp_path / "queue.db"
    fastqueue.enqueue(
        f"sqlite:///{path}", "reflect_jobs.tasks.capture", ("claude", "s", "/p", "Stop", 2.0)
    )
    assert sqlite3.connect(path).execute("select count(*) from task").fetchone() == (1,)
    huey, seen = _huey_with_task(path)
    task = huey.dequeue()
    huey.execute(task)
    assert seen == [("claude", "s", "/p", "Stop", 2.0)]


@pytest.mark.services
def test_redis_push_is_consumed_by_redis_huey():
    import redis

    name = "reflectfq"
    r = redis.Redis.from_url("redis://127.0.0.1:6379/0")
    r.delete(f"huey.redis.{name}")
    huey = RedisHuey(name, url="redis://127.0.0.1:6379/0", results=False)
    seen = []

    def capture(*args):
        seen.append(args)

    capture.__module__ = "reflect_jobs.tasks"
    huey.task()(capture)
    fastqueue.push_redis(
        "redis://127.0.0.1:6379/0",
        fastqueue.encode_message("reflect_jobs.tasks.capture", ("codex", "s9", "/q", "Stop", 3.0)),
        name=name,
    )
    huey.execute(huey.dequeue())
    assert seen == [("codex", "s9", "/q", "Stop", 3.0)]


def test_unsupported_url_is_an_error():
    with pytest.raises(ValueError):
        fastqueue.enqueue("amqp://x", "t", ())


@pytest.mark.parametrize(
    "segments",
    [
        [b"+OK\r\n+OK\r\n:3\r\n"],
        [b"+O", b"K\r\n+OK\r", b"\n:3\r\n"],
        [b"+OK\r\n", b"+OK\r\n:3\r\n"],
    ],
)
def test_pipelined_replies_are_read_however_they_arrive(segments):
    import socket
    import time

    ours, theirs = socket.socketpair()
    with ours, theirs:
        for seg in segments:
            theirs.sendall(seg)
        lines = fastqueue.read_replies(ours, 3, time.monotonic() + 2)
    assert lines == [b"+OK", b"+OK", b":3"]


def test_an_error_reply_and_a_missing_reply_are_one_line_errors():
    import socket
    import time

    ours, theirs = socket.socketpair()
    with ours, theirs:
        theirs.sendall(b"-WRONGPASS invalid password\r\n-NOAUTH x\r\n-NOAUTH x\r\n")
        with pytest.raises(ConnectionError, match="WRONGPASS"):
            fastqueue.read_replies(ours, 3, time.monotonic() + 2)
    ours, theirs = socket.socketpair()
    with ours, theirs:
        theirs.sendall(b"+OK\r\n")
        with pytest.raises(TimeoutError):
            fastqueue.read_replies(ours, 2, time.monotonic() + 0.05)
