"""Dead variables are ignored with a warning until their removal date (docs/DEPRECATIONS.md)."""

from __future__ import annotations

import datetime as dt
import warnings
from pathlib import Path

import pytest

from reflect_jobs import config
from reflect_jobs.config import DEPRECATED_REMOVE_AFTER, DEPRECATED_VARIABLES, load_settings
from reflect_jobs.writer.selection import make_backend

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("REFLECT_DRAIN_CASCADE", "0"),
        ("REFLECT_DRAIN_WRITER", "agentic"),
        ("REFLECT_DRAIN_WRITER", "chatty"),  # used to be a SettingsError; now just ignored
        ("REFLECT_DRAIN_MAX_TURNS", "40"),
    ],
)
def test_a_deprecated_variable_loads_with_a_warning_that_names_it(tmp_path, name, value):
    env = {"REFLECT_HOME": str(tmp_path), name: value}
    with pytest.warns(FutureWarning, match=f"{name} is deprecated and ignored") as caught:
        settings = load_settings(env)
    assert "unset it" in str(caught[0].message)
    assert not hasattr(settings, "writer_mode") and not hasattr(settings, "cascade")
    assert not hasattr(settings, "max_turns")


def test_no_warning_when_none_is_set(tmp_path):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        load_settings({"REFLECT_HOME": str(tmp_path)})


def test_the_writer_is_always_one_tool_free_turn(tmp_path):
    """With ``REFLECT_DRAIN_WRITER=agentic`` set, the claude backend still makes one turn."""
    env = {"REFLECT_HOME": str(tmp_path), "REFLECT_DRAIN_WRITER": "agentic"}
    with pytest.warns(FutureWarning):
        s = load_settings(env)
    backend = make_backend(
        "claude", claude_bin="claude", model=s.model, cwd=str(tmp_path), drain_timeout=300
    )
    argv = backend.argv("claude")
    assert argv[argv.index("--max-turns") + 1] == "1"
    assert argv[argv.index("--allowedTools") + 1] == ""


def test_deprecated_variables_are_dropped_on_schedule():
    """Fails once the date has passed: remove them as docs/DEPRECATIONS.md says."""
    assert dt.date.today() <= DEPRECATED_REMOVE_AFTER, (
        f"REFLECT_DRAIN_CASCADE/WRITER/MAX_TURNS were due for removal after "
        f"{DEPRECATED_REMOVE_AFTER}: delete config.DEPRECATED_VARIABLES (docs/DEPRECATIONS.md)"
    )
    text = (ROOT / "docs" / "DEPRECATIONS.md").read_text(encoding="utf-8")
    assert DEPRECATED_REMOVE_AFTER.isoformat() in text
    for name in DEPRECATED_VARIABLES:
        assert f"`{name}`" in text
    assert config.deprecations({}) == []
