"""Score one model attempt: the SPEC-drain §5.6 outcome table with the 5.2.4/5.2.5 fixes.

Pure: the caller persists the outcome, the counters and the job transition. First match wins:

0. API errors (``ModelResult.error_kind``, set by the openai/anthropic/codex writers):
             ``defer_rate_limited`` (free, until retry-after), ``quarantine_oversized``,
             ``fail_backend_auth`` / ``fail_unknown_model`` (halt, free),
             ``fail_server_error`` / ``fail_timeout`` (paid retry), ``fail_connection``
             (free retry).
1. halt      ``fail_unknown_command`` — a clean zero-turn answer or "Unknown command" text: an
             install fault (the 5.2.1 outage). Free, no retry charged, the job keeps its place.
2. quarantine ``quarantine_oversized`` — a size-rejection marker. Free (5.2.4; in 5.2.3 this
             was a paid drift poison and caused the 10-day outage, §10 B10).
3. poison    ``poison_writer_drift`` — this non-valid output makes the drift streak reach the
             threshold, or the classifier says ``poisoned`` (a non-size marker).
4. poison/retry on no output (or a fragment cut by our timeout): ``poison_timeout_exit_124`` /
             ``fail_no_output_exit_<n>``.
5. poison    ``poison_budget`` — tokens over the budget.
6. done      ``partial_max_turns`` (the CLI stopped at ``--max-turns``; terminal).
7. retry     ``fail_is_error`` / ``fail_exit_<n>`` / ``fail_unparseable``; poison instead once
             ``prior_failures + 1 >= max_retries``.
8. ok.

Which text is classified: the whole raw stdout goes through ``classify_output`` (so
``poisoned``/``idle``/``malformed`` come from the envelope as in the original). A healthy
envelope (``is_error`` false) whose ``result`` text yields no parseable actions is counted as
``prose``: the CLI wrapped it, but the writer drifted all the same. Size markers are only
believed on a FAILED answer (error envelope, no envelope, non-zero exit, unparseable result),
never in a valid actions answer that happens to discuss context windows.

What an outcome then does to its job is data too: ``ERROR_KINDS`` (the error-ledger kind
per outcome) and ``job_move`` (disposition → target state, backoff, halt flag, next
message), which ``pipeline/write.py`` applies inside its commit.
"""

from __future__ import annotations

from dataclasses import dataclass

from reflect_jobs.writer.actions import UnparseableOutput, parse_actions
from reflect_jobs.writer.classifier import SIZE_MARKERS, classify_output, find_marker
from reflect_jobs.writer.result import TIMEOUT_EXIT_CODE, ModelResult

DEFAULT_INVALID_THRESHOLD = 3


@dataclass(frozen=True)
class AttemptOutcome:
    """How an attempt ended and what the job does next.

    ``entries`` is the budget unit: 1 for a paid or attempted model call, 0 for a free one.
    ``disposition``: ok (go on to add) | done (terminal, nothing to add) | retry | poison |
    quarantine | halt.
    """

    outcome: str
    entries: int
    disposition: str
    writer_class: str
    detail: str


@dataclass
class AttemptContext:
    """Per-job history the decision depends on (counted BEFORE this attempt)."""

    prior_failures: int
    prior_timeouts: int
    invalid_streak: int
    max_retries: int = 3
    timeout_retries: int = 1
    invalid_threshold: int = DEFAULT_INVALID_THRESHOLD
    token_max: int = 2_000_000
    expect_actions: bool = True  # False when the answer is not an actions plan (dedupe)


def backend_missing_outcome(message: str) -> AttemptOutcome:
    """``BackendMissing`` raised by ``call``: halt the write stage, charge nothing.

    Args:
        message: The exception's message (kept to 300 characters in ``detail``).

    Returns:
        Outcome ``fail_backend_missing``: 0 entries, disposition ``halt``, no writer class.
    """
    return AttemptOutcome("fail_backend_missing", 0, "halt", "", message[:300])


def _actions_error(result: ModelResult) -> str:
    """Why the result text holds no actions, or ``""`` when it parses."""
    try:
        parse_actions(result.text)
    except UnparseableOutput as exc:
        return str(exc)
    return ""


def _is_unknown_command(result: ModelResult) -> bool:
    clean_zero = (
        result.envelope_ok
        and not result.is_error
        and not result.timed_out
        and result.exit_code == 0
        and result.num_turns == 0
    )
    said_unknown = result.text.lstrip().lower().startswith("unknown command")
    return clean_zero or said_unknown


def retries_exhausted(prior_failures: int, max_retries: int) -> bool:
    """The one rule for when a failing step stops retrying: this failure reaches the limit.

    Used by every counted failure — a paid attempt, a stage's exception, an add that could
    not write its notes, a note edit recovery could not apply — so ``max_retries`` means
    the same number of tries everywhere.

    Args:
        prior_failures: Failures counted before this one.
        max_retries: ``REFLECT_DRAIN_MAX_RETRIES``.

    Returns:
        True when ``prior_failures + 1 >= max_retries``: poison (or give up) now.
    """
    return prior_failures + 1 >= max_retries


def _paid_failure(outcome: str, ctx: AttemptContext, cls: str, detail: str) -> AttemptOutcome:
    if retries_exhausted(ctx.prior_failures, ctx.max_retries):
        return AttemptOutcome(
            outcome, 1, "poison", cls, f"{detail}; retries exhausted ({ctx.prior_failures + 1})"
        )
    return AttemptOutcome(outcome, 1, "retry", cls, detail)


def _exit_label(code: int | None) -> str:
    return "none" if code is None else str(code)


def _api_error_outcome(result: ModelResult, ctx: AttemptContext) -> AttemptOutcome | None:
    """Row 0: the API backends' error kinds (``writer.api_result.ERROR_KINDS``).

    429/529/overload defer at $0 until ``retry-after``; an oversized prompt is the free
    quarantine; a refused key or an unknown model halts like a missing binary; 5xx and our
    HTTP timeout are paid retries and a refused connection a free one (all bounded by
    ``max_retries``);
    ``bad_request`` falls through to the ordinary table (``fail_is_error``).
    """
    kind, what = result.error_kind, result.text.strip()[:200]
    if kind == "rate_limited":
        wait = result.retry_after_sec
        after = f"retry after {wait:g}s" if wait > 0 else "no retry-after"
        return AttemptOutcome("defer_rate_limited", 0, "defer", "", f"{after}: {what}")
    if kind == "too_long":
        return AttemptOutcome(
            "quarantine_oversized", 0, "quarantine", "", f"size rejection: {what}"
        )
    if kind == "auth":
        return AttemptOutcome("fail_backend_auth", 0, "halt", "", f"key or account refused: {what}")
    if kind == "unknown_model":
        return AttemptOutcome(
            "fail_unknown_model", 0, "halt", "", f"model {result.model!r} unknown: {what}"
        )
    if kind == "server":
        return _paid_failure("fail_server_error", ctx, "", f"server error: {what}")
    if kind == "timeout":
        return _paid_failure("fail_timeout", ctx, "", f"no answer in time: {result.stderr[:200]}")
    if kind == "connection":
        failed = _paid_failure("fail_connection", ctx, "", f"no connection: {what}")
        return AttemptOutcome(failed.outcome, 0, failed.disposition, "", failed.detail)
    return None


def classify_attempt(result: ModelResult, ctx: AttemptContext) -> AttemptOutcome:
    """Score one attempt; see the module docstring for the order and the rationale.

    Args:
        result: The model call's result (persisted before this is called).
        ctx: The job's history before this attempt, and the limits that apply.

    Returns:
        The first matching row of the table: the outcome name, the budget units it costs
        (0 or 1), the disposition, the writer class that feeds the drift streak, and a
        human-readable detail.
    """
    # A run killed by our timeout counts as "no output" even if it printed a fragment: the
    # CLI prints its envelope only at the end, so a fragment is not an answer.
    no_output = not result.raw_stdout.strip() or (result.timed_out and not result.envelope_ok)
    actions_error = _actions_error(result) if ctx.expect_actions and result.envelope_ok else ""
    failed = (
        result.is_error
        or not result.envelope_ok
        or result.timed_out
        or result.exit_code != 0
        or bool(actions_error)
    )

    cls = classify_output(result.raw_stdout)
    if cls == "valid" and actions_error and not result.is_error:
        cls = "prose"

    # 0. what an API backend (openai, anthropic, codex) already knows went wrong.
    if result.error_kind:
        api = _api_error_outcome(result, ctx)
        if api is not None:
            return api

    # 1. install fault: halt, free, no retry charged.
    if _is_unknown_command(result):
        return AttemptOutcome(
            "fail_unknown_command",
            0,
            "halt",
            cls,
            f"zero-turn/unknown-command answer: {result.text.strip()[:160]!r}",
        )

    # 2. input too large: free quarantine (never retried, never budget-charged).
    if failed:
        marker = (
            find_marker(result.text, SIZE_MARKERS)
            or find_marker(result.stderr, SIZE_MARKERS)
            or find_marker(result.raw_stdout, SIZE_MARKERS)
        )
        if marker:
            return AttemptOutcome(
                "quarantine_oversized", 0, "quarantine", cls, f"size rejection: {marker!r}"
            )

    # 3. writer drift.
    if cls != "valid":
        threshold = (
            ctx.invalid_threshold if ctx.invalid_threshold > 0 else DEFAULT_INVALID_THRESHOLD
        )
        streak = ctx.invalid_streak + 1
        if cls == "poisoned" or streak >= threshold:
            marker = find_marker(result.raw_stdout)
            why = f"marker {marker!r}" if cls == "poisoned" else f"threshold {threshold}"
            return AttemptOutcome(
                "poison_writer_drift",
                1,
                "poison",
                cls,
                f"writer_drift: {streak} consecutive invalid writer outputs ({why})",
            )

    # 4. no output at all (timeout kill, crash).
    if no_output:
        code = result.exit_code
        timeout = code == TIMEOUT_EXIT_CODE or result.timed_out
        # timeout_retries 0 disables the timeout quarantine: timeouts then take the retry path.
        if timeout and 0 < ctx.timeout_retries <= ctx.prior_timeouts + 1:
            return AttemptOutcome(
                "poison_timeout_exit_124",
                1,
                "poison",
                cls,
                f"no output after timeout; timeouts={ctx.prior_timeouts + 1} "
                f">= {ctx.timeout_retries}",
            )
        partial = f", {len(result.raw_stdout)} chars of partial stdout" if result.raw_stdout else ""
        detail = f"no output (exit={_exit_label(code)}{partial}): {result.stderr.strip()[:200]}"
        return _paid_failure(f"fail_no_output_exit_{_exit_label(code)}", ctx, cls, detail)

    # 5. token budget (post hoc: the CLI reports usage at the end).
    if result.tokens > ctx.token_max:
        return AttemptOutcome(
            "poison_budget", 1, "poison", cls, f"tokens {result.tokens} > {ctx.token_max}"
        )

    # 6. the CLI stopped at --max-turns: nothing more to add.
    if result.terminal_reason == "max_turns" or result.subtype == "error_max_turns":
        return AttemptOutcome(
            "partial_max_turns", 1, "done", cls, f"stopped at max turns ({result.num_turns})"
        )

    # 7. paid failures: retry, or poison once retries are exhausted.
    if result.is_error or not result.envelope_ok:
        what = result.text.strip()[:200] if result.envelope_ok else "no result envelope"
        return _paid_failure("fail_is_error", ctx, cls, f"is_error: {what}")
    if result.exit_code != 0:
        label = _exit_label(result.exit_code)
        return _paid_failure(f"fail_exit_{label}", ctx, cls, f"exit code {label}")
    if actions_error:
        return _paid_failure("fail_unparseable", ctx, cls, actions_error)

    return AttemptOutcome("ok", 1, "ok", cls, f"turns={result.num_turns}")


# --- what an outcome does to its job (applied by pipeline/write.py) --------------------

# Error-ledger kinds per outcome (SPEC-drain §5.11), with B18 fixed: paid failures are reported too.
ERROR_KINDS: dict[str, tuple[str, str]] = {
    "poison_writer_drift": ("drain_poison", "error"),
    "poison_budget": ("drain_budget_exceeded", "error"),
    "poison_timeout_exit_124": ("drain_timeout_exhausted", "warn"),
    "partial_max_turns": ("drain_max_turns_partial", "warn"),
    "fail_unknown_command": ("drain_unknown_command", "error"),
    "fail_backend_missing": ("drain_unknown_command", "error"),
    "quarantine_oversized": ("drain_quarantine_oversized", "warn"),
    "poison_retries_exhausted": ("drain_poison", "error"),
    # An exception inside a stage (pipeline/runtime.py:stage_failed); free either way.
    "fail_stage_error": ("stage_error", "warn"),
    "poison_stage_error": ("stage_error", "error"),
    "defer_rate_limited": ("drain_quota_deferred", "warn"),
    "fail_backend_auth": ("drain_backend_auth", "error"),
    "fail_unknown_model": ("drain_unknown_model", "error"),
}


@dataclass(frozen=True)
class JobMove:
    """The job transition one disposition maps to.

    ``state``/``stage`` are the target (``stage`` None keeps the job's stage; a terminal
    move goes through ``finish``, which sets stage ``done`` for state ``done``).
    ``run_at``: ``"now"`` (due at once), ``"backoff"`` (due after the retry backoff),
    ``"retry_after"`` (due when the provider's ``retry-after`` has passed) or None.
    ``dispatch``: the stage message to send after the commit, if any.
    """

    state: str
    stage: str | None = None
    run_at: str | None = None
    dispatch: str | None = None
    terminal: bool = False
    counts_failure: bool = False  # failures += 1 (timeouts too when the call timed out)
    sets_halt: bool = False  # raise the write-stage halt flag


DISPOSITION_MOVES: dict[str, JobMove] = {
    "ok": JobMove("queued", stage="add", run_at="now", dispatch="add"),
    "retry": JobMove("retrying", run_at="backoff", dispatch="write", counts_failure=True),
    "halt": JobMove("halted", sets_halt=True),
    "defer": JobMove("deferred", run_at="retry_after", dispatch="write"),
    "done": JobMove("done", terminal=True),
    "quarantine": JobMove("quarantined", terminal=True),
    "poison": JobMove("poisoned", terminal=True),
}


def stage_error_outcome(
    stage: str, error: str, *, transient: bool, prior_failures: int, max_retries: int
) -> AttemptOutcome:
    """How an exception raised inside a stage ends the attempt (it used to end nothing: the
    job sat ``running`` until its lease expired, four times, then ``poison_crash_loop``).

    A transient error (the disk, the network, a locked database) retries with backoff like
    a failed call, and poisons once ``max_retries`` failures are reached; any other error
    would only happen again on the same input, so it poisons at once — a person can
    ``retry`` after a fix. Free: no model call is charged for it (a paid answer recorded
    before the error stays recorded and is reused by the next attempt).

    Args:
        stage: The stage that raised (``prepare``, ``write``, ``add``).
        error: ``"<ExceptionType>: <message>"``.
        transient: Whether the error may pass by itself.
        prior_failures: The job's failures before this one.
        max_retries: ``REFLECT_DRAIN_MAX_RETRIES``.

    Returns:
        ``fail_stage_error`` (disposition ``retry``) or ``poison_stage_error`` (``poison``),
        0 entries, no writer class.
    """
    detail = f"{stage} stage error: {error}"
    if not transient:
        return AttemptOutcome("poison_stage_error", 0, "poison", "", f"{detail} (deterministic)")
    if retries_exhausted(prior_failures, max_retries):
        return AttemptOutcome(
            "poison_stage_error",
            0,
            "poison",
            "",
            f"{detail}; retries exhausted ({prior_failures + 1})",
        )
    return AttemptOutcome("fail_stage_error", 0, "retry", "", detail)


def job_move(disposition: str) -> JobMove:
    """The job transition for an attempt's disposition.

    Args:
        disposition: ``AttemptOutcome.disposition``.

    Returns:
        Its ``JobMove``; an unknown disposition is treated as poison (terminal, never retried).
    """
    return DISPOSITION_MOVES.get(disposition, DISPOSITION_MOVES["poison"])


def error_kind(outcome: str) -> tuple[str, str] | None:
    """The error-ledger ``(kind, severity)`` an outcome is reported under, if any.

    Args:
        outcome: ``AttemptOutcome.outcome``.

    Returns:
        The pair from ``ERROR_KINDS``, or None for outcomes that are not reported.
    """
    return ERROR_KINDS.get(outcome)
