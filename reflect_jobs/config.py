"""One validated settings object, read from the environment over the user config file.

Every knob has a name (the config-file key) and, for all but a few, an environment variable,
so that a hook, a launchd/systemd unit, a test and a person at a shell configure the system
the same way. Names, variables, tiers and defaults are one table,
:mod:`reflect_jobs.settings_spec`; the original drain's ``REFLECT_DRAIN_*`` names keep their
meaning (SPEC-drain §5.12). The environment overrides ``$XDG_CONFIG_HOME/reflect-jobs/
config.toml`` (:mod:`reflect_jobs.userconfig`), which ``install`` writes.

A bad value is a :class:`SettingsError` naming the variable (or the file and key) — the CLI
prints it as one line and exits 2. The hook path never builds a full ``Settings`` (it reads
the few values it needs through ``envpaths``), so a typo in an unrelated knob can never
break a session. :func:`resolve` also says where each value came from and what was wrong
with the config file (``reflect-jobs config``, ``doctor``).
"""

from __future__ import annotations

import os
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import settings_spec as spec
from .envpaths import home_dir_str, is_truthy, kb_root_str, memory_homes_str, queue_url
from .settings_values import Reader, SettingsError, parse_checkpoints, parse_embed_model


def _d(name: str) -> Any:
    """A setting's default, from the one table."""
    return spec.BY_NAME[name][4]


def _fixed(name: str) -> Any:
    """An internal constant's value (``settings_spec.INTERNAL``)."""
    return spec.INTERNAL[name][0]


def home_dir(environ: dict[str, str] | None = None) -> Path:
    """The state directory (``envpaths.home_dir_str``) as a :class:`~pathlib.Path`.

    Args:
        environ: The environment to read; ``None`` means ``os.environ`` (over the config file).

    Returns:
        ``$REFLECT_HOME`` (or the config file's ``home``), default ``~/.reflect``; not created.
    """
    return Path(home_dir_str(environ))


__all__ = [
    "Resolved",
    "Settings",
    "SettingsError",
    "home_dir",
    "is_truthy",
    "load_settings",
    "queue_url",
    "resolve",
]


@dataclass(frozen=True)
class Settings:
    """Everything the workers and the CLI need to know, validated once.

    Defaults come from :mod:`reflect_jobs.settings_spec` (``_d``), the one table of names,
    variables and tiers; the fields after ``dedupe_daily_max`` are internal constants with
    no variable (``settings_spec.INTERNAL``).
    """

    home: Path
    kb_path: Path
    db_url: str
    queue_url: str
    disabled: bool = _d("disabled")
    #: ``REFLECT_BOUNDARY_CMD``: the data-boundary command asked before prepare reads a
    #: transcript (``boundary.py``, ARCHITECTURE §2.2); empty = no boundary.
    boundary_cmd: str = _d("boundary_cmd")
    #: ``REFLECT_BOUNDARY_TIMEOUT_SEC``: after this long the command counts as restricted.
    boundary_timeout_sec: int = _d("boundary_timeout_sec")
    #: ``REFLECT_RECALL_ON_PROMPT``: per-prompt recall (ARCHITECTURE §13). The hook reads it
    #: through ``envpaths`` (stdlib path); this field is for ``doctor``/``install``.
    recall_on_prompt: bool = _d("recall_on_prompt")
    #: ``REFLECT_RECALL_WORKER_MS``: how long per-prompt recall waits for the worker's model
    #: (``recall/warm_rank.py``, read by the hook through ``envpaths``).
    recall_worker_ms: int = _d("recall_worker_ms")
    #: ``REFLECT_FORGET_UNUSED_DAYS``: a learning nobody confirmed for this long is dormant
    #: (``recall/fading.py``, read by the hook through ``envpaths``).
    forget_unused_days: int = _d("forget_unused_days")
    #: ``REFLECT_MCP_ALL_REPOS``: let ``reflect-jobs mcp`` read every repository's learnings
    #: and items, not only its own repository's and the global ones (ARCHITECTURE §13).
    #: Writes stay in the server's repository whatever this says.
    mcp_all_repos: bool = _d("mcp_all_repos")
    #: Repositories never captured nor told anything (config file ``ignore``; ``reflect-jobs
    #: ignore``). The hook and prepare read the file itself, so a change needs no restart.
    ignore: tuple[str, ...] = ()
    #: ``REFLECT_HOST``: this machine's name in the reflection logs; empty = the hostname.
    host: str = _d("host")
    #: ``REFLECT_MEMORY_HOMES``: the memory-home mapping file (default
    #: ``$REFLECT_HOME/memory-homes.conf``).
    memory_homes: Path | None = None
    # caps (ARCHITECTURE §4): budget units per UTC day, model calls per debounce window
    # (a debounce of 0 means no per-window cap; the daily cap still holds)
    daily_max: int = _d("daily_max")
    run_max: int = _d("run_max")
    debounce_sec: int = _d("debounce_sec")
    capture_settle_sec: int = _d("capture_settle_sec")
    # the write lease (ARCHITECTURE §4): paid calls in flight at once, across every consumer
    write_concurrency: int = _d("write_concurrency")
    write_lease_ttl_sec: int = _d("write_lease_ttl_sec")
    # blast radius (ARCHITECTURE §7): retirements applied per UTC day; the rest are proposals
    max_retire_per_day: int = _d("max_retire_per_day")
    max_new_global_per_session: int = _d("max_new_global_per_session")
    # retries, poison, timeouts (SPEC-drain §5.7)
    max_retries: int = _d("max_retries")
    retry_base_sec: int = _d("retry_base_sec")
    timeout_sec: int = _d("timeout_sec")
    invalid_threshold: int = _d("invalid_threshold")
    token_max: int = _d("token_max")
    lease_sec: int = 360
    # the writer (ARCHITECTURE §5)
    writer_backend: str = _d("writer_backend")
    model: str = _d("model")
    claude_bin: str = _d("claude_bin")
    writer_cwd: Path = field(default_factory=Path.home)
    max_input_chars: int = _d("max_input_chars")
    # the API writers (README "Writers"): openai-compatible endpoint, codex CLI, prices
    openai_base_url: str = _d("openai_base_url")
    openai_api_key: str = field(default="", repr=False)  # a secret: never printed
    codex_bin: str = _d("codex_bin")
    prices_path: str = _d("prices_path")
    dry_run: bool = _d("dry_run")
    skip_reindex: bool = _d("skip_reindex")
    # quota gate (SPEC-drain §5.5)
    quota_gate: bool = _d("quota_gate")
    quota_util_threshold: float | None = None
    api_key_auth: bool = False
    # KB and index
    dedup_threshold: float = _d("dedup_threshold")
    #: A learning below this confidence waits for review (status proposed, ARCHITECTURE §7.1).
    review_below: float = _d("review_below")
    index_vectors: bool = _d("index_vectors")
    embed_model: str | None = None
    # operations
    log_max_bytes: int = _d("log_max_bytes")
    # the warm model service (ARCHITECTURE §8.1): seconds without search/reindex before it exits
    model_idle_sec: int = _d("model_idle_sec")
    #: ``REFLECT_SEARCH_WORKER_SEC``: a CLI search's budget for the worker's answer (then lexical).
    search_worker_sec: float = _d("search_worker_sec")
    # checkpoints (ARCHITECTURE §14.1): when a session's capture makes a paid pass
    #: ``REFLECT_CONTEXT_WINDOW``: the tokens a full context holds (the fill's denominator).
    context_window: int = _d("context_window")
    #: ``REFLECT_CHECKPOINTS``: context-fill percentages whose crossing makes one pass;
    #: empty (``off``) = every capture is a pass, as before checkpoints.
    checkpoints: tuple[int, ...] = _d("checkpoints")
    #: ``REFLECT_CHECKPOINT_CHEAP_MODEL``: the model of the first (lowest) checkpoint's pass;
    #: empty = ``haiku`` for the Claude writers, ``REFLECT_DRAIN_MODEL`` for the others.
    checkpoint_cheap_model: str = _d("checkpoint_cheap_model")
    #: ``REFLECT_DEEP_MODEL``: the model of a session's deep pass (PreCompact, SessionEnd,
    #: idle, a capture a person asked for); empty = ``REFLECT_DRAIN_MODEL``.
    deep_model: str = _d("deep_model")
    #: ``REFLECT_SESSION_IDLE_SEC``: silence after which a session that never ended gets its
    #: deep pass.
    session_idle_sec: int = _d("session_idle_sec")
    #: ``REFLECT_REFLECT_MIN_TURNS``: an interactive session with this many person turns since
    #: its last committed pass gets a reflection pass at a checkpoint even with no signal.
    reflect_min_turns: int = _d("reflect_min_turns")
    #: ``REFLECT_REFLECT_MAX_CHARS``: the condensed transcript's budget (head and tail kept).
    reflect_max_chars: int = _d("reflect_max_chars")
    # the Reflection Store's dedupe pass (ARCHITECTURE §14): a cheap model, its own units
    #: ``REFLECT_DEDUPE_MODEL``: empty = ``REFLECT_CHECKPOINT_CHEAP_MODEL``.
    dedupe_model: str = _d("dedupe_model")
    #: ``REFLECT_DEDUPE_DAILY_MAX``: dedupe calls per UTC day, counted apart from the writer's.
    dedupe_daily_max: int = _d("dedupe_daily_max")
    # the nightly layer (docs/NIGHTLY.md): when, its own units, who promotes, the budget
    #: ``REFLECT_NIGHTLY_AT``: local ``HH:MM`` of the nightly pass (validated at load).
    nightly_at: str = _d("nightly_at")
    #: ``REFLECT_NIGHTLY_DAILY_MAX``: nightly paid calls per UTC day (``caps:nightly:``).
    nightly_daily_max: int = _d("nightly_daily_max")
    #: ``REFLECT_PROMOTE``: ``auto`` | ``1`` | ``0`` (who may write MEMORY.md).
    promote: str = _d("promote")
    #: ``REFLECT_MEMORY_LINES``: the managed section's line budget (capped at 100).
    memory_lines: int = _d("memory_lines")
    # internal constants: no variable (settings_spec.INTERNAL; docs/DEPRECATIONS.md)
    maintain_every: int = _fixed("maintain_every")
    timeout_retries: int = _fixed("timeout_retries")
    max_recoveries: int = _fixed("max_recoveries")
    quota_ttl_sec: int = _fixed("quota_ttl_sec")
    workers: int = _fixed("workers")
    stall_warn_sec: int = _fixed("stall_warn_sec")
    #: A repository is deduplicated at most this often (``dedupe --due``).
    dedupe_interval_sec: int = _fixed("dedupe_interval_sec")

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
    def nightly_pass_model(self) -> str:
        """The nightly layer's cheap model (weekly synthesis): the dedupe pass's model."""
        return self.dedupe_pass_model

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


@dataclass(frozen=True)
class Resolved:
    """Settings with their provenance: what ``reflect-jobs config`` and ``doctor`` print."""

    settings: Settings
    #: setting name → ``default`` | ``environment`` | ``config file`` (| ``environment
    #: (OPENAI_API_KEY)`` for the key's fallback).
    sources: dict[str, str]
    #: The config file and whether it exists.
    config_path: str
    config_exists: bool
    #: One line each: the config file's problems, deprecated variables that are set.
    warnings: tuple[str, ...]


#: The kinds the table-driven loop parses; the others (paths, URLs, derived values) are read
#: one by one after it.
_GENERIC_KINDS = ("int", "float", "bool", "str", "choice")


def resolve(environ: dict[str, str] | None = None) -> Resolved:
    """Build and validate :class:`Settings`, and say where each value came from.

    Args:
        environ: The environment to read; ``None`` means ``os.environ``. It is copied, never
            modified; the user config file (:mod:`reflect_jobs.userconfig`, located by its
            ``XDG_CONFIG_HOME``/``HOME``) fills what it leaves open.

    Returns:
        The settings, each setting's source, the config file and the warnings.

    Raises:
        SettingsError: A value is not an integer, number, boolean or allowed choice, is out
            of its range, or a store URL has an unsupported scheme; the message names the
            variable, or the file and key it came from.
    """
    from . import userconfig

    raw_env = dict(os.environ if environ is None else environ)
    loaded = userconfig.load(raw_env)
    env = userconfig.overlay(raw_env)
    from_file = userconfig.from_file(raw_env)
    labels = {var: f"{name} in {loaded.path}" for var, name in from_file.items()}
    r = Reader(env, labels)
    values: dict[str, Any] = {}
    for name, var, _tier, kind, default, _shown, opts, _help in spec.SPECS:
        if kind not in _GENERIC_KINDS:
            continue
        if kind == "int":
            values[name] = r.integer(var, default, minimum=opts.get("min", 0))
        elif kind == "float":
            values[name] = r.number(var, default, low=opts.get("low"), high=opts.get("high"))
        elif kind == "bool":
            # An empty REFLECT_INDEX_VECTORS has always meant "on" (only 0/false/no/off).
            values[name] = r.boolean(var, default, empty_is_default=name == "index_vectors")
        elif kind == "choice":
            values[name] = r.choice(var, default, opts["choices"])
        else:
            values[name] = r.text(var, default)
    home = home_dir(env)
    db_url = r.text("REFLECT_DB_URL") or f"sqlite:///{home / 'reflect.db'}"
    if not db_url.startswith(("sqlite", "postgresql")):
        raise SettingsError(
            f"{r.label('REFLECT_DB_URL')} must be a sqlite:/// or postgresql:// URL, got {db_url!r}"
        )
    qurl = queue_url(env)
    if not qurl.startswith(("sqlite://", "redis://", "rediss://", "unix://")):
        raise SettingsError(
            f"{r.label('REFLECT_QUEUE_URL')} must be sqlite:///PATH or redis://HOST, got {qurl!r}"
        )
    util = r.number("REFLECT_QUOTA_UTIL_THRESHOLD", None, low=0.0, high=1.0)
    if util is not None and util <= 0:
        raise SettingsError(
            f"{r.label('REFLECT_QUOTA_UTIL_THRESHOLD')} must be in (0, 1], got {util}"
        )
    base_url = r.text("REFLECT_OPENAI_BASE_URL")
    if base_url and not base_url.startswith(("http://", "https://")):
        raise SettingsError(
            f"{r.label('REFLECT_OPENAI_BASE_URL')} must be an http:// or https:// URL, "
            f"got {base_url!r}"
        )
    prices = r.text("REFLECT_PRICES")
    if prices:
        from .writer.prices import PricesError, load_prices_file

        try:
            load_prices_file(prices)
        except PricesError as exc:
            raise SettingsError(str(exc)) from None
    at = values["nightly_at"].strip()
    hh, sep, mm = at.partition(":")
    if not (sep and hh.isdigit() and mm.isdigit() and int(hh) < 24 and int(mm) < 60):
        raise SettingsError(
            f"{r.label('REFLECT_NIGHTLY_AT')} must be a local time HH:MM, got {at!r}"
        )
    values["nightly_at"] = f"{int(hh):02d}:{int(mm):02d}"
    cwd_raw = r.text("REFLECT_DRAIN_CWD")
    memory_homes = memory_homes_str(env)
    settings = Settings(
        home=home,
        kb_path=Path(kb_root_str(env)),
        db_url=db_url,
        queue_url=qurl,
        **values,
        ignore=tuple(loaded.values.get("ignore", ())),  # type: ignore[arg-type]
        memory_homes=Path(memory_homes),
        lease_sec=r.integer("REFLECT_LEASE_SEC", values["timeout_sec"] + 60, minimum=1),
        writer_cwd=Path(cwd_raw).expanduser() if cwd_raw else Path.home(),
        openai_base_url=base_url,
        openai_api_key=r.text("REFLECT_OPENAI_API_KEY") or r.text("OPENAI_API_KEY"),
        prices_path=prices,
        quota_util_threshold=util,
        api_key_auth=bool(r.text("ANTHROPIC_API_KEY")),
        embed_model=parse_embed_model(r, check_path=values["index_vectors"]),
        checkpoints=parse_checkpoints(r),
    )
    sources = {}
    for name, var, *_ in spec.SPECS:
        if var is None:
            sources[name] = "config file" if name in loaded.values else "default"
        elif var in from_file:
            sources[name] = "config file"
        elif var in raw_env and (raw_env[var].strip() or spec.BY_NAME[name][3] == "bool"):
            sources[name] = "environment"
        elif name == "home" and (raw_env.get("REFLECT_STATE_DIR") or "").strip():
            sources[name] = "environment (REFLECT_STATE_DIR)"
        elif name == "openai_api_key" and (raw_env.get("OPENAI_API_KEY") or "").strip():
            sources[name] = "environment (OPENAI_API_KEY)"
        else:
            sources[name] = "default"
    warnings = list(loaded.problems)
    for var, (_name, what) in spec.DEPRECATED.items():
        if (raw_env.get(var) or "").strip():
            warnings.append(f"{var} is deprecated: {what} (docs/DEPRECATIONS.md)")
    return Resolved(settings, sources, loaded.path, loaded.exists, tuple(warnings))


def load_settings(environ: dict[str, str] | None = None) -> Settings:
    """Build and validate :class:`Settings` (see :func:`resolve`).

    Args:
        environ: The environment to read; ``None`` means ``os.environ``. It is copied, never
            modified; the user config file fills what it leaves open.

    Returns:
        The validated settings. An unset variable takes the config file's value, else the
        default shown on :class:`Settings`; so does an empty one, except a boolean the
        config file does not set: empty means false.

    Raises:
        SettingsError: A value is unusable; the message names the variable (or file and key).
    """
    return resolve(environ).settings
