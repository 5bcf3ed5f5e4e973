"""Folders the package ships from the repository's top level (migrations, service templates).

``pyproject.toml`` maps ``alembic/`` onto ``reflect_jobs._migrations`` and ``ops/`` onto
``reflect_jobs._ops``, so a regular install (pip, pipx, uv tool) carries them inside
site-packages. An editable install (``make install``) cannot import a folder without an
``__init__.py`` through setuptools' editable finder, and ``alembic/`` must not get one (from the
repository root it would shadow the Alembic library), so there the checkout's own folder is used.
"""

from __future__ import annotations

import contextlib
from pathlib import Path

CHECKOUT_ROOT = Path(__file__).resolve().parent.parent


def shipped_dir(package: str, checkout_folder: str, must_hold: str) -> Path:
    """The directory of a shipped folder, from the installed package or else the checkout.

    Args:
        package: The dotted package the folder is installed as (``reflect_jobs._migrations``).
        checkout_folder: The folder's name at the repository root (``alembic``).
        must_hold: A file or folder the directory must contain to count (``env.py``).

    Returns:
        The first candidate that holds ``must_hold``.

    Raises:
        FileNotFoundError: Neither the package nor a checkout has it (a broken install).
    """
    import importlib.util

    candidates: list[Path] = []
    with contextlib.suppress(ModuleNotFoundError):
        spec = importlib.util.find_spec(package)
        if spec is not None and spec.submodule_search_locations:
            candidates.extend(Path(p) for p in spec.submodule_search_locations)
    if (CHECKOUT_ROOT / "pyproject.toml").is_file():  # an editable install's checkout
        candidates.append(CHECKOUT_ROOT / checkout_folder)
    for path in candidates:
        if (path / must_hold).exists():
            return path
    raise FileNotFoundError(
        f"reflect-jobs is installed without {checkout_folder}/ (looked in "
        f"{', '.join(map(str, candidates))}): reinstall it"
    )
