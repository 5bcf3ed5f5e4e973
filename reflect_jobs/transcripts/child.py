"""Reflect-on-reflect detection (SPEC-drain §1.4, §10 B4).

Our writer's prompts start with ``CHILD_MARKER``; the legacy drain's runs carry its machine
markers. Only machine markers count: a person typing "/reflect later, but first: …" is a
real session and must be reflected on. Like the original, the scan looks at user content
and ``queue-operation`` content of the first 60 records / 50,000 chars, case-insensitively.
"""

from __future__ import annotations

from reflect_jobs.markers import CHILD_MARKER, LEGACY_MARKERS

MAX_RECORDS = 60
MAX_CHARS = 50_000
_MARKERS = tuple(m.lower() for m in (CHILD_MARKER, *LEGACY_MARKERS))


class ChildScanner:
    """Fed record by record while the file streams; remembers whether a marker was seen."""

    def __init__(self) -> None:
        """Start with nothing scanned and no marker found."""
        self.records = 0
        self.chars = 0
        self.found = False

    @property
    def done(self) -> bool:
        """True once a marker was found or the record or character limit is reached."""
        return self.found or self.records >= MAX_RECORDS or self.chars >= MAX_CHARS

    def feed(self, texts: list[str]) -> None:
        """Scan one record's raw texts for a machine marker, case-insensitively.

        Each call counts as one record, even with no texts; once :attr:`done` nothing more is
        scanned.

        Args:
            texts: The record's user/queue content before noise removal
                (``ParsedRecord.scan``).
        """
        if self.done:
            return
        self.records += 1
        for text in texts:
            budget = MAX_CHARS - self.chars
            if budget <= 0:
                return
            # Markers are short: look a little past the budget so one straddling it counts.
            chunk = text[: budget + 64].lower()
            self.chars += min(len(text), budget)
            if any(marker in chunk for marker in _MARKERS):
                self.found = True
                return


def is_child_text(text: str) -> bool:
    """True if ``text`` carries one of our machine markers (used by tests and tools).

    Args:
        text: Any text; all of it is searched (no record or size limit here).

    Returns:
        Whether ``CHILD_MARKER`` or a legacy marker occurs in it, ignoring case.
    """
    low = text.lower()
    return any(marker in low for marker in _MARKERS)
