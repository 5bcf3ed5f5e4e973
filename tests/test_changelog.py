"""The version `reflect-jobs --version` prints has its section in CHANGELOG.md (issue 22.6)."""

from __future__ import annotations

import re
import tomllib

from click.testing import CliRunner
from support import ROOT

import reflect_jobs
from reflect_jobs.cli import main


def test_one_version_everywhere_and_a_changelog_section_for_it() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert project["version"] == reflect_jobs.__version__
    changelog = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    sections = re.findall(r"^## \[(\d+\.\d+\.\d+)\] - (\d{4}-\d{2}-\d{2})$", changelog, re.M)
    assert sections, "Keep a Changelog headings: ## [X.Y.Z] - YYYY-MM-DD"
    assert sections[0][0] == reflect_jobs.__version__, "the newest section is this version"
    assert [s[1] for s in sections] == sorted((s[1] for s in sections), reverse=True)
    assert "## Version policy" in changelog


def test_version_option_prints_the_package_version() -> None:
    out = CliRunner().invoke(main, ["--version"])
    assert out.exit_code == 0 and reflect_jobs.__version__ in out.output, out.output
