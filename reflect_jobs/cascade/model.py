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
    action: str  # "reflect" | "skip"
    reason: str  # "reflect_on_reflect" | "no_signal" | "has_signal"


@dataclass(frozen=True)
class Chunk:
    """One contiguous window of the slice; its hash is the delta-retain key (SPEC §3.3)."""

    text: str
    hash: str  # first 16 hex of sha256 of the stripped chunk text


@dataclass
class Slice:
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
    """The read-only slice of the ledger ``prepare`` needs (it never writes)."""

    def seen_chunk_hashes(self, hashes: list[str]) -> set[str]: ...

    def related_candidates(self, limit: int = 1000) -> list[RelatedCandidate]: ...

    def learnings_with_signal_hash(self, signal_hash: str) -> list[str]: ...


class EmptyLedger:
    """A LedgerView that has seen nothing: for benchmarks, fuzzing and one-off previews."""

    def seen_chunk_hashes(self, hashes: list[str]) -> set[str]:
        return set()

    def related_candidates(self, limit: int = 1000) -> list[RelatedCandidate]:
        return []

    def learnings_with_signal_hash(self, signal_hash: str) -> list[str]:
        return []


@dataclass
class Prepared:
    """The outcome of the $0 front end for one transcript."""

    action: str  # "reflect" | "skip"
    reason: str  # has_signal | reflect_on_reflect | no_signal | dup_signal_hash | dup_chunk_hash | bounded
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
