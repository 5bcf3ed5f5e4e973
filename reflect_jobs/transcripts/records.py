"""What a per-harness record parser returns for one JSON record."""

from __future__ import annotations

TurnTuple = tuple[str, str, str | None]  # role, text, timestamp


class ParsedRecord:
    """Dialogue found in one record, plus what the reader needs to judge the whole session.

    Attributes:
        turns: The ``(role, text, timestamp)`` turns this record adds (at most one today).
        scan: Raw user/queue texts *before* noise removal, each as the harness wrote it, for
            the child-session scan: our own runs' markers live precisely in the machine blocks
            that noise removal drops, and they count only at the start of such a text.
        fallback: ``None`` when the record's turns are the same whichever source of user
            speech the file turns out to use. Codex records every typed message twice
            (``response_item`` and ``event_msg`` ``user_message``); the event is the primary
            copy and the ``response_item`` goes here, used only when the file has no
            ``user_message`` event at all (``[]`` for a record whose turns are primary only).
        not_interactive: Why the record shows the session was not one a person took part in
            (headless ``claude -p``/SDK, ``codex exec``, a compaction agent), or ``""``.
        sidechain: The record is dialogue of a subagent (``isSidechain``/``agentId``); its
            turns are dropped, and a file with only such records is a subagent transcript.
        main: The record is dialogue of the session itself (not a sidechain).
    """

    __slots__ = ("fallback", "main", "not_interactive", "scan", "sidechain", "turns")

    def __init__(self) -> None:
        """An empty record: no dialogue, nothing to scan, interactive, not a sidechain.

        A plain class, not a dataclass: the SessionStart hook parses records after a
        compaction (``recall/task_query.py``) and ``dataclasses`` imports ``inspect``, a
        tenth of a bare interpreter's start on the hook's path.
        """
        self.turns: list[TurnTuple] = []
        self.scan: list[str] = []
        self.fallback: list[TurnTuple] | None = None
        self.not_interactive = ""
        self.sidechain = False
        self.main = False


def str_or_none(value: object) -> str | None:
    """``value`` when it is a string, else ``None`` (a timestamp of another shape is dropped).

    Args:
        value: A record field.

    Returns:
        The string, or ``None``.
    """
    return value if isinstance(value, str) else None
