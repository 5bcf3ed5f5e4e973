"""Bounded dialogue accumulation: keep the head ¼ and the most recent ¾ of the budget.

The original capped the dialogue from the FRONT, so the end of a long session, where
corrections cluster, never reached the model (SPEC-drain §10 B9). Here the head keeps the
task statement, the tail always holds the latest turns, and the middle is dropped and
counted. Memory is O(budget), whatever the file size.
"""

from __future__ import annotations

from collections import deque

from reflect_jobs.transcripts.model import Turn


class HeadTailBuffer:
    """Accumulates turns; never holds more than ``max_chars`` of turn text.

    Args:
        max_chars: The budget in characters of turn text (at least 4 is used): a quarter
            for the head, the rest for the tail.
    """

    def __init__(self, max_chars: int) -> None:
        """Start empty, with the head and tail budgets split from ``max_chars``."""
        self.max_chars = max(int(max_chars), 4)
        self.head_budget = self.max_chars // 4
        self.tail_budget = self.max_chars - self.head_budget
        self.head: list[Turn] = []
        self.head_chars = 0
        self.head_full = False
        self.tail: deque[Turn] = deque()
        self.tail_chars = 0
        self.dropped_chars = 0

    def add(
        self, role: str, text: str, timestamp: str | None, end_offset: int | None = None
    ) -> None:
        """Append one turn, splitting or trimming turns so the buffer stays in budget.

        Until the head quarter is full, turns go to the head; the turn that crosses it is
        split (its start closes the head, the rest goes to the tail). In the tail the oldest
        turns are dropped as newer ones need room, and a single turn longer than the whole
        tail budget keeps only its end. Every dropped character counts in ``dropped_chars``.

        Args:
            role: ``"user"`` or ``"assistant"``.
            text: The turn's cleaned text.
            timestamp: The record's timestamp string, or ``None``.
            end_offset: Byte offset just past the record in its file, or ``None``; both
                halves of a split turn keep it.
        """
        if not self.head_full:
            room = self.head_budget - self.head_chars
            if len(text) <= room:
                self.head.append(Turn(0, role, text, timestamp, end_offset))
                self.head_chars += len(text)
                return
            # The turn that crosses the head budget is split: its start closes the head,
            # its remainder competes for the tail like any later turn.
            self.head_full = True
            if room > 0:
                self.head.append(Turn(0, role, text[:room], timestamp, end_offset))
                self.head_chars += room
                text = text[room:]
        self._add_tail(Turn(0, role, text, timestamp, end_offset))

    def _add_tail(self, turn: Turn) -> None:
        if len(turn.text) > self.tail_budget:
            cut = len(turn.text) - self.tail_budget
            self.dropped_chars += cut
            turn = Turn(0, turn.role, turn.text[cut:], turn.timestamp, turn.end_offset)
        self.tail.append(turn)
        self.tail_chars += len(turn.text)
        while self.tail_chars > self.tail_budget and len(self.tail) > 1:
            old = self.tail.popleft()
            self.tail_chars -= len(old.text)
            self.dropped_chars += len(old.text)

    def turns(self) -> list[Turn]:
        """All kept turns in order, re-indexed 0..n-1.

        Returns:
            The head turns then the tail turns, ``index`` renumbered without gaps (a split
            turn counts twice).
        """
        kept = [*self.head, *self.tail]
        return [Turn(i, t.role, t.text, t.timestamp, t.end_offset) for i, t in enumerate(kept)]
