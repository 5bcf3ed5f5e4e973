"""The $0 cascade: gate, signals, slicing, delta retain, privacy, secrets, belief revision.

Everything here is pure (stdlib only) and deterministic; ``prepare`` reads the ledger
through the small ``LedgerView`` protocol and never writes.
"""

from reflect_jobs.cascade.gate import gate
from reflect_jobs.cascade.model import (
    Chunk,
    EmptyLedger,
    GateVerdict,
    LedgerView,
    Prepared,
    RelatedCandidate,
    Signal,
    Slice,
)
from reflect_jobs.cascade.prepare import prepare
from reflect_jobs.cascade.privacy import PRIVATE_MARKER, strip_private
from reflect_jobs.cascade.revision import REVISION_MARKER, related_learnings, revision_block
from reflect_jobs.cascade.secrets import redact_secrets
from reflect_jobs.cascade.signals import detect_signals, signal_set_hash
from reflect_jobs.cascade.slicing import bounded_view, build_slice, chunk_hash

__all__ = [
    "PRIVATE_MARKER",
    "REVISION_MARKER",
    "Chunk",
    "GateVerdict",
    "EmptyLedger",
    "LedgerView",
    "Prepared",
    "RelatedCandidate",
    "Signal",
    "Slice",
    "bounded_view",
    "build_slice",
    "chunk_hash",
    "detect_signals",
    "gate",
    "prepare",
    "redact_secrets",
    "related_learnings",
    "revision_block",
    "signal_set_hash",
    "strip_private",
]
