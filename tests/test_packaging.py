"""A regular install works like the checkout: the wheel carries the migrations and templates.

The editable install (``make install``) reads ``alembic/`` and ``ops/`` from the checkout, so
only a real wheel, installed into a fresh venv and run from outside the source tree, proves
that ``pip install .``, ``pipx install`` and ``uv tool install`` give a working tool.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
import tomllib
import zipfile
from pathlib import Path

import pytest
import setuptools
from support import ROOT, STUB_CLAUDE, transcripts_dir

MAPPED = {"reflect_jobs._migrations": "alembic", "reflect_jobs._ops": "ops"}
#: Folders shipped as package data: listed as packages so setuptools does not warn that an
#: importable folder is missing from ``packages`` (each has its own package-data glob).
DATA_PACKAGES = {
    "reflect_jobs._migrations.versions",
    "reflect_jobs._ops.launchd",
    "reflect_jobs._ops.systemd",
    "reflect_jobs.dashboard.static",
}


def _pyproject() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))


def test_every_package_is_listed_and_the_shipped_folders_are_mapped():
    tool = _pyproject()["tool"]["setuptools"]
    found = set(setuptools.find_packages(str(ROOT), include=["reflect_jobs*", "workers*"]))
    expected = found | set(MAPPED) | DATA_PACKAGES
    assert set(tool["packages"]) == expected, "pyproject's package list is stale"
    assert tool["package-dir"] == MAPPED


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> tuple[Path, str]:
    out = tmp_path_factory.mktemp("dist")
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-v", "--no-deps", "--no-build-isolation"]
        + ["--no-index", "-w", str(out), str(ROOT)],
        check=True,
        capture_output=True,
        text=True,
        cwd=out,
    )
    (whl,) = out.glob("reflect_jobs-*.whl")
    return whl, proc.stdout + proc.stderr


@pytest.fixture(scope="module")
def wheel(built) -> Path:
    return built[0]


def test_the_build_emits_no_warning(built):
    """A deprecated licence table or an unlisted data folder makes setuptools warn (and a
    future setuptools fail): the build log must hold no ``Warning``."""
    warnings = [line for line in built[1].splitlines() if "Warning" in line]
    assert warnings == []
    names = set(zipfile.ZipFile(built[0]).namelist())
    assert any(n.endswith("licenses/LICENSE") for n in names)


def test_the_wheel_carries_migrations_and_service_templates(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    versions = sorted(p.name for p in (ROOT / "alembic" / "versions").glob("*.py"))
    assert versions, "no migrations in the checkout"
    for name in versions:
        assert f"reflect_jobs/_migrations/versions/{name}" in names
    assert "reflect_jobs/_migrations/env.py" in names
    assert "reflect_jobs/_ops/systemd/reflect-jobs.service" in names
    assert "reflect_jobs/_ops/launchd/com.reflect-jobs.worker.plist" in names


@pytest.mark.slow
def test_a_wheel_in_a_fresh_venv_migrates_enqueues_and_drains(wheel, tmp_path):
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"), "install"]
        + ["-q", "--no-deps", "--no-index", str(wheel)],
        check=True,
        capture_output=True,
    )
    # The wheel's dependencies come from this venv (no network at test time); a path line in
    # a .pth does not run this venv's editable finder, so reflect_jobs is the wheel's own.
    site = Path(
        subprocess.run(
            [
                str(venv / "bin" / "python"),
                "-c",
                "import sysconfig;print(sysconfig.get_path('purelib'))",
            ],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
    )
    (site / "_deps_from_test_venv.pth").write_text(sysconfig.get_path("purelib") + "\n")
    work = tmp_path / "elsewhere"
    work.mkdir()
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("REFLECT_", "GLOBAL_LEARNINGS"))
    }
    env.update(
        REFLECT_HOME=str(tmp_path / "home"),
        GLOBAL_LEARNINGS_PATH=str(tmp_path / "kb"),
        REFLECT_DRAIN_CLAUDE_BIN=str(STUB_CLAUDE),
        REFLECT_CAPTURE_SETTLE_SEC="0",
        REFLECT_INDEX_VECTORS="0",
        STUB_CLAUDE_MODE="ok",
        STUB_CLAUDE_LOG=str(tmp_path / "claude-calls.jsonl"),
        PYTHONPATH="",
    )

    def cli(*args: str) -> str:
        proc = subprocess.run(
            [str(venv / "bin" / "reflect-jobs"), *args],
            env=env,
            cwd=work,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert proc.returncode == 0, f"{args}: {proc.stdout}\n{proc.stderr}"
        return proc.stdout

    where = subprocess.run(
        [str(venv / "bin" / "python"), "-c", "import reflect_jobs;print(reflect_jobs.__file__)"],
        env=env,
        cwd=work,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert where.startswith(str(site)), where
    out = cli("db", "upgrade")
    assert "revision None" not in out and "(head None)" not in out, out
    job = cli("enqueue", str(transcripts_dir() / "python-to-rust-port.jsonl")).strip()
    cli("drain", "--until-idle", "--max-seconds", "120")
    (row,) = json.loads(cli("jobs", "--json"))
    assert row["id"] == job and row["state"] == "done", row
    assert list((tmp_path / "kb" / "documents").glob("*.md")), "no note written"
    assert "ExecStart=" in cli("install", "service", "--systemd", "--print")
