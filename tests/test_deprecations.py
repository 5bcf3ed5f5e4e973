"""Dead variables are ignored with a warning until their removal date (docs/DEPRECATIONS.md).

``REFLECT_DRAIN_CASCADE`` was parsed and never read; ``REFLECT_DRAIN_WRITER=agentic`` paid
for a 16-turn tool-free call and discarded it; ``REFLECT_DRAIN_MAX_TURNS`` only bounded that
writer. They are in ``settings_spec.DEPRECATED`` with the variables the settings tiers fixed
(one table, one warning path: ``config.resolve(...).warnings``).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from reflect_jobs import settings_spec as spec
from reflect_jobs.config import load_settings, resolve
from reflect_jobs.writer.selection import make_backend

ROOT = Path(__file__).resolve().parent.parent
DEAD = ("REFLECT_DRAIN_CASCADE", "REFLECT_DRAIN_WRITER", "REFLECT_DRAIN_MAX_TURNS")


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("REFLECT_DRAIN_CASCADE", "0"),
        ("REFLECT_DRAIN_WRITER", "agentic"),
        ("REFLECT_DRAIN_WRITER", "chatty"),  # used to be a SettingsError; now just ignored
        ("REFLECT_DRAIN_MAX_TURNS", "40"),
    ],
)
def test_a_dead_variable_loads_with_a_warning_that_names_it(tmp_path, name, value):
    env = {"REFLECT_HOME": str(tmp_path), "XDG_CONFIG_HOME": str(tmp_path / "xdg"), name: value}
    resolved = resolve(env)
    (warning,) = [w for w in resolved.warnings if name in w]
    assert "is deprecated" in warning and "unset it" in warning
    settings = resolved.settings
    assert not hasattr(settings, "writer_mode") and not hasattr(settings, "cascade")
    assert not hasattr(settings, "max_turns")


def test_no_warning_when_none_is_set(tmp_path):
    env = {"REFLECT_HOME": str(tmp_path), "XDG_CONFIG_HOME": str(tmp_path / "xdg")}
    assert resolve(env).warnings == ()


def test_the_writer_is_always_one_tool_free_turn(tmp_path):
    """With ``REFLECT_DRAIN_WRITER=agentic`` set, the claude backend still makes one turn."""
    env = {
        "REFLECT_HOME": str(tmp_path),
        "XDG_CONFIG_HOME": str(tmp_path / "xdg"),
        "REFLECT_DRAIN_WRITER": "agentic",
    }
    s = load_settings(env)
    backend = make_backend(
        "claude", claude_bin="claude", model=s.model, cwd=str(tmp_path), drain_timeout=300
    )
    argv = backend.argv("claude")
    assert argv[argv.index("--max-turns") + 1] == "1"
    assert argv[argv.index("--allowedTools") + 1] == ""


def test_the_dead_variables_are_documented():
    text = (ROOT / "docs" / "DEPRECATIONS.md").read_text(encoding="utf-8")
    for name in DEAD:
        assert name in spec.DEPRECATED and spec.DEPRECATED[name][0] is None
        assert f"`{name}`" in text
