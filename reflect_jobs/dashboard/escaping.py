"""The dashboard's one escaping rule, shared by its renderers (no renderer imports another)."""

from __future__ import annotations

from html import escape


def esc(value: object) -> str:
    """``value`` as HTML text or attribute content (``None`` is empty; quotes escaped).

    Args:
        value: Anything; it is shown as ``str(value)``.

    Returns:
        The escaped text.
    """
    return escape("" if value is None else str(value), quote=True)
