"""Shared fixtures: an isolated REFLECT_HOME/KB per test, real SQLite files, real processes.

Nothing of ours is mocked: subprocess tests run the installed console scripts against the
test's own home directory, with the stub ``claude`` executable from ``tests/stubs``.
"""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from support import STUB_CLAUDE, Env

CHAOS_DIR = Path(__file__).parent / "chaos"

# No test may read or write the real user config file (~/.config/reflect-jobs/config.toml):
# every process of the session, and every subprocess it starts, looks in an empty one. A test
# of the config file sets its own (the ``env`` fixture gives each test a fresh directory).
os.environ["XDG_CONFIG_HOME"] = tempfile.mkdtemp(prefix="reflect-jobs-xdg-")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Everything under tests/chaos is fault injection: ``-m chaos`` must select all of it
    and ``-m "not chaos"`` none of it, so an unmarked test there is a collection error."""
    unmarked = [
        item.nodeid
        for item in items
        if CHAOS_DIR in Path(str(item.path)).parents and item.get_closest_marker("chaos") is None
    ]
    if unmarked:
        raise pytest.UsageError(
            "tests under tests/chaos must be marked chaos (pytestmark = pytest.mark.chaos): "
            + ", ".join(unmarked)
        )


# Keys set once per process by an import, not by a test: pytest's own, torch's at import
# (OpenMP and inductor defaults) and the tokenizers default our embedder sets before loading
# the model. Whichever test first imports torch would otherwise be blamed for them.
IMPORT_SET_ENV = frozenset(
    {
        "PYTEST_CURRENT_TEST",
        "KMP_DUPLICATE_LIB_OK",
        "KMP_INIT_AT_FORK",
        "TORCHINDUCTOR_CACHE_DIR",
        "TOKENIZERS_PARALLELISM",
        # reflect_jobs.logging.configure_logging's process-wide defaults (setdefault), set
        # by any command run in-process (click's CliRunner) that loads library logging
        "HF_HUB_DISABLE_PROGRESS_BARS",
        "TRANSFORMERS_VERBOSITY",
        "TQDM_DISABLE",
    }
)


@pytest.fixture(autouse=True)
def _restores_process_state() -> Iterator[None]:
    """Fail a test that leaves ``os.environ`` or the working directory changed (use
    ``monkeypatch``), and reset the module-level caches a test may fill in-process: the
    ledger's engines and ``reflect_jobs.tasks`` (settings read at import, ``runtime()``
    cached), so the next test starts from a clean process."""
    environ, cwd = dict(os.environ), os.getcwd()
    had_tasks = "reflect_jobs.tasks" in sys.modules
    yield
    db = sys.modules.get("reflect_jobs.ledger.db")
    if db is not None:
        db.dispose_all()
    if not had_tasks and "reflect_jobs.tasks" in sys.modules:
        tasks = sys.modules.pop("reflect_jobs.tasks")
        tasks.runtime.cache_clear()
        if getattr(sys.modules.get("reflect_jobs"), "tasks", None) is tasks:
            delattr(sys.modules["reflect_jobs"], "tasks")  # else `from . import tasks` reuses it
        sys.modules.pop("workers.consumer", None)
    changed = sorted(
        k
        for k in environ.keys() | os.environ.keys()
        if environ.get(k) != os.environ.get(k) and k not in IMPORT_SET_ENV
    )
    now_cwd = os.getcwd()
    for k in changed:  # put it back either way, so one leak cannot spread
        if k in environ:
            os.environ[k] = environ[k]
        else:
            del os.environ[k]
    if now_cwd != cwd:
        os.chdir(cwd)
    if changed or now_cwd != cwd:
        pytest.fail(
            "the test left process state changed:"
            + (f" os.environ keys {changed}" if changed else "")
            + (f" cwd {cwd} -> {now_cwd}" if now_cwd != cwd else "")
            + " (use monkeypatch.setenv / monkeypatch.chdir, which restore)"
        )


@pytest.fixture
def env(tmp_path: Path) -> Env:
    base = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("REFLECT_", "STUB_CLAUDE", "GLOBAL_LEARNINGS"))
    }
    e = Env(base)
    e.update(
        REFLECT_HOME=str(tmp_path / "home"),
        GLOBAL_LEARNINGS_PATH=str(tmp_path / "kb"),
        REFLECT_DRAIN_CLAUDE_BIN=str(STUB_CLAUDE),
        REFLECT_WRITER_BACKEND="claude",
        REFLECT_CAPTURE_SETTLE_SEC="0",
        REFLECT_INDEX_VECTORS="0",
        REFLECT_RETRY_BASE_SEC="0",
        # Most tests are about what one capture's pass does, whatever its hook event: every
        # capture is a pass here. tests/test_checkpoints*.py unset this and test the
        # default (20/40/60/80%), the idle pass and one pass per session at a time.
        REFLECT_CHECKPOINTS="off",
        STUB_CLAUDE_MODE="ok",
        STUB_CLAUDE_LOG=str(tmp_path / "claude-calls.jsonl"),
        XDG_CONFIG_HOME=str(tmp_path / "xdg"),
        HF_HUB_OFFLINE="1",
        PYTHONDONTWRITEBYTECODE="1",
    )
    return e
