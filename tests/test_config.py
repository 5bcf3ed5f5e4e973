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
    ],
)
def test_bad_values_name_the_variable(tmp_path, name, value):
    with pytest.raises(SettingsError) as err:
        load_settings({"REFLECT_HOME": str(tmp_path), name: value})
    assert name in str(err.value)
    assert "\n" not in str(err.value)


def test_cli_reports_bad_setting_as_one_line_exit_2(env):
    env["REFLECT_DRAIN_DAILY_MAX"] = "banana"
    proc = env.cli("status", check=False)
    assert proc.returncode == 2
    assert "REFLECT_DRAIN_DAILY_MAX must be an integer, got 'banana'" in proc.stderr
    assert "Traceback" not in proc.stderr


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
