"""The $0 gate: decide before anything is paid whether a transcript is worth a model call.

Policy (SPEC-drain §1.4): skip our own writer's sessions (reflect-on-reflect, §10 B4),
sessions no person took part in (headless ``claude -p``/``codex exec``, subagents and
compaction agents: ``not_interactive``), sessions without a signal worth a learning, and
sessions whose every such signal lies before the session's watermark (already reflected on
and committed); reflect on everything else. The child check comes first: a writer session's
user turn is a signal-rich slice and would otherwise always pass.

A person interrupting the agent or rejecting a tool call is real feedback and is a signal
(``FEEDBACK_KINDS``), weighed below a spoken correction: it sharpens the slice of a session
that has something to learn from, but an interruption alone says too little to pay for.
"""

from __future__ import annotations

from reflect_jobs.cascade.model import GateVerdict, Signal
from reflect_jobs.cascade.signals import FEEDBACK_KINDS
from reflect_jobs.transcripts.model import Transcript

REFLECT_ON_REFLECT = GateVerdict("skip", "reflect_on_reflect")
NOT_INTERACTIVE = GateVerdict("skip", "not_interactive")
NO_SIGNAL = GateVerdict("skip", "no_signal")
NO_NEW_SIGNAL = GateVerdict("skip", "no_new_signal")
HAS_SIGNAL = GateVerdict("reflect", "has_signal")


def gate(transcript: Transcript, signals: list[Signal], first_new: int = 0) -> GateVerdict:
    """The $0 verdict for one transcript, before anything is paid.

    Args:
        transcript: The transcript as read; ``child_session`` and ``not_interactive`` are
            consulted.
        signals: The signals detected in its (privacy-filtered) turns.
        first_new: 0-based index of the first dialogue line after the session's
            watermark (0: the whole transcript is new).

    Returns:
        ``REFLECT_ON_REFLECT`` for one of our own writer's sessions (checked first), else
        ``NOT_INTERACTIVE`` for a session no person took part in, else ``NO_SIGNAL`` when
        no signal other than interruptions/rejections (``FEEDBACK_KINDS``) was found, else
        ``NO_NEW_SIGNAL`` when every such signal lies before ``first_new``, else
        ``HAS_SIGNAL``.
    """
    if transcript.child_session:
        return REFLECT_ON_REFLECT
    if transcript.not_interactive:
        return NOT_INTERACTIVE
    if not any(s.kind not in FEEDBACK_KINDS for s in signals):
        return NO_SIGNAL
    if all(s.line_number - 1 < first_new for s in signals if s.kind not in FEEDBACK_KINDS):
        return NO_NEW_SIGNAL
    return HAS_SIGNAL
