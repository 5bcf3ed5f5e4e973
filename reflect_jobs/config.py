"""One validated settings object, read from the environment.

Every knob is an environment variable so that a hook, a launchd/systemd unit, a test and
a person at a shell all configure the system the same way. The names and defaults follow
docs/ARCHITECTURE.md §9 and the original drain (SPEC-drain.md §5.12), so an existing
``REFLECT_DRAIN_*`` setup keeps its meaning.

A bad value is a :class:`SettingsError` naming the variable — the CLI prints it as one line
and exits 2. The hook path never builds a full ``Settings`` (it reads the three variables it
needs through ``envpaths``), so a typo in an unrelated knob can never break a session.
"""

from __future__ import annotations

import os
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from .envpaths import TRUE, home_dir_str, is_truthy, queue_url

FALSE = {"0", "false", "no", "off", ""}


class SettingsError(ValueError):
    """A configuration value is unusable; the message names the variable."""


def _env(name: str, environ: dict[str, str] | None = None) -> str | None:
    env = os.environ if environ is None else environ
    value = env.get(name)
    return None if value is None else value.strip()


def home_dir(environ: dict[str, str] | None = None) -> Path:
    """The state directory (``envpaths.home_dir_str``) as a :class:`~pathlib.Path`.

    Args:
        environ: The environment to read; ``None`` means ``os.environ``.

    Returns:
        ``$REFLECT_HOME`` (or ``REFLECT_STATE_DIR``), default ``~/.reflect``; not created.
    """
    return Path(home_dir_str(environ))


__all__ = ["Settings", "SettingsError", "home_dir", "is_truthy", "load_settings", "queue_url"]


def _int(environ: dict[str, str], name: str, default: int, *, minimum: int = 0) -> int:
    raw = _env(name, environ)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise SettingsError(f"{name} must be an integer, got {raw!r}") from None
    if value < minimum:
        raise SettingsError(f"{name} must be >= {minimum}, got {value}")
    return value


def _float(
    environ: dict[str, str],
    name: str,
    default: float | None,
    *,
    low: float | None = None,
    high: float | None = None,
) -> float | None:
    raw = _env(name, environ)
    if raw is None or raw == "":
        return default
    try:
        value = float(raw)
    except ValueError:
        raise SettingsError(f"{name} must be a number, got {raw!r}") from None
    if (low is not None and value < low) or (high is not None and value > high):
        raise SettingsError(f"{name} must be between {low} and {high}, got {value}")
    return value


def _bool(
    environ: dict[str, str], name: str, default: bool, *, empty_is_default: bool = False
) -> bool:
    raw = _env(name, environ)
    if raw is None or (empty_is_default and raw == ""):
        return default
    low = raw.lower()
    if low in TRUE:
        return True
    if low in FALSE:
        return False
    raise SettingsError(f"{name} must be 0/1 (or true/false), got {raw!r}")


def _choice(environ: dict[str, str], name: str, default: str, choices: tuple[str, ...]) -> str:
    raw = (_env(name, environ) or "").lower()
    if not raw:
        return default
    if raw not in choices:
        raise SettingsError(f"{name} must be one of {', '.join(choices)}, got {raw!r}")
    return raw


WRITER_BACKENDS = ("auto", "claude", "heuristic", "openai", "anthropic", "codex")
#: A hub model id as sentence-transformers resolves it: ``name`` or ``owner/name``.
_HUB_MODEL = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*(/[A-Za-z0-9][A-Za-z0-9._-]*)?")


def _embed_model(environ: dict[str, str], *, check_path: bool) -> str | None:
    """``REFLECT_EMBED_MODEL``: a local model directory or a hub model name, or None.

    A value that looks like a path (``/``, ``~``, ``./`` or ``../`` first, or an existing
    path) must name a directory when the vector index is on, since that is where
    sentence-transformers loads it from; ``~`` is expanded. Anything else must be a hub
    model id (``all-MiniLM-L6-v2``, ``sentence-transformers/all-MiniLM-L6-v2``); with the
    network off that only loads if it is cached, which ``doctor`` checks.

    Args:
        environ: The environment to read.
        check_path: Whether a path must exist (the vector index is on).

    Returns:
        The model to load, or None for the packaged MiniLM.

    Raises:
        SettingsError: The value is neither a usable directory nor a hub model id.
    """
    name = "REFLECT_EMBED_MODEL"
    raw = _env(name, environ)
    if not raw:
        return None
    if raw.startswith(("/", "~", "./", "../")) or os.path.exists(raw):
        path = os.path.expanduser(raw)
        if check_path and not os.path.isdir(path):
            raise SettingsError(
                f"{name} must be a model directory or a hub model name; no directory at {path!r}"
            )
        return path
    if len(raw) > 200 or not _HUB_MODEL.fullmatch(raw):
        raise SettingsError(
            f"{name} must be a model directory or a hub model name (owner/name), got {raw!r}"
        )
    return raw


@dataclass(frozen=True)
class Settings:
    """Everything the workers and the CLI need to know, validated once."""

    home: Path
    kb_path: Path
    db_url: str
    queue_url: str
    disabled: bool = False
    #: ``REFLECT_BOUNDARY_CMD``: the data-boundary command asked before prepare reads a
    #: transcript (``boundary.py``, ARCHITECTURE §2.2); empty = no boundary.
    boundary_cmd: str = ""
    #: ``REFLECT_BOUNDARY_TIMEOUT_SEC``: after this long the command counts as restricted.
    boundary_timeout_sec: int = 5
    #: ``REFLECT_RECALL_ON_PROMPT``: per-prompt recall (ARCHITECTURE §13). The hook reads the
    #: variable itself (stdlib path); this field is for ``doctor``/``install`` and validation.
    recall_on_prompt: bool = False
    # caps (ARCHITECTURE §4): budget units per UTC day, model calls per debounce window
    # (a debounce of 0 means no per-window cap; the daily cap still holds)
    daily_max: int = 20
    run_max: int = 3
    debounce_sec: int = 600
    capture_settle_sec: int = 30
    # the write lease (ARCHITECTURE §4): paid calls in flight at once, across every consumer
    write_concurrency: int = 1
    write_lease_ttl_sec: int = 30
    # blast radius (ARCHITECTURE §7): retirements applied per UTC day; the rest are proposals
    max_retire_per_day: int = 5
    # retries, poison, timeouts (SPEC-drain §5.7)
    max_retries: int = 3
    retry_base_sec: int = 60
    timeout_sec: int = 300
    timeout_retries: int = 1
    invalid_threshold: int = 3
    token_max: int = 2_000_000
    max_recoveries: int = 3
    lease_sec: int = 360
    # the writer (ARCHITECTURE §5)
    writer_backend: str = "auto"
    writer_mode: str = "extract"
    model: str = "sonnet"
    claude_bin: str = "claude"
    writer_cwd: Path = field(default_factory=Path.home)
    max_turns: int = 16
    max_input_chars: int = 60_000
    # the API writers (README "Writers"): openai-compatible endpoint, codex CLI, prices
    openai_base_url: str = ""
    openai_api_key: str = field(default="", repr=False)  # a secret: never printed
    codex_bin: str = "codex"
    prices_path: str = ""
    cascade: bool = True
    dry_run: bool = False
    skip_reindex: bool = False
    # quota gate (SPEC-drain §5.5)
    quota_gate: bool = True
    quota_ttl_sec: int = 3600
    quota_util_threshold: float | None = None
    api_key_auth: bool = False
    # KB and index
    dedup_threshold: float = 0.97
    # a learning below this confidence waits for review (status proposed, ARCHITECTURE §7.1)
    review_below: float = 0.5
    index_vectors: bool = True
    embed_model: str | None = None
    maintain_every: int = 10
    # operations
    log_max_bytes: int = 10 * 1024 * 1024
    workers: int = 2
    stall_warn_sec: int = 6 * 3600
    # the warm model service (ARCHITECTURE §8.1): seconds without search/reindex before it exits
    model_idle_sec: int = 600
    # checkpoints (ARCHITECTURE §14.1): when a session's capture makes a paid pass
    #: ``REFLECT_CONTEXT_WINDOW``: the tokens a full context holds (the fill's denominator).
    context_window: int = 200_000
    #: ``REFLECT_CHECKPOINTS``: context-fill percentages whose crossing makes one pass;
    #: empty (``off``) = every capture is a pass, as before checkpoints.
    checkpoints: tuple[int, ...] = (20, 40, 60, 80)
    #: ``REFLECT_CHECKPOINT_CHEAP_MODEL``: the model of the first (lowest) checkpoint's pass;
    #: empty = ``haiku`` for the Claude writers, ``REFLECT_DRAIN_MODEL`` for the others.
    checkpoint_cheap_model: str = ""
    #: ``REFLECT_DEEP_MODEL``: the model of a session's deep pass (PreCompact, SessionEnd,
    #: idle, a capture a person asked for); empty = ``REFLECT_DRAIN_MODEL``.
    deep_model: str = ""
    #: ``REFLECT_SESSION_IDLE_SEC``: silence after which a session that never ended gets its
    #: deep pass.
    session_idle_sec: int = 3600
    # the Reflection Store's dedupe pass (ARCHITECTURE §14): a cheap model, its own units
    #: ``REFLECT_DEDUPE_MODEL``: empty = ``REFLECT_CHECKPOINT_CHEAP_MODEL``.
    dedupe_model: str = ""
    #: ``REFLECT_DEDUPE_DAILY_MAX``: dedupe calls per UTC day, counted apart from the writer's.
    dedupe_daily_max: int = 5
    #: ``REFLECT_DEDUPE_INTERVAL_SEC``: a repository is deduplicated at most this often.
    dedupe_interval_sec: int = 86_400

    @property
    def cheap_pass_model(self) -> str:
        """The first checkpoint's model: ``REFLECT_CHECKPOINT_CHEAP_MODEL``, else a default.

        ``haiku`` is a Claude alias: an OpenAI-compatible server or Codex would not know it
        (the write stage would halt on an unknown model), so for those writers the default is
        ``REFLECT_DRAIN_MODEL``.
        """
        if self.checkpoint_cheap_model:
            return self.checkpoint_cheap_model
        return "haiku" if self.writer_backend in ("auto", "claude", "anthropic") else self.model

    @property
    def deep_pass_model(self) -> str:
        """The model of a deep pass: ``REFLECT_DEEP_MODEL``, else ``REFLECT_DRAIN_MODEL``."""
        return self.deep_model or self.model

    @property
    def dedupe_pass_model(self) -> str:
        """The dedupe pass's model: ``REFLECT_DEDUPE_MODEL``, else the cheap checkpoint model."""
        return self.dedupe_model or self.cheap_pass_model

    @property
    def model_socket(self) -> Path:
        """``$REFLECT_HOME/run/model.sock``: the running worker's search socket (0600, dir 0700)."""
        return self.home / "run" / "model.sock"

    @property
    def queue_is_redis(self) -> bool:
        """Whether the queue is Redis (``redis://``, ``rediss://``, ``unix://``), not SQLite."""
        return self.queue_url.startswith(("redis://", "rediss://", "unix://"))

    @property
    def slices_dir(self) -> Path:
        """``$REFLECT_HOME/slices``: where the prepare stage writes each job's slice."""
        return self.home / "slices"

    @property
    def log_path(self) -> Path:
        """``$REFLECT_HOME/drain.log``: the rotated JSON log (see ``reflect_jobs.logging``)."""
        return self.home / "drain.log"

    @property
    def model_timeout_sec(self) -> int:
        """The model call's own timeout: ``TIMEOUT − 90`` leaves room for the add stage.

        Seconds; 60 when the stage timeout is 150 s or less (as ``writer.timeout_for``).
        """
        return self.timeout_sec - 90 if self.timeout_sec > 150 else 60

    def resolved_writer_backend(self) -> str:
        """``auto`` means the Claude CLI when it is installed, else the heuristic writer.

        An explicit ``claude`` whose binary is missing is *not* downgraded: that is an
        install fault and halts the write stage (ARCHITECTURE §3) so nobody mistakes heuristic
        notes for model output.

        Returns:
            ``"claude"`` or ``"heuristic"``: the configured backend, or for ``auto`` the one
            that is available now (``claude_bin`` looked up on ``PATH``).
        """
        if self.writer_backend != "auto":
            return self.writer_backend
        return "claude" if shutil.which(self.claude_bin) else "heuristic"

    def redacted_urls(self) -> dict[str, str]:
        """Store URLs safe to print: passwords replaced (status, doctor).

        Returns:
            ``{"db": ..., "queue": ...}``, each passed through :func:`redact_url`.
        """
        return {"db": redact_url(self.db_url), "queue": redact_url(self.queue_url)}


def redact_url(url: str) -> str:
    """Hide secrets in a store URL for printing: ``user:***@host`` and ``?password=***``.

    Args:
        url: A database or queue URL, with or without credentials.

    Returns:
        The URL with the password of a ``user:password@`` part replaced by ``***`` (the user
        name is kept) and the values of ``password``/``passwd``/``pwd``/``secret``/``token``
        query parameters replaced by ``***``; unchanged when there is nothing to hide.
    """
    if "://" in url and "@" in url:
        scheme, rest = url.split("://", 1)
        creds, host = rest.rsplit("@", 1)
        if ":" in creds:
            creds = creds.split(":", 1)[0] + ":***"
        url = f"{scheme}://{creds}@{host}"
    return re.sub(r"(?i)([?&](?:password|passwd|pwd|secret|token)=)[^&]*", r"\1***", url)


def load_settings(environ: dict[str, str] | None = None) -> Settings:
    """Build and validate :class:`Settings`; raises :class:`SettingsError` on a bad value.

    Args:
        environ: The environment to read; ``None`` means ``os.environ``. It is copied, never
            modified.

    Returns:
        The validated settings. An unset variable takes the default shown on
        :class:`Settings`, and so does an empty one, except a boolean: empty means false.

    Raises:
        SettingsError: A value is not an integer, number, boolean or allowed choice, is out
            of its range, or a store URL has an unsupported scheme; the message names the
            variable.
    """
    env = dict(os.environ if environ is None else environ)
    home = home_dir(env)
    kb_raw = _env("GLOBAL_LEARNINGS_PATH", env)
    kb = Path(kb_raw).expanduser() if kb_raw else Path.home() / ".learnings"
    db_url = _env("REFLECT_DB_URL", env) or f"sqlite:///{home / 'reflect.db'}"
    if not db_url.startswith(("sqlite", "postgresql")):
        raise SettingsError(
            f"REFLECT_DB_URL must be a sqlite:/// or postgresql:// URL, got {db_url!r}"
        )
    qurl = queue_url(env)
    if not qurl.startswith(("sqlite://", "redis://", "rediss://", "unix://")):
        raise SettingsError(
            f"REFLECT_QUEUE_URL must be sqlite:///PATH or redis://HOST, got {qurl!r}"
        )
    timeout = _int(env, "REFLECT_DRAIN_TIMEOUT", 300, minimum=1)
    cwd_raw = _env("REFLECT_DRAIN_CWD", env)
    util = _float(env, "REFLECT_QUOTA_UTIL_THRESHOLD", None, low=0.0, high=1.0)
    if util is not None and util <= 0:
        raise SettingsError(f"REFLECT_QUOTA_UTIL_THRESHOLD must be in (0, 1], got {util}")
    base_url = _env("REFLECT_OPENAI_BASE_URL", env) or ""
    if base_url and not base_url.startswith(("http://", "https://")):
        raise SettingsError(
            f"REFLECT_OPENAI_BASE_URL must be an http:// or https:// URL, got {base_url!r}"
        )
    prices = _env("REFLECT_PRICES", env) or ""
    if prices:
        from .writer.prices import PricesError, load_prices_file

        try:
            load_prices_file(prices)
        except PricesError as exc:
            raise SettingsError(str(exc)) from None
    # An empty REFLECT_INDEX_VECTORS has always meant "on" (only 0/false/no/off turned it off).
    vectors = _bool(env, "REFLECT_INDEX_VECTORS", True, empty_is_default=True)
    return Settings(
        home=home,
        kb_path=kb,
        db_url=db_url,
        queue_url=qurl,
        disabled=_bool(env, "REFLECT_DISABLED", False),
        boundary_cmd=_env("REFLECT_BOUNDARY_CMD", env) or "",
        boundary_timeout_sec=_int(env, "REFLECT_BOUNDARY_TIMEOUT_SEC", 5, minimum=1),
        recall_on_prompt=_bool(env, "REFLECT_RECALL_ON_PROMPT", False),
        daily_max=_int(env, "REFLECT_DRAIN_DAILY_MAX", 20),
        run_max=_int(env, "REFLECT_DRAIN_MAX", 3),
        debounce_sec=_int(env, "REFLECT_DRAIN_DEBOUNCE_SEC", 600),
        capture_settle_sec=_int(env, "REFLECT_CAPTURE_SETTLE_SEC", 30),
        write_concurrency=_int(env, "REFLECT_WRITE_CONCURRENCY", 1, minimum=1),
        write_lease_ttl_sec=_int(env, "REFLECT_WRITE_LEASE_TTL_SEC", 30, minimum=1),
        max_retire_per_day=_int(env, "REFLECT_MAX_RETIRE_PER_DAY", 5),
        max_retries=_int(env, "REFLECT_DRAIN_MAX_RETRIES", 3, minimum=1),
        retry_base_sec=_int(env, "REFLECT_RETRY_BASE_SEC", 60),
        timeout_sec=timeout,
        timeout_retries=_int(env, "REFLECT_DRAIN_TIMEOUT_RETRIES", 1),
        invalid_threshold=_int(env, "REFLECT_DRAIN_INVALID_THRESHOLD", 3, minimum=1),
        token_max=_int(env, "REFLECT_DRAIN_TOKEN_MAX", 2_000_000, minimum=1),
        max_recoveries=_int(env, "REFLECT_MAX_RECOVERIES", 3),
        lease_sec=_int(env, "REFLECT_LEASE_SEC", timeout + 60, minimum=1),
        writer_backend=_choice(env, "REFLECT_WRITER_BACKEND", "auto", WRITER_BACKENDS),
        writer_mode=_choice(env, "REFLECT_DRAIN_WRITER", "extract", ("extract", "agentic")),
        model=_env("REFLECT_DRAIN_MODEL", env) or "sonnet",
        claude_bin=_env("REFLECT_DRAIN_CLAUDE_BIN", env) or "claude",
        writer_cwd=Path(cwd_raw).expanduser() if cwd_raw else Path.home(),
        max_turns=_int(env, "REFLECT_DRAIN_MAX_TURNS", 16, minimum=1),
        max_input_chars=_int(env, "REFLECT_DRAIN_MAX_INPUT_CHARS", 60_000, minimum=1000),
        openai_base_url=base_url,
        openai_api_key=_env("REFLECT_OPENAI_API_KEY", env) or _env("OPENAI_API_KEY", env) or "",
        codex_bin=_env("REFLECT_CODEX_BIN", env) or "codex",
        prices_path=prices,
        cascade=_bool(env, "REFLECT_DRAIN_CASCADE", True),
        dry_run=_bool(env, "REFLECT_DRAIN_DRY_RUN", False),
        skip_reindex=_bool(env, "REFLECT_DRAIN_SKIP_REINDEX", False),
        quota_gate=_bool(env, "REFLECT_QUOTA_GATE", True),
        quota_ttl_sec=_int(env, "REFLECT_QUOTA_TTL_SEC", 3600, minimum=1),
        quota_util_threshold=util,
        api_key_auth=bool(_env("ANTHROPIC_API_KEY", env)),
        dedup_threshold=_float(env, "REFLECT_DEDUP_THRESHOLD", 0.97, low=0.0, high=1.0) or 0.0,
        review_below=_float(env, "REFLECT_REVIEW_BELOW", 0.5, low=0.0, high=1.0) or 0.0,
        index_vectors=vectors,
        embed_model=_embed_model(env, check_path=vectors),
        maintain_every=_int(env, "REFLECT_DRAIN_MAINTAIN_EVERY", 10),
        log_max_bytes=_int(env, "REFLECT_DRAIN_LOG_MAX_BYTES", 10 * 1024 * 1024, minimum=1024),
        workers=_int(env, "REFLECT_WORKERS", 2, minimum=1),
        stall_warn_sec=_int(env, "REFLECT_STALL_WARN_SEC", 6 * 3600, minimum=1),
        model_idle_sec=_int(env, "REFLECT_MODEL_IDLE_SEC", 600, minimum=1),
        context_window=_int(env, "REFLECT_CONTEXT_WINDOW", 200_000, minimum=1000),
        checkpoints=_checkpoints(env),
        checkpoint_cheap_model=_env("REFLECT_CHECKPOINT_CHEAP_MODEL", env) or "",
        deep_model=_env("REFLECT_DEEP_MODEL", env) or "",
        session_idle_sec=_int(env, "REFLECT_SESSION_IDLE_SEC", 3600, minimum=1),
        dedupe_model=_env("REFLECT_DEDUPE_MODEL", env) or "",
        dedupe_daily_max=_int(env, "REFLECT_DEDUPE_DAILY_MAX", 5),
        dedupe_interval_sec=_int(env, "REFLECT_DEDUPE_INTERVAL_SEC", 86_400, minimum=60),
    )


DEFAULT_CHECKPOINTS = (20, 40, 60, 80)


def _checkpoints(environ: dict[str, str]) -> tuple[int, ...]:
    """``REFLECT_CHECKPOINTS``: comma-separated percentages, ascending, each in 1..100.

    Args:
        environ: The environment.

    Returns:
        The sorted, de-duplicated thresholds; the default when unset or empty; ``()`` for
        ``off``/``none``/``0`` (every capture makes a pass, the behaviour before checkpoints).

    Raises:
        SettingsError: A part is not an integer in 1..100.
    """
    raw = (_env("REFLECT_CHECKPOINTS", environ) or "").strip()
    if not raw:
        return DEFAULT_CHECKPOINTS
    if raw.lower() in ("off", "none", "0"):
        return ()
    out: set[int] = set()
    for part in raw.split(","):
        part = part.strip().rstrip("%")
        if not part.isdigit() or not 1 <= int(part) <= 100:
            raise SettingsError(
                f"REFLECT_CHECKPOINTS must be percentages 1..100 separated by commas "
                f"(or off), got {raw!r}"
            )
        out.add(int(part))
    return tuple(sorted(out))
