"""Settings: defaults of the original, validation with one clear line, the CLI's exit 2."""

from __future__ import annotations

import pytest

from reflect_jobs.config import SettingsError, load_settings, redact_url


def test_defaults_follow_the_original(tmp_path):
    s = load_settings({"REFLECT_HOME": str(tmp_path), "HOME": str(tmp_path)})
    assert (s.daily_max, s.run_max, s.max_retries, s.timeout_sec) == (20, 3, 3, 300)
    assert (s.timeout_retries, s.invalid_threshold, s.token_max) == (1, 3, 2_000_000)
    assert s.debounce_sec == 600 and s.max_input_chars == 60_000 and s.dedup_threshold == 0.97
    assert s.lease_sec == 360 and s.max_recoveries == 3 and s.retry_base_sec == 60
    assert s.db_url == f"sqlite:///{tmp_path}/reflect.db"
    assert s.queue_url == f"sqlite:///{tmp_path}/queue.db"
    assert s.model_timeout_sec == 210


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("REFLECT_DRAIN_DAILY_MAX", "banana"),
        ("REFLECT_DRAIN_MAX", "-1"),
        ("REFLECT_DRAIN_DRY_RUN", "maybe"),
        ("REFLECT_WRITER_BACKEND", "gpt"),
        ("REFLECT_QUOTA_UTIL_THRESHOLD", "1.5"),
        ("REFLECT_DB_URL", "mysql://x"),
        ("REFLECT_QUEUE_URL", "amqp://x"),
        ("REFLECT_INDEX_VECTORS", "2"),
        ("REFLECT_INDEX_VECTORS", "maybe"),
        ("REFLECT_EMBED_MODEL", "all MiniLM"),
        ("REFLECT_EMBED_MODEL", "owner/name/extra"),
        ("REFLECT_EMBED_MODEL", "/no/such/model\ndir"),
    ],
)
def test_bad_values_name_the_variable(tmp_path, name, value):
    with pytest.raises(SettingsError) as err:
        load_settings({"REFLECT_HOME": str(tmp_path), name: value})
    assert name in str(err.value)
    assert "\n" not in str(err.value)


def test_cli_reports_bad_setting_as_one_line_exit_2(env):
    env["REFLECT_DRAIN_DAILY_MAX"] = "banana"
    proc = env.invoke("status", check=False)
    assert proc.returncode == 2
    assert "REFLECT_DRAIN_DAILY_MAX must be an integer, got 'banana'" in proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.mark.parametrize(
    ("raw", "on"),
    [(None, True), ("", True), ("1", True), ("yes", True), ("0", False), ("off", False)],
)
def test_index_vectors_is_a_boolean_and_empty_keeps_the_default(tmp_path, raw, on):
    environ = {"REFLECT_HOME": str(tmp_path)}
    if raw is not None:
        environ["REFLECT_INDEX_VECTORS"] = raw
    assert load_settings(environ).index_vectors is on


def test_embed_model_is_a_directory_or_a_hub_name(tmp_path):
    def model(value: str, vectors: str = "1") -> str | None:
        environ = {"REFLECT_HOME": str(tmp_path), "HOME": str(tmp_path)}
        return load_settings(
            {**environ, "REFLECT_EMBED_MODEL": value, "REFLECT_INDEX_VECTORS": vectors}
        ).embed_model

    (tmp_path / "minilm").mkdir()
    assert model("") is None
    assert model("sentence-transformers/all-MiniLM-L6-v2") == (
        "sentence-transformers/all-MiniLM-L6-v2"
    )
    assert model("all-MiniLM-L6-v2") == "all-MiniLM-L6-v2"
    assert model(f" {tmp_path}/minilm ") == f"{tmp_path}/minilm"
    with pytest.raises(SettingsError, match="no directory at"):
        model(str(tmp_path / "gone"))
    # With the vector index off the model is never loaded: a stale path is not an error.
    assert model(str(tmp_path / "gone"), vectors="0") == str(tmp_path / "gone")


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        (
            {"REFLECT_INDEX_VECTORS": "2"},
            "REFLECT_INDEX_VECTORS must be 0/1 (or true/false), got '2'",
        ),
        ({"REFLECT_EMBED_MODEL": "two words"}, "REFLECT_EMBED_MODEL must be a model directory"),
        (
            {"REFLECT_EMBED_MODEL": "/no/such/model", "REFLECT_INDEX_VECTORS": "1"},
            "REFLECT_EMBED_MODEL must be a model directory or a hub model name; no directory at "
            "'/no/such/model'",
        ),
    ],
)
@pytest.mark.parametrize("command", [("search", "anything"), ("reindex",), ("status",)])
def test_cli_reports_a_bad_index_setting_as_one_line_exit_2(env, bad, message, command):
    """These two used to be read from os.environ deep in the index code: a bad value was
    silently taken as "on" (or failed at model load in a worker); now every command refuses
    it up front, as for every other setting."""
    env.update(bad)
    proc = env.invoke(*command, check=False)
    assert proc.returncode == 2, proc
    assert "Traceback" not in proc.stderr
    named = [line for line in proc.stderr.splitlines() if next(iter(bad)) in line]
    assert len(named) == 1 and named[0].startswith("Error: ") and message in named[0], proc.stderr


def test_short_model_timeout_below_150():
    s = load_settings({"REFLECT_HOME": "/tmp/x", "REFLECT_DRAIN_TIMEOUT": "120"})
    assert s.model_timeout_sec == 60 and s.lease_sec == 180


def test_redact_url_hides_password():
    assert redact_url("postgresql://bob:s3cret@db:5432/x") == "postgresql://bob:***@db:5432/x"
    assert redact_url("redis://127.0.0.1:6379/0") == "redis://127.0.0.1:6379/0"
    assert (
        redact_url("postgresql://db/x?sslmode=require&password=hunter2")
        == "postgresql://db/x?sslmode=require&password=***"
    )


def test_debounce_zero_is_accepted(tmp_path):
    s = load_settings({"REFLECT_HOME": str(tmp_path), "REFLECT_DRAIN_DEBOUNCE_SEC": "0"})
    assert s.debounce_sec == 0
    with pytest.raises(SettingsError, match="REFLECT_DRAIN_DEBOUNCE_SEC"):
        load_settings({"REFLECT_HOME": str(tmp_path), "REFLECT_DRAIN_DEBOUNCE_SEC": "-1"})


def test_status_with_debounce_zero_shows_no_run_window(env):
    env["REFLECT_DRAIN_DEBOUNCE_SEC"] = "0"
    proc = env.invoke("status", "--json")
    import json

    assert json.loads(proc.stdout)["run_window"]["limit"] is None
    assert "no run window" in env.invoke("status").stdout
