"""The harness-neutral shape every transcript parser produces.

Everything downstream (gate, signals, slicing) works on a list of ``Turn`` objects, so a new
harness only needs a record parser, never changes to the cascade.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Turn:
    """One dialogue turn: what a person or the agent *said* (tool traffic is not a turn)."""

    index: int  # 0-based position among kept turns
    role: str  # "user" | "assistant"
    text: str
    timestamp: str | None = None
    # Byte offset in the file just past the record this turn came from (None when the turn
    # was not read from a file): what the per-session watermark is measured in.
    end_offset: int | None = None


@dataclass
class Transcript:
    """The dialogue of one session plus the bookkeeping the gate and the logs need."""

    format: str  # "claude" | "codex" | "copilot"
    turns: list[Turn] = field(default_factory=list)
    malformed_lines: int = 0  # non-JSON / wrong-shape lines skipped
    total_lines: int = 0
    dropped_chars: int = 0  # dialogue chars dropped from the middle by the memory cap
    child_session: bool = False  # a session started by our own writer (or the legacy drain)
    # The watermark a committed add would record: the byte offset just past the last record
    # that gave a turn, and the sha256 of the file's bytes up to it (0 and "" without turns).
    end_offset: int = 0
    end_digest: str = ""
    # sha256 of the bytes up to the ``prefix_at`` offset asked of ``read_transcript``, or None
    # when the file holds no record boundary there (it was truncated or rewritten).
    prefix_digest: str | None = None
    # Why no person took part (headless ``claude -p``/``codex exec``, a subagent's or a
    # compaction agent's transcript); "" for a session a person was in.
    not_interactive: str = ""
    records: int = 0  # JSON records of the harness's shape read

    def lines(self) -> list[str]:
        """The dialogue as lines: turns joined by newline, i.e. each turn's text split on it.

        Signal line numbers (1-based) index into this list.

        Returns:
            Every line of every turn, in order; a turn with ``k`` newlines gives ``k + 1``
            lines.
        """
        return [line for turn in self.turns for line in turn.text.split("\n")]


class UnreadableTranscript(Exception):
    """The file holds no usable transcript at all; the message is the human reason.

    Raised instead of returning an empty transcript so that "nothing to read" (a directory, a
    vanished or binary file) is never confused with "a session with nothing worth learning".
    """
