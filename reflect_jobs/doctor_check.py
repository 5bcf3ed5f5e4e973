"""One ``doctor`` check's record, the shape every doctor module returns.

``doctor.py``, ``doctor_config.py`` and ``writer/probe.py`` each built it
with a private copy of the same three lines; one owner keeps ``doctor --json``'s shape one.
"""

from __future__ import annotations

from typing import Any


def check(name: str, ok: bool, detail: str, fix: str = "") -> dict[str, Any]:
    """One check as ``doctor`` prints it and ``doctor --json`` emits it.

    Args:
        name: What was checked (``ledger``, ``hooks (codex)``…).
        ok: Whether it passed.
        detail: What was found.
        fix: The command or step that fixes a failure (dropped when ``ok``: a passing
            check names no fix).

    Returns:
        ``{"name", "ok", "detail", "fix"}``.
    """
    return {"name": name, "ok": ok, "detail": detail, "fix": fix if not ok else ""}
