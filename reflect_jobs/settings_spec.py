"""Every setting's name, variable, tier, default and meaning — the one table (stdlib, no imports).

Three places need the same names and defaults: ``config.Settings`` (the validated object the
worker and the CLI use), ``envpaths`` (the hook's few stdlib lookups) and ``userconfig``
(the config file, whose keys are the settings' names). Keeping them in one table means a
setting cannot be renamed in one place and not the other, ``reflect-jobs config`` can list
every setting with its source, and the docs test can check that README and
docs/CONFIGURATION.md describe exactly what is here.

Tiers (docs/CONFIGURATION.md):

* ``user`` — the few a person sets; documented in the README.
* ``advanced`` — tuning and special setups; documented in docs/CONFIGURATION.md.
* ``internal`` — fixed values with no variable (:data:`INTERNAL`); a variable that used to
  set one is in :data:`DEPRECATED` and only earns a warning.

Not settings at all (:data:`MARKERS`): variables the system sets for its own children or the
tests set for fault injection.

This module is imported by the hook: plain tuples, no dataclasses or typing.
"""

from __future__ import annotations

USER = "user"
ADVANCED = "advanced"

# Kinds: how a value is parsed (``config._parse``). "int"/"float" carry bounds in ``opts``.
# A kind the generic parser does not know ("path", "url", "special") is handled by name.

# fmt: off
#: (name, variable, tier, kind, default, shown default, opts, help). ``name`` is the
#: ``Settings`` field and the config-file key; ``variable`` is None for a key that only the
#: config file sets. ``shown`` is the default as a person reads it (derived ones included).
SPECS: tuple[tuple, ...] = (
    # --- user tier (README "Configuration") ----------------------------------------------
    ("home", "REFLECT_HOME", USER, "path", None, "~/.reflect", {},
     "State: the ledger, queue, spool, logs and raw model answers."),
    ("kb_path", "GLOBAL_LEARNINGS_PATH", USER, "path", None, "~/.learnings", {},
     "The knowledge base: notes, sidecars, reflection logs and the derived index/."),
    ("writer_backend", "REFLECT_WRITER_BACKEND", USER, "choice", "auto", "auto",
     {"choices": ("auto", "claude", "heuristic", "openai", "anthropic", "codex")},
     "The writer: auto = the Claude CLI when installed, else the heuristic writer."),
    ("model", "REFLECT_DRAIN_MODEL", USER, "str", "sonnet", "sonnet", {},
     "The writer's model (a Claude alias by default: set a served name for the others)."),
    ("daily_max", "REFLECT_DRAIN_DAILY_MAX", USER, "int", 20, "20", {"min": 0},
     "Budget units (paid calls) per UTC day."),
    ("recall_on_prompt", "REFLECT_RECALL_ON_PROMPT", USER, "bool", False, "false", {},
     "Up to 3 matching learnings with each prompt (install adds the UserPromptSubmit hook)."),
    ("disabled", "REFLECT_DISABLED", USER, "bool", False, "false", {},
     "Kill switch: hooks capture nothing and the worker runs no stage."),
    ("openai_base_url", "REFLECT_OPENAI_BASE_URL", USER, "url", "", "api.openai.com", {},
     "The openai writer's endpoint (ends in /v1); empty = the hosted API."),
    ("openai_api_key", "REFLECT_OPENAI_API_KEY", USER, "secret", "", "$OPENAI_API_KEY", {},
     "The openai writer's key (falls back to OPENAI_API_KEY; empty is fine locally)."),
    ("db_url", "REFLECT_DB_URL", USER, "special", None, "sqlite:///$REFLECT_HOME/reflect.db",
     {}, "The ledger: a sqlite:/// or postgresql+psycopg:// URL."),
    ("queue_url", "REFLECT_QUEUE_URL", USER, "special", None,
     "sqlite:///$REFLECT_HOME/queue.db", {}, "The queue: a sqlite:/// or redis:// URL."),
    ("ignore", None, USER, "list", (), "[]", {},
     "Repositories never captured nor told anything (`reflect-jobs ignore`; config file only)."),
    # --- advanced: caps and leases (ARCHITECTURE §4) ----------------------------------------
    ("run_max", "REFLECT_DRAIN_MAX", ADVANCED, "int", 3, "3", {"min": 0},
     "Model calls per debounce window (0 = no per-window cap)."),
    ("debounce_sec", "REFLECT_DRAIN_DEBOUNCE_SEC", ADVANCED, "int", 600, "600", {"min": 0},
     "The per-window cap's window in seconds (0 = no per-window cap)."),
    ("capture_settle_sec", "REFLECT_CAPTURE_SETTLE_SEC", ADVANCED, "int", 30, "30", {"min": 0},
     "Captures of one session within this many seconds become one job."),
    ("write_concurrency", "REFLECT_WRITE_CONCURRENCY", ADVANCED, "int", 1, "1", {"min": 1},
     "Paid calls in flight at once, across every worker and machine."),
    ("write_lease_ttl_sec", "REFLECT_WRITE_LEASE_TTL_SEC", ADVANCED, "int", 30, "30",
     {"min": 1}, "Redis queue only: a killed holder's write slot frees within this."),
    ("max_retire_per_day", "REFLECT_MAX_RETIRE_PER_DAY", ADVANCED, "int", 5, "5", {"min": 0},
     "Automatic retirements per UTC day; further DELETEs wait as proposals."),
    ("max_new_global_per_session", "REFLECT_MAX_NEW_GLOBAL_PER_SESSION", ADVANCED, "int", 2,
     "2", {"min": 0},
     "New global learnings one session may propose (each told only in its repository until "
     "a second session or a person confirms it); the rest are stored repository-scoped."),
    # --- advanced: retries, timeouts, poison (SPEC-drain §5.7) ------------------------------
    ("max_retries", "REFLECT_DRAIN_MAX_RETRIES", ADVANCED, "int", 3, "3", {"min": 1},
     "Paid attempts before a job is poisoned."),
    ("retry_base_sec", "REFLECT_RETRY_BASE_SEC", ADVANCED, "int", 60, "60", {"min": 0},
     "First retry delay, doubling."),
    ("timeout_sec", "REFLECT_DRAIN_TIMEOUT", ADVANCED, "int", 300, "300", {"min": 1},
     "The write stage's timeout; the model call gets TIMEOUT-90 s."),
    ("invalid_threshold", "REFLECT_DRAIN_INVALID_THRESHOLD", ADVANCED, "int", 3, "3",
     {"min": 1}, "Unparseable answers in a row that poison a job."),
    ("token_max", "REFLECT_DRAIN_TOKEN_MAX", ADVANCED, "int", 2_000_000, "2000000", {"min": 1},
     "Tokens one call may use before the job is poisoned."),
    ("lease_sec", "REFLECT_LEASE_SEC", ADVANCED, "special", None, "TIMEOUT+60", {},
     "A claimed job's lease; a dead worker's job is recovered after it."),
    # --- advanced: the writer (ARCHITECTURE §5) ----------------------------------------------
    ("claude_bin", "REFLECT_DRAIN_CLAUDE_BIN", ADVANCED, "str", "claude", "claude", {},
     "The Claude Code CLI (a name on PATH or a path)."),
    ("writer_cwd", "REFLECT_DRAIN_CWD", ADVANCED, "path", None, "$HOME", {},
     "The writer child's working directory."),
    ("max_input_chars", "REFLECT_DRAIN_MAX_INPUT_CHARS", ADVANCED, "int", 60_000, "60000",
     {"min": 1000}, "A slice longer than this is cut."),
    ("codex_bin", "REFLECT_CODEX_BIN", ADVANCED, "str", "codex", "codex", {},
     "The Codex CLI for the codex writer."),
    ("prices_path", "REFLECT_PRICES", ADVANCED, "special", "", "", {},
     "A JSON price file extending the built-in table (USD per 1M tokens)."),
    ("dry_run", "REFLECT_DRAIN_DRY_RUN", ADVANCED, "bool", False, "false", {},
     "Read-only: only the log says what would run."),
    ("skip_reindex", "REFLECT_DRAIN_SKIP_REINDEX", ADVANCED, "bool", False, "false", {},
     "Do not reindex after an add (another machine indexes this KB)."),
    # --- advanced: quota gate (SPEC-drain §5.5) -----------------------------------------------
    ("quota_gate", "REFLECT_QUOTA_GATE", ADVANCED, "bool", True, "true", {},
     "Defer paid calls while the provider's rate-limit windows are nearly used."),
    ("quota_util_threshold", "REFLECT_QUOTA_UTIL_THRESHOLD", ADVANCED, "special", None, "",
     {}, "Close the gate at this utilisation (0..1]; empty = the provider's warning."),
    # --- advanced: knowledge base and index (ARCHITECTURE §8) --------------------------------
    ("dedup_threshold", "REFLECT_DEDUP_THRESHOLD", ADVANCED, "float", 0.97, "0.97",
     {"low": 0.0, "high": 1.0}, "Similarity above which a new learning is a twin (proof)."),
    ("review_below", "REFLECT_REVIEW_BELOW", ADVANCED, "float", 0.5, "0.5",
     {"low": 0.0, "high": 1.0},
     "A learning below this confidence waits for review (status proposed)."),
    ("index_vectors", "REFLECT_INDEX_VECTORS", ADVANCED, "bool", True, "true", {},
     "The vector/graph index (false = lexical only, no model)."),
    ("embed_model", "REFLECT_EMBED_MODEL", ADVANCED, "special", None, "the shipped MiniLM", {},
     "A local model directory or a hub id owner/name."),
    ("recall_worker_ms", "REFLECT_RECALL_WORKER_MS", ADVANCED, "int", 30, "30", {"min": 0},
     "Per-prompt recall waits this long for the worker's model, then ranks lexically."),
    ("model_idle_sec", "REFLECT_MODEL_IDLE_SEC", ADVANCED, "int", 600, "600", {"min": 1},
     "The worker's model child exits after this long idle."),
    ("search_worker_sec", "REFLECT_SEARCH_WORKER_SEC", ADVANCED, "float", 30.0, "30",
     {"min": 0.1}, "A CLI search waits this long for the worker, then answers lexically."),
    ("log_max_bytes", "REFLECT_DRAIN_LOG_MAX_BYTES", ADVANCED, "int", 10 * 1024 * 1024,
     "10485760", {"min": 1024}, "drain.log and consumer.log rotate at this size."),
    # --- advanced: checkpoints (ARCHITECTURE §14.1) ------------------------------------------
    ("context_window", "REFLECT_CONTEXT_WINDOW", ADVANCED, "int", 200_000, "200000",
     {"min": 1000}, "Tokens a full context holds (the fill's denominator)."),
    ("checkpoints", "REFLECT_CHECKPOINTS", ADVANCED, "special", (20, 40, 60, 80), "20,40,60,80",
     {}, "Context-fill percentages that make a pass (off = every capture)."),
    ("checkpoint_cheap_model", "REFLECT_CHECKPOINT_CHEAP_MODEL", ADVANCED, "str", "",
     "haiku (Claude writers) / model", {}, "The first checkpoint's model."),
    ("deep_model", "REFLECT_DEEP_MODEL", ADVANCED, "str", "", "model", {},
     "The model of a session's deep pass (end, compaction, idle, by hand)."),
    ("session_idle_sec", "REFLECT_SESSION_IDLE_SEC", ADVANCED, "int", 3600, "3600", {"min": 1},
     "Silence after which a session that never ended gets its deep pass."),
    # --- advanced: the reflection store (ARCHITECTURE §14) -----------------------------------
    ("reflect_min_turns", "REFLECT_REFLECT_MIN_TURNS", ADVANCED, "int", 3, "3", {"min": 1},
     "Dialogue turns since a session's last pass that earn a reflection pass without a signal."),
    ("reflect_max_chars", "REFLECT_REFLECT_MAX_CHARS", ADVANCED, "int", 24_000, "24000",
     {"min": 1000}, "The condensed transcript a reflection pass reads (head and tail kept)."),
    ("dedupe_model", "REFLECT_DEDUPE_MODEL", ADVANCED, "str", "", "the cheap model", {},
     "The dedupe pass's model."),
    ("dedupe_daily_max", "REFLECT_DEDUPE_DAILY_MAX", ADVANCED, "int", 5, "5", {"min": 0},
     "Dedupe calls per UTC day, all repositories together."),
    # --- advanced: the nightly layer (docs/NIGHTLY.md) ---------------------------------------
    ("nightly_at", "REFLECT_NIGHTLY_AT", ADVANCED, "str", "03:30", "03:30", {},
     "Local time (HH:MM) of the nightly pass; a missed run catches up once at the next start."),
    ("nightly_daily_max", "REFLECT_NIGHTLY_DAILY_MAX", ADVANCED, "int", 5, "5", {"min": 0},
     "Nightly paid calls (weekly synthesis) per UTC day, apart from the writer's."),
    ("promote", "REFLECT_PROMOTE", ADVANCED, "choice", "auto", "auto",
     {"choices": ("auto", "1", "0")},
     "Promote into Claude Code's MEMORY.md: 1 = candidate, 0 = never; a ledger lease picks one."),
    ("memory_lines", "REFLECT_MEMORY_LINES", ADVANCED, "int", 40, "40", {"min": 1},
     "Lines of the managed section in MEMORY.md (at most 100; Claude Code loads 200)."),
    ("host", "REFLECT_HOST", ADVANCED, "str", "", "the hostname", {},
     "This machine's name in reflections/<host>.jsonl."),
    ("memory_homes", "REFLECT_MEMORY_HOMES", ADVANCED, "path", None,
     "$REFLECT_HOME/memory-homes.conf", {}, "The memory-home mapping file."),
    ("mcp_all_repos", "REFLECT_MCP_ALL_REPOS", ADVANCED, "bool", False, "false", {},
     "Let the MCP server read every repository's learnings and items (writes stay local)."),
    # --- advanced: the data boundary (ARCHITECTURE §2.2) -------------------------------------
    ("boundary_cmd", "REFLECT_BOUNDARY_CMD", ADVANCED, "str", "", "", {},
     "A command asked before a transcript is read (exit 1 = restricted)."),
    ("boundary_timeout_sec", "REFLECT_BOUNDARY_TIMEOUT_SEC", ADVANCED, "int", 5, "5",
     {"min": 1}, "After this long the boundary command counts as restricted."),
)
# fmt: on

#: Fixed values that used to be variables (ARCHITECTURE §9): name → (value, why).
INTERNAL: dict[str, tuple[object, str]] = {
    "maintain_every": (10, "graph maintenance every 10th reindex pass"),
    "timeout_retries": (1, "the first no-output timeout poisons the job (SPEC-drain §5.7)"),
    "max_recoveries": (3, "a job that killed its worker 3 times is poisoned"),
    "quota_ttl_sec": (3600, "a quota snapshot older than an hour is ignored"),
    "workers": (2, "worker threads; `worker --workers N` / `drain --workers N`"),
    "stall_warn_sec": (6 * 3600, "status warns after 6 h of waiting with no success"),
    "dedupe_interval_sec": (86_400, "a repository is deduplicated at most once a day"),
}

#: Variables no longer read (docs/DEPRECATIONS.md): variable → (setting or None, what to do).
#: Setting one prints a warning; only ``REFLECT_STATE_DIR`` is still honoured (as
#: ``REFLECT_HOME``), because ignoring it would point a working install at an empty home.
DEPRECATED: dict[str, tuple[str | None, str]] = {
    "REFLECT_DRAIN_MAINTAIN_EVERY": ("maintain_every", "fixed at 10"),
    "REFLECT_DRAIN_TIMEOUT_RETRIES": ("timeout_retries", "fixed at 1"),
    "REFLECT_MAX_RECOVERIES": ("max_recoveries", "fixed at 3"),
    "REFLECT_QUOTA_TTL_SEC": ("quota_ttl_sec", "fixed at 3600"),
    "REFLECT_WORKERS": ("workers", "fixed at 2; use `reflect-jobs worker --workers N`"),
    "REFLECT_STALL_WARN_SEC": ("stall_warn_sec", "fixed at 6 h"),
    "REFLECT_DEDUPE_INTERVAL_SEC": ("dedupe_interval_sec", "fixed at 86400"),
    "REFLECT_STATE_DIR": ("home", "still honoured until 2027-01-01; rename it REFLECT_HOME"),
    "REFLECT_DRAIN_CASCADE": (
        None,
        "the $0 cascade always runs (the variable was parsed and never read: "
        "REFLECT_DRAIN_CASCADE=0 turned nothing off); unset it",
    ),
    "REFLECT_DRAIN_WRITER": (
        None,
        "the agentic writer was removed (it paid for a 16-turn tool-free call and "
        "discarded the answer); every pass is the one extract call; unset it",
    ),
    "REFLECT_DRAIN_MAX_TURNS": (None, "it only bounded the removed agentic writer; unset it"),
}

#: Variables that are not configuration: (variable, who sets it).
MARKERS: tuple[tuple[str, str], ...] = (
    (
        "REFLECT_DRAIN_CHILD",
        "set by the writer for its own model call: every hook of ours is a no-op",
    ),
    ("REFLECT_FAILPOINTS", "tests: arm named failpoints (reflect_jobs/faults.py)"),
    ("REFLECT_FAILPOINT_DIR", "tests: where a paused failpoint waits"),
)

#: name → its row of :data:`SPECS`.
BY_NAME: dict[str, tuple] = {row[0]: row for row in SPECS}
#: variable → setting name, for every variable a setting reads.
BY_VAR: dict[str, str] = {row[1]: row[0] for row in SPECS if row[1]}


def variable(name: str) -> str | None:
    """The environment variable of a setting.

    Args:
        name: The setting's name.

    Returns:
        The variable, or None for a config-file-only key.
    """
    return BY_NAME[name][1]


def tier_names(tier: str) -> list[str]:
    """The settings of one tier, in table order.

    Args:
        tier: :data:`USER` or :data:`ADVANCED`.

    Returns:
        Their names.
    """
    return [row[0] for row in SPECS if row[2] == tier]
