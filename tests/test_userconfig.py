"""The user config file: read as tomllib reads it, under the environment, by every entry point.

What a person sees is checked: ``reflect-jobs config`` (each value and its source), the one
line a bad file or value gets, and the hook — which must keep capturing on defaults when the
file is broken, and say so in ``hook-errors.log``.
"""

from __future__ import annotations

import json
import subprocess
import tomllib
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st
from support import BIN, write_claude_transcript

from reflect_jobs import settings_spec, userconfig
from reflect_jobs.cli import main
from reflect_jobs.config import SettingsError, load_settings, resolve


def _write(xdg: Path, text: str) -> Path:
    path = xdg / "reflect-jobs" / "config.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def _tomllib(text: str) -> object:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        return "error"


def _ours(text: str) -> object:
    try:
        return userconfig.parse(text)
    except userconfig.ConfigSyntaxError:
        return "error"


CASES = [
    "home = \"/x\"\nkb_path = '/y'  # a comment\n",
    "a = 1\nb = -2\nc = 0.5\nd = true\ne = false\n",
    'ignore = ["a", "b",]\nempty = []\n',
    'a = "tab\\t and \\"quote\\" and \\\\"',
    'a = "\\u00e9"',
    'a = "\\/"',
    "a = 01",
    "a = 1_000",
    "a = 1e3",
    "a = .5",
    "a = 5.",
    "[table]\na = 1",
    "a.b = 1",
    'a = "x" trailing',
    "a = 1\na = 2",
    'a = [1, "x"]',
    "a = [\n  1,\n]",
    "a = '''x'''",
    'a = """x"""',
    'a = "unterminated',
    "a =",
    "= 1",
    "# only a comment\n\n",
    "a = 1979-05-27",
    "a = inf",
    'a = "\x01"',
    "a = 1 # \x7f",
    "a = +0\nb = -0.0",
    "a = [[1], [2]]",
    "a = {b = 1}",
]


@pytest.mark.parametrize("text", CASES)
def test_the_fast_reader_answers_what_tomllib_answers(text):
    assert _ours(text) == _tomllib(text)


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("ab =\n\"'#[],.-+0159tfrue\\x_{}")), max_size=40))
def test_the_fast_reader_never_disagrees_with_tomllib(text):
    assert _ours(text) == _tomllib(text)


def test_unknown_keys_and_bad_shapes_are_warnings_naming_the_file(tmp_path):
    path = _write(tmp_path, 'home = "/h"\nbogus = 1\nmodel = ["a"]\n[writer]\nx = 1\n')
    loaded = userconfig.load({"XDG_CONFIG_HOME": str(tmp_path)})
    assert loaded.env == {"REFLECT_HOME": "/h"}
    assert loaded.problems == (
        f"{path}: unknown key 'bogus' (ignored; `reflect-jobs config` lists the keys)",
        f"{path}: model must be a single value, got ['a'] (ignored)",
        f"{path}: unknown key 'writer' (ignored; `reflect-jobs config` lists the keys)",
    )


def test_a_file_that_is_not_toml_is_one_line_and_the_defaults_are_used(tmp_path):
    path = _write(tmp_path, 'home = "/h\n')
    r = resolve({"XDG_CONFIG_HOME": str(tmp_path), "HOME": str(tmp_path)})
    (line,) = r.warnings
    assert line.startswith(f"{path} is not valid TOML (") and line.endswith("; using defaults")
    assert "\n" not in line and r.settings.home == tmp_path / ".reflect"


def test_the_environment_wins_and_a_blank_variable_takes_the_file(tmp_path):
    _write(tmp_path, 'home = "/from-file"\ndaily_max = 7\nrecall_on_prompt = true\n')
    base = {"XDG_CONFIG_HOME": str(tmp_path), "HOME": str(tmp_path)}
    r = resolve({**base, "REFLECT_HOME": "/from-env", "REFLECT_DRAIN_DAILY_MAX": " "})
    s = r.settings
    assert (str(s.home), s.daily_max, s.recall_on_prompt) == ("/from-env", 7, True)
    assert r.sources["home"] == "environment"
    assert r.sources["daily_max"] == r.sources["recall_on_prompt"] == "config file"
    assert r.sources["model"] == "default"
    assert s.db_url == "sqlite:////from-env/reflect.db", "derived from the winning home"


def test_a_bad_value_in_the_file_names_the_file_and_the_key(tmp_path):
    path = _write(tmp_path, 'daily_max = "lots"\n')
    with pytest.raises(SettingsError) as err:
        load_settings({"XDG_CONFIG_HOME": str(tmp_path)})
    assert str(err.value) == f"daily_max in {path} must be an integer, got 'lots'"


def test_deprecated_variables_warn_and_only_the_home_alias_is_honoured(tmp_path):
    r = resolve({"HOME": str(tmp_path), "REFLECT_WORKERS": "9", "REFLECT_STATE_DIR": "/old"})
    assert r.settings.workers == 2 and str(r.settings.home) == "/old"
    assert r.sources["home"] == "environment (REFLECT_STATE_DIR)"
    assert sorted(w.split(" ")[0] for w in r.warnings) == ["REFLECT_STATE_DIR", "REFLECT_WORKERS"]


def test_updated_text_keeps_comments_and_a_persons_keys(tmp_path):
    old = '# mine\nmodel = "opus"  # chosen by hand\nboundary_cmd = "check"\n[later]\nx = 1\n'
    new = userconfig.updated_text(old, {"model": "haiku", "home": "/h", "openai_base_url": None})
    assert new == (
        '# mine\nmodel = "haiku"\nboundary_cmd = "check"\nhome = "/h"\n\n[later]\nx = 1\n'
    )
    assert tomllib.loads(new)["home"] == "/h"
    fresh = userconfig.updated_text("", {"home": 'a "quoted" \\ path', "ignore": []})
    assert tomllib.loads(fresh) == {"home": 'a "quoted" \\ path', "ignore": []}


def test_config_command_prints_values_and_sources(tmp_path):
    _write(tmp_path, 'model = "opus"\nbogus = 1\n')
    env = {
        "XDG_CONFIG_HOME": str(tmp_path),
        "HOME": str(tmp_path),
        "REFLECT_DRAIN_DAILY_MAX": "9",
        "REFLECT_OPENAI_API_KEY": "sk-secret-value",
    }
    out = CliRunner().invoke(main, ["config", "--json"], env=env)
    assert out.exit_code == 0, out.output
    data = json.loads(out.stdout)
    rows = {r["name"]: r for r in data["settings"]}
    assert (rows["model"]["value"], rows["model"]["source"]) == ("opus", "config file")
    assert (rows["daily_max"]["value"], rows["daily_max"]["source"]) == (9, "environment")
    assert rows["openai_api_key"]["value"] == "***" and "sk-secret" not in out.output
    assert rows["home"]["source"] == "default" and rows["ignore"]["variable"] is None
    assert {r["tier"] for r in data["settings"]} == {"user", "advanced"}
    assert data["warnings"] == [
        f"{data['file']}: unknown key 'bogus' (ignored; `reflect-jobs config` lists the keys)"
    ]
    text = CliRunner().invoke(main, ["config", "--all"], env=env)
    assert "maintain_every" in text.stdout and "fixed" in text.stdout


def test_the_cli_reports_a_bad_value_as_one_line_with_the_fix(tmp_path):
    env = {"XDG_CONFIG_HOME": str(tmp_path), "REFLECT_DRAIN_DAILY_MAX": "banana"}
    out = CliRunner().invoke(main, ["status"], env=env)
    assert out.exit_code == 2
    assert out.output == (
        "Error: REFLECT_DRAIN_DAILY_MAX must be an integer, got 'banana'; "
        "fix: unset REFLECT_DRAIN_DAILY_MAX or give it a valid value\n"
    )


def test_every_setting_has_a_field_and_every_variable_one_owner():
    from dataclasses import fields

    from reflect_jobs.config import Settings

    names = {f.name for f in fields(Settings)}
    assert {row[0] for row in settings_spec.SPECS} <= names
    assert set(settings_spec.INTERNAL) <= names
    variables = [row[1] for row in settings_spec.SPECS if row[1]]
    assert len(variables) == len(set(variables))
    assert not set(variables) & set(settings_spec.DEPRECATED)


def test_the_hook_keeps_capturing_on_defaults_with_a_broken_file_and_says_so(env, tmp_path):
    path = _write(tmp_path / "xdg", "home = [\n")
    t = write_claude_transcript(tmp_path / "t.jsonl", ["No, do not do that."])
    payload = {"session_id": "s1", "transcript_path": str(t), "hook_event_name": "Stop"}
    proc = subprocess.run(
        [str(BIN / "reflect-jobs-hook"), "claude"],
        input=json.dumps(payload),
        env=dict(env),
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert proc.returncode == 0 and proc.stdout == proc.stderr == ""
    assert len(list((env.home / "spool").glob("*.json"))) == 1, "still captured"
    (line,) = (env.home / "hook-errors.log").read_text().splitlines()
    assert json.loads(line)["error"].startswith(f"config: {path} is not valid TOML")
