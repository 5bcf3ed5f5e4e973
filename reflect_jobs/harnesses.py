"""The one registry of the agent harnesses we hook into: Claude Code, Codex CLI, Copilot CLI.

Everything reflect-jobs knows about a harness lives in its :class:`Harness` record below:
where its home directory is, which settings file ``install hooks`` edits and in which shape,
which hook events we install and with which timeouts, which keys its hook payload uses,
where its transcripts are for ``backfill``, and which module parses them. ``hook``,
``install``, ``doctor``, ``backfill``, ``transcripts`` and the CLI read these records and
hold no harness knowledge of their own, so a change to a harness (a new event, a payload
without ``transcriptPath``, another timeout) is an edit here and nowhere else.

The hook imports this module after every agent turn, so it is standard library only and
cheap: the records are small frozen classes (immutable, compared by value, ``replace()``
for a variant) rather than dataclasses, whose import alone costs ~20 ms (it pulls in
``inspect``); the parser is a module path string that :mod:`reflect_jobs.transcripts.reader`
imports lazily, so the hook never loads a parser.
"""

from __future__ import annotations


class _Record:
    """A frozen record: fields named by ``__slots__``, set once by the constructor.

    What ``@dataclass(frozen=True)`` gives, without importing ``dataclasses`` (~20 ms with the
    ``inspect`` it pulls in, paid by the hook after every agent turn). Positional arguments
    fill the fields in ``__slots__`` order; every field must be given.
    """

    __slots__: tuple[str, ...] = ()

    def __init__(self, *args: object, **kwargs: object) -> None:
        names = self.__slots__
        if len(args) > len(names):
            raise TypeError(f"{type(self).__name__} takes {len(names)} fields")
        values = dict(zip(names, args, strict=False))
        for key, value in kwargs.items():
            if key not in names or key in values:
                raise TypeError(f"{type(self).__name__}: unexpected or repeated field {key!r}")
            values[key] = value
        missing = [n for n in names if n not in values]
        if missing:
            raise TypeError(f"{type(self).__name__}: missing fields {', '.join(missing)}")
        for name in names:
            object.__setattr__(self, name, values[name])

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"{type(self).__name__} is frozen")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"{type(self).__name__} is frozen")

    def _values(self) -> tuple[object, ...]:
        return tuple(getattr(self, n) for n in self.__slots__)

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and other._values() == self._values()  # type: ignore[attr-defined]

    def __hash__(self) -> int:
        return hash((type(self).__name__, self._values()))

    def __repr__(self) -> str:
        fields = ", ".join(f"{n}={getattr(self, n)!r}" for n in self.__slots__)
        return f"{type(self).__name__}({fields})"

    def replace(self, **changes: object) -> _Record:
        """A copy with some fields changed (like ``dataclasses.replace``).

        Args:
            **changes: New values by field name.

        Returns:
            A new record of the same type.

        Raises:
            TypeError: A name is not a field.
        """
        return type(self)(**{**dict(zip(self.__slots__, self._values(), strict=True)), **changes})


class HookEvent(_Record):
    """One hook event we install.

    Attributes:
        name: The event as the harness spells it in its settings (``Stop``, ``agentStop``).
        timeout_sec: The timeout written into our entry for it (the harness kills the hook
            after it).
    """

    __slots__ = ("name", "timeout_sec")


class PayloadKeys(_Record):
    """Where a hook payload (the JSON on the hook's stdin) keeps each value.

    Each field is a tuple of keys tried in order; the first key *present* wins (presence, not
    truthiness: SPEC-drain §2.4), so an explicit ``null`` is not skipped for a later key.

    Attributes:
        session_id: Keys of the session id (``unknown`` when none is present or it is empty).
        transcript_path: Keys of the transcript file (the hook refuses a payload without one).
        event: Keys of the hook event's name (``unknown`` when none is present); the hook's
            ``--event`` argument overrides it.
        cwd: Keys of the session's working directory, against which a relative transcript
            path is resolved (else the hook's own working directory).
    """

    __slots__ = ("session_id", "transcript_path", "event", "cwd")


class TranscriptLayout(_Record):
    """Where a harness keeps its session transcripts, for ``backfill``.

    Attributes:
        root: The sessions directory, relative to the harness home.
        pattern: A ``pathlib`` glob under ``root`` matching one file per session.
        session_id: How a file names its session, which must be what the harness's hook
            sends so a backfilled job and a later hook capture coalesce: ``"stem"`` (the file
            name without ``.jsonl``), ``"parent"`` (the directory holding the file) or
            ``"uuid_tail"`` (the UUID the file name ends with; else the stem).
    """

    __slots__ = ("root", "pattern", "session_id")


SESSION_ID_SCHEMES = ("stem", "parent", "uuid_tail")


class Harness(_Record):
    """One harness, everything we know about it (see the module docstring).

    Attributes:
        name: The short name: the hook's and the CLI's ``--harness`` argument and the value
            of ``jobs.harness`` in the ledger (so never rename one).
        label: The product's name in messages (``Claude Code``).
        aliases: Other spellings :func:`resolve` accepts (``read_transcript(harness=…)``);
            the hook itself accepts only ``name``.
        home_env: The environment variable the harness itself reads for its home directory.
        home_default: The home directory when ``home_env`` is unset, relative to ``$HOME``.
        settings_file: The user-level hooks file ``install hooks`` edits, relative to home.
        present_markers: Paths relative to home whose existence shows the harness is set up
            here (``doctor`` skips a harness with none of them).
        hook_files_glob: A glob relative to home for every file the harness loads user-level
            hooks from (Copilot reads every ``hooks/*.json``), or None when it is only
            ``settings_file``.
        grouped: The hooks-table layout. True (Claude Code, Codex): each event lists matcher
            groups holding commands, ``{"Stop": [{"hooks": [{"type": "command", …}]}]}``.
            False (Copilot CLI): each event lists commands directly.
        command_keys: Keys of a hook entry that may hold its shell command; we write the
            first, and recognise our entries under any of them.
        timeout_key: The key of an entry's timeout in seconds (``timeout``/``timeoutSec``).
        skeleton: ``(key, value)`` pairs of the document of a settings file we create from
            nothing (Copilot wants ``"version": 1``); see :meth:`new_document`.
        events: The :class:`HookEvent` entries we install, in the order they are written.
        payload: The :class:`PayloadKeys` of its hook payload.
        transcripts: The :class:`TranscriptLayout` ``backfill`` scans.
        parser: ``"module:function"`` turning one decoded JSONL record into a
            ``ParsedRecord``; imported on first use (never by the hook).
        install_note: A line ``install hooks`` prints after installing, or None.
    """

    __slots__ = (
        "name",
        "label",
        "aliases",
        "home_env",
        "home_default",
        "settings_file",
        "present_markers",
        "hook_files_glob",
        "grouped",
        "command_keys",
        "timeout_key",
        "skeleton",
        "events",
        "payload",
        "transcripts",
        "parser",
        "install_note",
    )

    @property
    def event_names(self) -> tuple[str, ...]:
        """The names of :attr:`events`, in order."""
        return tuple(e.name for e in self.events)

    @property
    def command_key(self) -> str:
        """The key our entries put their command under."""
        return self.command_keys[0]

    def new_document(self) -> dict:
        """A fresh copy of the document of a settings file we create from nothing.

        Returns:
            ``dict(skeleton)``: ``{}`` or ``{"version": 1}``.
        """
        return dict(self.skeleton)


#: The file we own outright in a harness's hooks directory (Copilot); removed when it empties.
OWN_SETTINGS_FILE = "reflect-jobs.json"
#: Hook timeouts: the hook only enqueues (tens of ms), so 5 s is a generous ceiling.
_TIMEOUT = 5
# Today every harness sends one of the same spellings; each record names its own tuple so a
# harness that diverges is changed on its own.
_PAYLOAD = PayloadKeys(
    session_id=("session_id", "sessionId", "parent_session_id", "parentSessionId"),
    transcript_path=(
        "agent_transcript_path",
        "agentTranscriptPath",
        "transcript_path",
        "transcriptPath",
    ),
    event=("hook_event_name", "hookEventName"),
    cwd=("cwd",),
)

CLAUDE = Harness(
    name="claude",
    label="Claude Code",
    aliases=("claude-code", "claude_code"),
    home_env="CLAUDE_CONFIG_DIR",
    home_default=".claude",
    settings_file="settings.json",
    present_markers=("settings.json",),
    hook_files_glob=None,
    grouped=True,
    command_keys=("command",),
    timeout_key="timeout",
    skeleton=(),
    events=(
        HookEvent("PreCompact", _TIMEOUT),
        HookEvent("Stop", _TIMEOUT),
        HookEvent("SubagentStop", _TIMEOUT),
        HookEvent("SessionEnd", _TIMEOUT),
        HookEvent("SessionStart", _TIMEOUT),  # recall context (ARCHITECTURE §13)
    ),
    payload=_PAYLOAD,
    transcripts=TranscriptLayout("projects", "*/*.jsonl", "stem"),  # projects/<p>/<id>.jsonl
    parser="reflect_jobs.transcripts.claude:parse_record",
    install_note=None,
)

CODEX = Harness(
    name="codex",
    label="Codex",
    aliases=(),
    home_env="CODEX_HOME",
    home_default=".codex",
    settings_file="hooks.json",
    present_markers=("hooks.json", "config.toml"),
    hook_files_glob=None,
    grouped=True,
    command_keys=("command",),
    timeout_key="timeout",
    skeleton=(),
    events=(  # Codex has no SessionEnd hook (SPEC-drain §1.1).
        HookEvent("PreCompact", _TIMEOUT),
        HookEvent("Stop", _TIMEOUT),
        HookEvent("SubagentStop", _TIMEOUT),
        HookEvent("SessionStart", _TIMEOUT),  # recall context (ARCHITECTURE §13)
    ),
    payload=_PAYLOAD,
    # sessions/YYYY/MM/DD/rollout-<timestamp>-<uuid>.jsonl
    transcripts=TranscriptLayout("sessions", "**/rollout-*.jsonl", "uuid_tail"),
    parser="reflect_jobs.transcripts.codex:parse_record",
    install_note="Codex asks you to review and trust new hooks the next time it starts.",
)

COPILOT = Harness(
    name="copilot",
    label="Copilot CLI",
    aliases=("copilot-cli",),
    home_env="COPILOT_HOME",
    home_default=".copilot",
    # Copilot CLI loads every *.json in its user hooks directory, so we get a file of our own
    # instead of editing a shared one (its config.json is rewritten by the CLI itself, which
    # drops a "hooks" key: github/copilot-cli#3403).
    settings_file="hooks/" + OWN_SETTINGS_FILE,
    present_markers=("hooks", "config.json"),
    hook_files_glob="hooks/*.json",
    grouped=False,
    command_keys=("bash", "powershell"),
    timeout_key="timeoutSec",
    skeleton=(("version", 1),),
    events=(
        HookEvent("preCompact", _TIMEOUT),
        HookEvent("agentStop", _TIMEOUT),
        HookEvent("subagentStop", _TIMEOUT),
        HookEvent("sessionEnd", _TIMEOUT),
    ),
    payload=_PAYLOAD,
    transcripts=TranscriptLayout("session-state", "*/events.jsonl", "parent"),  # <id>/events
    parser="reflect_jobs.transcripts.copilot:parse_record",
    install_note=None,
)

#: Events installed only while an environment variable is on at install time (ARCHITECTURE
#: §13): per-prompt recall costs an interpreter start on every prompt, so it is opt-in. Copilot
#: is absent: its CLI discards the output of these hooks.
OPT_IN_EVENTS: dict[str, tuple[tuple[str, HookEvent], ...]] = {
    "claude": (("REFLECT_RECALL_ON_PROMPT", HookEvent("UserPromptSubmit", _TIMEOUT)),),
    "codex": (("REFLECT_RECALL_ON_PROMPT", HookEvent("UserPromptSubmit", _TIMEOUT)),),
}

#: Every harness by name, in the order the CLI, ``install`` and ``doctor`` list them.
REGISTRY: dict[str, Harness] = {h.name: h for h in (CLAUDE, CODEX, COPILOT)}
#: The names the hook and the CLI's ``--harness`` accept.
NAMES: tuple[str, ...] = tuple(REGISTRY)
#: Every key any harness may keep a hook command under, for recognising our entries in a
#: file of any shape (in registry order: ``command``, ``bash``, ``powershell``).
COMMAND_KEYS: tuple[str, ...] = tuple(
    dict.fromkeys(k for h in REGISTRY.values() for k in h.command_keys)
)
_ALIASES = {alias: h.name for h in REGISTRY.values() for alias in h.aliases}


def get(name: str) -> Harness:
    """The record of the harness called ``name`` (its short name, not an alias).

    Args:
        name: One of :data:`NAMES`.

    Returns:
        Its :class:`Harness`.

    Raises:
        KeyError: No harness has that name; the message lists the known ones.
    """
    try:
        return REGISTRY[name]
    except KeyError:
        raise KeyError(f"unknown harness {name!r}; expected one of {', '.join(NAMES)}") from None


def resolve(name: str) -> str | None:
    """The short name for a harness name or alias.

    Args:
        name: A short name (``claude``) or an alias (``claude-code``).

    Returns:
        The short name, or None when ``name`` is neither.
    """
    if name in REGISTRY:
        return name
    return _ALIASES.get(name)
