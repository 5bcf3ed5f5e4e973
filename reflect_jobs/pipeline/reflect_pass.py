"""The reflection pass: every working session reflected, not only the ones with a correction.

The write stage's one paid call serves two stores: learnings (from the cascade's signal
windows) and the Reflection Store (items closed, added, the session's summary). Before
this module the call was made only when the cascade found a learning signal, so a session
that simply *did the work* ended ``skip_no_signal`` and its finished items stayed open.

Now, at a pass the checkpoints allowed (a context-fill checkpoint, PreCompact, SessionEnd,
idle, a person's capture; ``checkpoints.py``), prepare also condenses the transcript since
the session's last committed pass (``cascade/condense.py``) and:

* with signal windows: appends the condensed transcript to the slice, marked as its own
  section, so the one call sees both;
* without (``no_signal``, ``no_new_signal``, ``dup_signal_hash``, ``dup_chunk_hash``): makes
  a reflection-only pass when the person spoke at least ``REFLECT_REFLECT_MIN_TURNS`` times
  since that pass; below that the job keeps its free skip, with the count in its detail.

Sessions no person took part in (headless runs, subagents, compaction agents), our own
writer's sessions, restricted sessions and ignored repositories (prepare's free gates,
``skip_restricted``/``skip_ignored``, stop them before any of this) never get a reflection
pass: $0.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from reflect_jobs.cascade import Prepared
from reflect_jobs.cascade.condense import REFLECTABLE_SKIPS, Condensed, condense, section
from reflect_jobs.cascade.origins import NONE
from reflect_jobs.config import Settings

#: The checkpoint plans' kinds that may make a reflection-only pass (``checkpoints.py``).
REFLECTION_PASSES = frozenset({"checkpoint", "deep"})


@dataclass
class Reflection:
    """What prepare adds for the reflection items, or why it adds nothing.

    Attributes:
        section: The condensed-transcript section of the slice ("" when none).
        codes: One origin code per line of ``section``.
        condensed: The condensed transcript (None when it was not read).
        makes_pass: The section alone earns a paid pass (no signal windows).
        why: One line for the job's detail.
    """

    section: str = ""
    codes: str = ""
    condensed: Condensed | None = None
    makes_pass: bool = False
    why: str = ""

    def stats(self) -> dict[str, Any]:
        """The reflection's counts as ``prepare_stats["reflection"]``.

        Returns:
            ``{"chars", "person_turns", "tool_calls", "errors", "dropped_chars", "alone",
            "why"}`` (``{"chars": 0, "why"}`` when the transcript was not condensed).
        """
        c = self.condensed
        if c is None:
            return {"chars": 0, "why": self.why}
        return {
            "chars": len(self.section),
            "person_turns": c.person_turns,
            "tool_calls": c.tool_calls,
            "errors": c.errors,
            "dropped_chars": c.dropped_chars,
            "alone": self.makes_pass,
            "why": self.why,
        }


def plan_reflection(
    settings: Settings,
    *,
    path: str,
    harness: str,
    prepared: Prepared | None,
    planned: dict[str, Any],
    pass_kind: str = "deep",
) -> Reflection:
    """The reflection part of a pass the checkpoints allowed.

    Args:
        settings: ``reflect_min_turns``, ``reflect_max_chars``.
        path: The transcript.
        harness: The job's harness.
        prepared: The cascade's verdict (None: it did not run).
        planned: The watermark plan (``since``: the last committed pass; ``offset``: the
            end of what the reader saw).
        pass_kind: The checkpoint plan's kind: only a ``checkpoint`` or ``deep`` pass may
            be reflection-only (with ``REFLECT_CHECKPOINTS=off`` every capture is a
            ``capture`` pass, and paying for each one's reflection would break the cost
            promise); any pass made for a signal carries the section.

    Returns:
        The :class:`Reflection`; an empty one (no section) when the session gets none.
    """
    if prepared is None:
        return Reflection(why="")
    if prepared.action == "skip" and prepared.reason not in REFLECTABLE_SKIPS:
        return Reflection()  # no person, our own writer's run: the skip says it
    since = int(planned.get("since") or 0)
    until = int(planned.get("offset") or 0) or None
    try:
        condensed = condense(
            path, harness, since=since, until=until, max_chars=settings.reflect_max_chars
        )
    except OSError as exc:
        return Reflection(why=f"no reflection (transcript unreadable: {type(exc).__name__})")
    alone = prepared.action == "skip"
    if not condensed.lines:
        return Reflection(condensed=condensed, why="nothing said since the last pass")
    if alone and pass_kind not in REFLECTION_PASSES:
        return Reflection(condensed=condensed, why=f"no reflection pass at a {pass_kind} pass")
    if alone and condensed.person_turns < settings.reflect_min_turns:
        why = (
            f"reflection: {condensed.person_turns} person turns since the last pass"
            f" (< {settings.reflect_min_turns})"
        )
        return Reflection(condensed=condensed, why=why)
    text, codes = section(condensed, source_name=os.path.basename(path), alone=alone)
    why = f"reflection: {condensed.person_turns} person turns, {len(text)} chars"
    return Reflection(text, codes, condensed, makes_pass=alone, why=why)


def joined(prepared: Prepared, reflection: Reflection) -> tuple[str, str]:
    """The slice and its origin codes with the reflection section appended (or alone).

    Args:
        prepared: The cascade's verdict (its slice and codes, when it reflects).
        reflection: What :func:`plan_reflection` decided.

    Returns:
        ``(slice_text, codes)``: one code per line of the text.
    """
    if reflection.makes_pass or prepared.action != "reflect":
        return reflection.section, reflection.codes
    base = prepared.slice_text
    if not reflection.section:
        return base, prepared.slice_origins
    lines = base.count("\n") + 1
    codes = (prepared.slice_origins + NONE * lines)[:lines]
    return base + "\n" + reflection.section, codes + reflection.codes
