"""What a per-harness record parser returns for one JSON record."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class ParsedRecord:
    """Dialogue found in one record, plus raw text the child-session scan must see.

    ``scan`` holds the record's user/queue content *before* noise removal: the markers that
    identify our own runs live precisely in the machine blocks that noise removal drops.
    """

    turns: list[tuple[str, str, str | None]] = field(default_factory=list)  # role, text, ts
    scan: list[str] = field(default_factory=list)


def str_or_none(value: object) -> str | None:
    """``value`` when it is a string, else ``None`` (a timestamp of another shape is dropped).

    Args:
        value: A record field.

    Returns:
        The string, or ``None``.
    """
    return value if isinstance(value, str) else None
