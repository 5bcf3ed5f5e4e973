"""Small operational fixes: doctor's probe, a retried add's label, the consumer's log.

* ``doctor`` probed ``documents/`` with a file it created and removed, which moved the
  folder's mtime: every later ``search`` warned that the index lagged the notes.
* A ``retry`` of a ``poison_add_failed`` job that then succeeded kept that label.
* Huey's ``consumer.log`` was a plain FileHandler, never rotated; during a Redis outage
  it grew by the connection error's traceback on every poll.
* ``configure_logging`` for a second log path in one process added a second handler to
  the ``huey`` logger instead of replacing the first.
"""

from __future__ import annotations

import logging
import signal
import subprocess

from support import BIN, wait_for, write_claude_transcript

from reflect_jobs.doctor_kb import check_kb
from reflect_jobs.index.maintenance import index_lags, reindex
from reflect_jobs.ledger import admin


def test_doctor_leaves_the_index_current(env):
    s = env.settings()
    reindex(s.kb_path, vectors=False)
    assert not index_lags(s.kb_path)
    check = check_kb(s)
    assert check["ok"], check
    assert not index_lags(s.kb_path), "the probe moved documents/'s mtime"


def test_a_retried_poison_add_failed_job_that_succeeds_is_ok(env, tmp_path):
    t = write_claude_transcript(tmp_path / "t.jsonl", ["No, always pin the base image digest."])
    env["REFLECT_DRAIN_MAX_RETRIES"] = "1"
    env.kb.mkdir(parents=True)
    (env.kb / "documents").write_text("not a folder")  # the note write fails with an OSError
    job_id = env.invoke("enqueue", str(t)).stdout.strip()
    env.invoke("drain", "--until-idle", "--max-seconds", "60")
    (job,) = admin.list_jobs(env.settings().db_url)
    assert (job["state"], job["outcome"]) == ("poisoned", "poison_add_failed"), job
    (env.kb / "documents").unlink()
    env.invoke("retry", job_id)
    env.invoke("drain", "--until-idle", "--max-seconds", "60")
    (job,) = admin.list_jobs(env.settings().db_url)
    assert (job["state"], job["outcome"]) == ("done", "ok"), job


def test_the_consumer_log_rotates_during_a_redis_outage(env):
    env.update(REFLECT_QUEUE_URL="redis://127.0.0.1:9/0", REFLECT_DRAIN_LOG_MAX_BYTES="4096")
    worker = subprocess.Popen(
        [str(BIN / "reflect-jobs"), "worker", "-w", "1"],
        env=dict(env),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for((env.home / "consumer.log.1").exists, timeout=60, what="consumer.log rotated")
    finally:
        worker.send_signal(signal.SIGTERM)
        try:
            worker.wait(20)
        except subprocess.TimeoutExpired:
            worker.kill()
            worker.wait()
    assert (env.home / "consumer.log").stat().st_size <= 4096 + 4096  # one record past


def test_a_second_log_configuration_replaces_the_huey_handler(env, tmp_path, monkeypatch):
    from reflect_jobs.config import load_settings
    from reflect_jobs.logging import configure_logging

    for name in ("HF_HUB_DISABLE_PROGRESS_BARS", "TRANSFORMERS_VERBOSITY", "TQDM_DISABLE"):
        monkeypatch.setenv(name, "1")  # configure_logging sets these defaults
    huey_logger = logging.getLogger("huey")
    before = list(huey_logger.handlers)
    try:
        for home in ("a", "b"):
            configure_logging(load_settings(dict(env, REFLECT_HOME=str(tmp_path / home))))
        files = [
            h.baseFilename
            for h in huey_logger.handlers
            if isinstance(h, logging.FileHandler) and str(tmp_path) in h.baseFilename
        ]
        assert files == [str(tmp_path / "b" / "drain.log")]
    finally:
        for h in list(huey_logger.handlers):
            if h not in before:
                huey_logger.removeHandler(h)
                h.close()
