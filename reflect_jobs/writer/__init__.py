"""The write stage's pure parts: model backends, prompt, action parsing, scoring, quota.

Nothing here touches the ledger or the queue; callers persist ``ModelResult.to_json()`` and
the ``AttemptOutcome`` themselves. Only ``backends`` starts processes.
"""

from reflect_jobs.writer.actions import (
    MAX_CREATES,
    ActionPlan,
    UnparseableOutput,
    parse_actions,
    plan_actions,
)
from reflect_jobs.writer.backends import Backend, ClaudeCliBackend, HeuristicBackend
from reflect_jobs.writer.classifier import POISON_MARKERS, SIZE_MARKERS, classify_output
from reflect_jobs.writer.outcomes import AttemptContext, AttemptOutcome, classify_attempt
from reflect_jobs.writer.prompt import SLICE_MARKER, build_prompt
from reflect_jobs.writer.quota import QuotaDecision, bucket_of, extract_rate_limits, quota_gate
from reflect_jobs.writer.result import BackendMissing, ModelResult, result_from_cli
from reflect_jobs.writer.selection import make_backend, timeout_for

__all__ = [
    "MAX_CREATES",
    "POISON_MARKERS",
    "SIZE_MARKERS",
    "SLICE_MARKER",
    "ActionPlan",
    "AttemptContext",
    "AttemptOutcome",
    "Backend",
    "BackendMissing",
    "ClaudeCliBackend",
    "HeuristicBackend",
    "ModelResult",
    "QuotaDecision",
    "UnparseableOutput",
    "bucket_of",
    "build_prompt",
    "classify_attempt",
    "classify_output",
    "extract_rate_limits",
    "make_backend",
    "parse_actions",
    "plan_actions",
    "quota_gate",
    "result_from_cli",
    "timeout_for",
]
