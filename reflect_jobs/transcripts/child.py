"""Reflect-on-reflect detection (SPEC-drain §1.4, §10 B4).

Our writer's prompts start with ``CHILD_MARKER``; the legacy drain's runs carry its machine
markers. Only machine markers count, and only where and how the machines write them: at the
*start* of a user message or ``queue-operation`` content, as the raw text the harness
recorded (``ParsedRecord.scan``; never a tool result):

* our prompt's first line, ``CHILD_MARKER``;
* Claude Code's record of the ``/reflect`` command: a message opening with its
  ``<command-message>``/``<command-name>reflect</command-name>`` tags (a person cannot type
  those: the harness writes them);
* the legacy drain's ``claude -p`` prompt: a ``/reflect`` line, then a line opening with
  ``Process the transcript at:`` (``markers.LEGACY_PROMPT_START``).

A person who writes "/reflect later, but first: …", or asks the agent to "process the
transcript at: …", is in a real session and must be reflected on. Like the original, the
scan covers the first 60 records / 50,000 chars, case-insensitively.
"""

from __future__ import annotations

import re

from reflect_jobs.markers import CHILD_MARKER, LEGACY_COMMAND_TAGS, LEGACY_PROMPT_START

MAX_RECORDS = 60
MAX_CHARS = 50_000
_COMMAND_TAGS = "|".join(re.escape(t) for t in LEGACY_COMMAND_TAGS)
_MACHINE_START = re.compile(
    r"\A\s*(?:"
    + re.escape(CHILD_MARKER)
    + r"|(?:<command-message>[^<]{0,200}</command-message>\s*)?(?:"
    + _COMMAND_TAGS
    + r")|/reflect[ \t]*\r?\n\s*"
    + re.escape(LEGACY_PROMPT_START)
    + r")",
    re.IGNORECASE,
)


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
        """Look for a machine marker at the start of each of one record's raw texts.

        Each call counts as one record, even with no texts; once :attr:`done` nothing more is
        scanned.

        Args:
            texts: The record's user/queue texts before noise removal
                (``ParsedRecord.scan``), each as the harness wrote it.
        """
        if self.done:
            return
        self.records += 1
        for text in texts:
            if self.chars >= MAX_CHARS:
                return
            self.chars += len(text)
            if is_child_text(text):
                self.found = True
                return


def is_child_text(text: str) -> bool:
    """True if ``text`` opens with one of our machine markers, the way the machines write it.

    Args:
        text: One raw user message or queue-operation content.

    Returns:
        Whether it starts (after blanks, ignoring case) with ``CHILD_MARKER``, the
        ``/reflect`` command tags Claude Code records, or the legacy ``/reflect`` +
        ``Process the transcript at:`` prompt; the same words elsewhere do not count.
    """
    return bool(_MACHINE_START.match(text[:4096]))
