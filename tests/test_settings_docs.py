"""The settings table, its documentation and the code agree (one owner for every name).

* every variable the package names is in the table (a setting, a deprecated name or a
  marker): a new ``os.environ["REFLECT_X"]`` somewhere cannot slip past ``reflect-jobs
  config`` and the docs;
* the README documents the user tier, docs/CONFIGURATION.md every tier;
* the deprecations are removed on their date (docs/DEPRECATIONS.md).
"""

from __future__ import annotations

import re
from datetime import date
from pathlib import Path

from reflect_jobs import settings_spec as spec

ROOT = Path(__file__).resolve().parents[1]
VARIABLE = re.compile(r"""["'](REFLECT_[A-Z0-9_]+|GLOBAL_LEARNINGS_PATH)["']""")


def test_every_variable_the_code_names_is_in_the_table():
    known = set(spec.BY_VAR) | set(spec.DEPRECATED) | {v for v, _ in spec.MARKERS}
    named: dict[str, str] = {}
    for path in (ROOT / "reflect_jobs").rglob("*.py"):
        for m in VARIABLE.finditer(path.read_text(encoding="utf-8")):
            named.setdefault(m.group(1), str(path.relative_to(ROOT)))
    strays = {v: where for v, where in named.items() if v not in known}
    assert strays == {}, "a variable outside settings_spec: add it to the table (or drop it)"


def test_the_readme_documents_the_user_tier_and_configuration_md_every_tier():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    conf = (ROOT / "docs" / "CONFIGURATION.md").read_text(encoding="utf-8")
    for name, var, tier, *_ in spec.SPECS:
        assert f"`{name}`" in conf, name
        if var:
            assert f"`{var}`" in conf, var
        if tier == spec.USER:
            assert (var or name) in readme, f"README does not name the user setting {var or name}"
    for name in spec.INTERNAL:
        assert f"`{name}`" in conf
    for var in spec.DEPRECATED:
        assert f"`{var}`" in conf and var in (ROOT / "docs" / "DEPRECATIONS.md").read_text()
    for var, _ in spec.MARKERS:
        assert f"`{var}`" in conf


def test_the_tiers_are_what_the_docs_count():
    users = spec.tier_names(spec.USER)
    assert users == [
        "home",
        "kb_path",
        "writer_backend",
        "model",
        "daily_max",
        "recall_on_prompt",
        "disabled",
        "openai_base_url",
        "openai_api_key",
        "db_url",
        "queue_url",
        "ignore",
    ]
    assert len(spec.tier_names(spec.ADVANCED)) == 49 and len(spec.INTERNAL) == 7


def test_deprecated_variables_are_removed_on_schedule():
    assert date.today() < date(2027, 1, 1), (
        "settings_spec.DEPRECATED is past its date: remove it as docs/DEPRECATIONS.md says"
    )
