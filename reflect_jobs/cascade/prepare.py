"""``prepare``: the whole $0 front end for one transcript, as one pure function.

Order, and why:

1. Privacy filter and secret redaction on WHOLE turns, first — so no later step (signals,
   hashes, slice, revision recall) ever sees a private span or a credential (§10 B17).
2. Signals on the filtered turns (line numbers then index the very lines we slice).
3. Gate: reflect-on-reflect, not interactive (headless, subagent, compaction), no signal,
   no signal after the session's watermark → skip, costing nothing. The watermark
   (``since_offset``, a byte offset the caller has checked against the file) splits the
   dialogue: only what came after it opens windows, and the ±context lines before it are
   sent marked as context.
4. Signal-set hash dedup: the same findings already produced a learning → skip; the caller
   bumps proof on ``dup_learning_ids``.
5. Slice (strongest + latest windows under the cap), or the bounded head/tail view.
6. Delta retain: chunks already seen are dropped; if none is new → skip. ``prepare`` never
   records anything — the caller records ``new_chunk_hashes`` only when the add stage
   commits, so a failed or dry run loses nothing (§10 B2).
7. Revision block for related learnings; ``related_ids`` is the writer's id whitelist.

Ledger errors propagate: the task layer retries the stage. Failing open here (as the
original did) would pay for a model call on a transcript we may already have learned from.
"""

from __future__ import annotations

import os
from collections.abc import Callable

from reflect_jobs.cascade.gate import gate
from reflect_jobs.cascade.model import LedgerView, Prepared, RelatedCandidate, Signal, Slice
from reflect_jobs.cascade.origins import NONE, turn_line_origins
from reflect_jobs.cascade.privacy import strip_private
from reflect_jobs.cascade.revision import (
    REVISION_MARKER,
    related_learnings,
    revision_block,
)
from reflect_jobs.cascade.secrets import redact_secrets
from reflect_jobs.cascade.signals import detect_signals, signal_set_hash
from reflect_jobs.cascade.slicing import CONTEXT_MARK, GAP, bounded_view, build_slice
from reflect_jobs.lifecycle import is_retired
from reflect_jobs.transcripts.model import Transcript, Turn

HEADER_RESERVE = 400  # the header is ~200 chars; the body gets max_chars minus this
_MARKER_TITLE = REVISION_MARKER.strip()
_MARKER_DEFUSED = "## (quoted) Related existing learnings"


def filter_turns(turns: list[Turn]) -> tuple[list[Turn], int]:
    """Privacy-strip and secret-redact every turn; returns the turns and the redaction count.

    A quoted copy of the revision-block heading is also rewritten, so a transcript cannot
    fake a revision block that the writer would trust.

    Args:
        turns: The transcript's turns as read.

    Returns:
        ``(turns, redactions)``: new turns with the same index, role and timestamp and the
        filtered text, and the number of secrets redacted across all of them.
    """
    out: list[Turn] = []
    redactions = 0
    for turn in turns:
        text, count = redact_secrets(strip_private(turn.text))
        redactions += count
        # A transcript quoting our revision marker must not be able to fake a revision block.
        if _MARKER_TITLE in text:
            text = text.replace(_MARKER_TITLE, _MARKER_DEFUSED)
        out.append(Turn(turn.index, turn.role, text, turn.timestamp, turn.end_offset))
    return out, redactions


def first_new_line(turns: list[Turn], since_offset: int) -> int:
    """The 0-based index of the first dialogue line after the watermark ``since_offset``.

    A turn is old when it came from a record that ends at or before the watermark; the
    first turn that does not (or carries no offset) and everything after it is new.

    Args:
        turns: The transcript's turns, in order.
        since_offset: The session's checked watermark in bytes (0: nothing was reflected).

    Returns:
        The number of lines of the old turns at the front (0 when ``since_offset`` <= 0).
    """
    if since_offset <= 0:
        return 0
    count = 0
    for turn in turns:
        if turn.end_offset is None or turn.end_offset > since_offset:
            break
        count += turn.text.count("\n") + 1
    return count


def _header(
    source_name: str,
    signal_count: int,
    orig_chars: int,
    body: str,
    dropped: int,
    has_context: bool = False,
) -> str:
    lines = [
        f"# Reflect slice of {os.path.basename(source_name) or source_name}",
        f"# {signal_count} signal-bearing windows extracted from a {orig_chars // 4}-token "
        f"transcript ({len(body) // 4} tokens).",
        "# Only correction/approval/knowledge exchanges are kept.",
    ]
    if has_context:
        lines.append(
            f"# Lines starting with {CONTEXT_MARK.strip()} were already reflected on: "
            "context only, learn from the other lines."
        )
    if dropped:
        lines.append(f"# {dropped} chars were dropped from the middle of a very long session.")
    return "\n".join(lines) + "\n\n"


def prepare(
    transcript: Transcript,
    ledger: LedgerView,
    *,
    source_name: str,
    max_chars: int = 60_000,
    context: int = 3,
    semantic: Callable[[list[Signal]], list[tuple[RelatedCandidate, float]]] | None = None,
    since_offset: int = 0,
) -> Prepared:
    """Decide skip/reflect for ``transcript`` and build the prompt-ready slice.

    ``semantic`` (optional) adds related learnings found by embedding similarity — the
    caller passes it when a vector index exists; lexical overlap alone misses paraphrases.
    The steps, and why they run in this order, are in the module docstring.

    Args:
        transcript: The transcript as read (unfiltered: ``prepare`` filters the turns).
        ledger: Read-only ledger access (seen chunk hashes, revision candidates, learnings
            with the same signal hash).
        source_name: The transcript's path or name; its basename titles the slice header.
        max_chars: Character budget of the slice. The windows get what the header
            (``HEADER_RESERVE``) and the revision block leave, but never less than half of
            it, so with a very small budget the block can take the total past it.
        context: Dialogue lines kept on each side of a signal line.
        semantic: Maps the signals to ``(candidate, score)`` pairs from the vector index, on
            the lexical scores' 0..1 scale; ``None`` when there is no index.
        since_offset: The session's watermark in bytes, already checked against the file
            by the caller (the prefix up to it is unchanged); 0 for a new transcript. Turns
            from records ending at or before it were reflected on and committed.

    Returns:
        A :class:`Prepared`. ``action`` is ``"reflect"`` (reason ``has_signal``, or
        ``bounded`` for a head/tail view without revision block) with ``slice_text``,
        ``new_chunk_hashes`` and ``related_ids`` filled; or ``"skip"`` with reason
        ``reflect_on_reflect``, ``not_interactive``, ``no_signal``, ``no_new_signal``,
        ``dup_signal_hash`` (and
        ``dup_learning_ids``) or ``dup_chunk_hash``. The signal count and hash, the original
        size and the redaction count are always set.

    Raises:
        Exception: Whatever ``ledger`` or ``semantic`` raises propagates (the task layer
            retries the stage; failing open would pay for a model call).
    """
    orig_chars = sum(len(t.text) for t in transcript.turns) + max(len(transcript.turns) - 1, 0)
    turns, redactions = filter_turns(transcript.turns)
    signals = detect_signals(turns)
    result = Prepared(
        action="skip",
        reason="",
        signal_count=len(signals),
        signal_hash=signal_set_hash(signals),
        orig_chars=orig_chars,
        redactions=redactions,
    )
    first_new = first_new_line(turns, since_offset)
    result.lines_before_watermark = first_new
    verdict = gate(transcript, signals, first_new)
    if verdict.action == "skip":
        result.reason = verdict.reason
        if verdict.reason == "not_interactive":
            result.detail = transcript.not_interactive
        return result

    dup_ids = ledger.learnings_with_signal_hash(result.signal_hash)
    if dup_ids:
        result.reason = "dup_signal_hash"
        result.dup_learning_ids = list(dup_ids)
        return result

    related = related_learnings(signals, ledger.related_candidates())
    if semantic is not None:
        related = merge_related(related, semantic(signals))
    block = revision_block(related)
    budget = max(max_chars - HEADER_RESERVE - len(block), max_chars // 2, 1)
    lines = [line for turn in turns for line in turn.text.split("\n")]
    origins = turn_line_origins(turns)
    piece: Slice = build_slice(
        lines, signals, context=context, max_chars=budget, first_new=first_new, origins=origins
    )
    reason = verdict.reason
    if not piece.text.strip():
        start = first_new if lines[first_new:] else 0
        piece = bounded_view(
            lines[start:], max_chars=max(max_chars - HEADER_RESERVE, 1), origins=origins[start:]
        )
        reason, block, related = "bounded", "", []  # a bounded view carries no revision block

    hashes = [c.hash for c in piece.chunks]
    seen = ledger.seen_chunk_hashes(hashes) if hashes else set()
    fresh = [c for c in piece.chunks if c.hash not in seen]
    result.chunks_total = len(piece.chunks)
    result.chunks_skipped = len(piece.chunks) - len(fresh)
    if not fresh:
        result.reason = "dup_chunk_hash"
        return result

    body = f"\n{GAP}\n".join(c.text for c in fresh)
    result.context_lines = sum(
        line.startswith(CONTEXT_MARK) for c in fresh for line in c.text.split("\n")
    )
    header = _header(
        source_name,
        sum(1 for sig in signals if sig.line_number > first_new),  # the ones sent as new
        orig_chars,
        body,
        transcript.dropped_chars,
        has_context=first_new > 0 and result.context_lines > 0,
    )
    result.action = "reflect"
    result.reason = reason
    result.slice_text = header + body + block
    # Who wrote each line sent (ARCHITECTURE §6, evidence_origin): the header, the gap
    # lines and the revision block are no one's words.
    body_codes = NONE.join(c.origins or NONE * (c.text.count("\n") + 1) for c in fresh)
    result.slice_origins = NONE * header.count("\n") + body_codes + NONE * block.count("\n")
    result.new_chunk_hashes = [c.hash for c in fresh]
    result.related_ids = [cand.id for cand, _ in related]
    return result


def merge_related(
    lexical: list[tuple[RelatedCandidate, float]],
    semantic: list[tuple[RelatedCandidate, float]],
    limit: int = 5,
) -> list[tuple[RelatedCandidate, float]]:
    """Union by id keeping the best score; best first, then oldest, at most ``limit``.

    Args:
        lexical: ``(candidate, score)`` pairs from ``related_learnings``.
        semantic: Pairs from the vector index; scores are compared with the lexical ones
            as they are, so both must be on one 0..1 scale.
        limit: The most pairs returned.

    Returns:
        The merged pairs without retired learnings, by descending score, then ascending
        ``created_at``.
    """
    best: dict[str, tuple[RelatedCandidate, float]] = {}
    for cand, score in [*lexical, *semantic]:
        if is_retired(cand.status):
            continue
        if cand.id not in best or score > best[cand.id][1]:
            best[cand.id] = (cand, score)
    ranked = sorted(best.values(), key=lambda cs: (-cs[1], cs[0].created_at))
    return ranked[:limit]
