"""The one ``atomic_write``'s mode rule, on real files.

Replacing keeps the replaced file's mode unless ``mode=`` is given; a new file gets ``mode``
or ``DEFAULT_MODE``. Callers rely on both halves: a user's 0600 settings file must stay
private after our edit, a slice must be 0600 from the start, a unit file 0644 whatever it was.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from reflect_jobs.fsio import DEFAULT_MODE, atomic_write


def _mode(p: Path) -> int:
    return p.stat().st_mode & 0o7777


def test_new_file_gets_the_documented_default_whatever_the_umask(tmp_path: Path) -> None:
    old = os.umask(0o077)
    try:
        atomic_write(tmp_path / "new.txt", "x")
    finally:
        os.umask(old)
    assert DEFAULT_MODE == 0o600 and _mode(tmp_path / "new.txt") == 0o600


def test_new_file_gets_the_given_mode(tmp_path: Path) -> None:
    atomic_write(tmp_path / "slice.txt", "secret", mode=0o600)
    assert _mode(tmp_path / "slice.txt") == 0o600
    assert (tmp_path / "slice.txt").read_text() == "secret"


@pytest.mark.parametrize("existing", [0o600, 0o640, 0o755])
def test_replacing_keeps_the_mode_unless_one_is_given(tmp_path: Path, existing: int) -> None:
    f = tmp_path / "f"
    f.write_text("old")
    f.chmod(existing)
    atomic_write(f, "kept")
    assert _mode(f) == existing and f.read_text() == "kept"
    atomic_write(f, "forced", mode=0o644)
    assert _mode(f) == 0o644 and f.read_text() == "forced"


def test_missing_parent_is_an_error_not_a_new_directory(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        atomic_write(tmp_path / "nope" / "f", "x")
    assert not (tmp_path / "nope").exists()
