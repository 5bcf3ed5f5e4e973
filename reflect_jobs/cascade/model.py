"""Value types shared by the cascade stages (pure data, no behaviour)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

LEVELS = ("HIGH", "MEDIUM", "LOW")
LEVEL_RANK = {level: rank for rank, level in enumerate(LEVELS)}


@dataclass(frozen=True)
class Signal:
    """One dialogue line that carries something worth learning."""

    line_number: int  # 1-based line in the dialogue (turn texts joined by "\n")
    level: str  # "HIGH" | "MEDIUM" | "LOW"
    kind: str  # correction, prohibition, requirement, root_cause, approval, …
    category: str  # Code Style, Architecture, Process, Domain, Tools, Security, New Skill, Unknown
    text: str
    role: str  # role of the turn the line came from ("" when unknown)


@dataclass(frozen=True)
class GateVerdict:
    """The gate's decision for one transcript and the reason logged with it."""

    action: str  # "reflect" | "skip"
    reason: str  # "reflect_on_reflect" | "not_interactive" | "no_signal" | "has_signal"


@dataclass(frozen=True)
class Chunk:
    """One contiguous window of the slice; its hash is the delta-retain key (SPEC-drain §3.3)."""

    text: str
    hash: str  # first 16 hex of sha256 of the stripped chunk text
    # One origin code per line of ``text`` (``cascade/origins.py``); "" when not known.
    origins: str = ""


@dataclass
class Slice:
    """The prompt-ready excerpt of a dialogue and the chunks it is made of.

    ``text`` is the chunks joined by ``…`` lines; ``truncated`` says a window, a line or the
    middle of the dialogue was cut to fit the cap; ``bounded`` marks a head/tail view built
    because no signal window could be.
    """

    text: str
    chunks: list[Chunk] = field(default_factory=list)
    truncated: bool = False
    bounded: bool = False


@dataclass(frozen=True)
class RelatedCandidate:
    """A ledger learning the revision block may offer for UPDATE/DELETE."""

    id: str  # the KB id, "lrn-<slug>-<hash6>" — the same id the writer's whitelist checks
    title: str
    category: str
    status: str
    proof_count: int
    created_at: str


class LedgerView(Protocol):
    """The read-only slice of the ledger ``prepare`` needs (it never writes).

    * ``seen_chunk_hashes(hashes)``: the subset of ``hashes`` a committed add has already
      recorded (delta retain).
    * ``related_candidates(limit)``: up to ``limit`` learnings the revision block may offer;
      ``prepare`` drops retired ones itself, whatever the implementation returns.
    * ``learnings_with_signal_hash(signal_hash)``: ids of active learnings already made
      from exactly this signal set, ``[]`` when none.
    """

    def seen_chunk_hashes(self, hashes: list[str]) -> set[str]: ...

    def related_candidates(self, limit: int = 1000) -> list[RelatedCandidate]: ...

    def learnings_with_signal_hash(self, signal_hash: str) -> list[str]: ...


class EmptyLedger:
    """A LedgerView that has seen nothing: for benchmarks, fuzzing and one-off previews."""

    def seen_chunk_hashes(self, hashes: list[str]) -> set[str]:
        """No chunk has been seen.

        Args:
            hashes: Chunk hashes of the transcript being prepared (ignored).

        Returns:
            An empty set.
        """
        return set()

    def related_candidates(self, limit: int = 1000) -> list[RelatedCandidate]:
        """No learning exists to revise.

        Args:
            limit: The most candidates wanted (ignored).

        Returns:
            An empty list.
        """
        return []

    def learnings_with_signal_hash(self, signal_hash: str) -> list[str]:
        """No learning was made from any signal set.

        Args:
            signal_hash: The transcript's signal-set hash (ignored).

        Returns:
            An empty list.
        """
        return []


@dataclass
class Prepared:
    """The outcome of the $0 front end for one transcript."""

    action: str  # "reflect" | "skip"
    # has_signal | reflect_on_reflect | not_interactive | no_signal | no_new_signal |
    # dup_signal_hash | dup_chunk_hash | bounded
    reason: str
    signal_count: int = 0
    signal_hash: str = ""
    orig_chars: int = 0
    slice_text: str = ""
    new_chunk_hashes: list[str] = field(default_factory=list)
    chunks_total: int = 0
    chunks_skipped: int = 0
    related_ids: list[str] = field(default_factory=list)
    dup_learning_ids: list[str] = field(default_factory=list)
    redactions: int = 0
    lines_before_watermark: int = 0  # dialogue lines already reflected on (not sent as new)
    context_lines: int = 0  # lines of the slice sent marked as context
    # One origin code per line of ``slice_text`` (``cascade/origins.py``): who wrote it.
    slice_origins: str = ""
    detail: str = ""  # why a skip happened, in words (e.g. which headless run it was)
