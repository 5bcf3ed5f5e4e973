"""What one ``reflect-jobs mcp`` server may read and write, and how much it may add.

An MCP server is started by a harness for one session, in that session's working directory;
the agent talking to it has read whatever the session read, so it may be fooled. The server
used to read every repository's learnings and items and write and close items anywhere.
Now (ARCHITECTURE §13):

* **Its repository** is the one its working directory is in (:func:`reflect_jobs.repo.repo_for`
  — the one identity; a directory outside git is its own).
* **Reads** (``search``, ``get``, ``recent``, ``context``, ``list_items``, ``search_items``)
  cover that repository and the global learnings. ``REFLECT_MCP_ALL_REPOS=1``
  (``Settings.mcp_all_repos``) lets a tool's ``repo`` name another repository, or ``*`` for
  all of them, for people who want one server to see everything.
* **Writes** (``add_item``, ``close_item``, ``update_items``) go only to that repository,
  whatever the setting: a ``repo`` naming another one is refused with one line.
* **Adds are bounded per server**: :data:`MAX_ADDS_PER_HOUR` in any hour and a body of at
  most :data:`MAX_BODY_BYTES`; over either the call is refused (nothing written) and the
  answer says when the next add is possible — a flood of 300 items (it pushed the honest
  handoff out of the session-start block) is no longer possible through MCP.
* **A closing note must be read to count**: at least :data:`MIN_NOTE_VISIBLE` visible
  characters (:mod:`reflect_jobs.invisible`): a zero-width "note" is no evidence.
"""

from __future__ import annotations

import os
import time
from collections import deque
from dataclasses import dataclass, field

from reflect_jobs.invisible import strip_invisible, visible_count
from reflect_jobs.repo import Repo, RepoError, key_of, repo_for

from .tool_errors import ToolError

#: Items one server may add in any hour (a session needs a handful; a flood is refused).
MAX_ADDS_PER_HOUR = 20
#: The sliding window of that bound, in seconds.
ADD_WINDOW_SEC = 3600.0
#: The largest item body (UTF-8 bytes) an agent may add or edit in.
MAX_BODY_BYTES = 4096
#: Visible characters a closing (or any change's) note needs to count as evidence.
MIN_NOTE_VISIBLE = 8
#: ``repo`` value that means every repository (only with ``REFLECT_MCP_ALL_REPOS=1``).
ALL = "*"

__all__ = [
    "ALL",
    "MAX_ADDS_PER_HOUR",
    "MAX_BODY_BYTES",
    "MIN_NOTE_VISIBLE",
    "AddBudget",
    "ServerScope",
    "check_body",
    "check_note",
]


@dataclass
class AddBudget:
    """The per-server add bound: at most ``limit`` adds in any ``window`` seconds."""

    limit: int = MAX_ADDS_PER_HOUR
    window: float = ADD_WINDOW_SEC
    _times: deque[float] = field(default_factory=deque)

    def check(self, now: float | None = None) -> None:
        """Refuse when the bound is reached (nothing is counted by asking).

        Args:
            now: A ``time.monotonic()`` value; ``None`` for now.

        Raises:
            ToolError: The bound is reached; the text says when the next add is possible.
        """
        now = time.monotonic() if now is None else now
        while self._times and now - self._times[0] >= self.window:
            self._times.popleft()
        if len(self._times) >= self.limit:
            wait = max(int(self.window - (now - self._times[0])) + 1, 1)
            raise ToolError(
                f"refused: this server already added {len(self._times)} items in the last"
                f" {int(self.window // 60)} min (at most {self.limit} per hour); nothing was"
                f" written. The next add is possible in {_minutes(wait)}; a person can add"
                " more with `reflections add`"
            )

    def record(self, now: float | None = None) -> None:
        """Count one add that was written.

        Args:
            now: A ``time.monotonic()`` value; ``None`` for now.
        """
        self._times.append(time.monotonic() if now is None else now)


def _minutes(seconds: int) -> str:
    return f"{seconds} s" if seconds < 90 else f"{(seconds + 59) // 60} min"


def check_note(note: object, *, what: str = "a note") -> str:
    """The note as it will be stored (invisible characters removed), if it can be read.

    Args:
        note: The agent's note.
        what: How to name it in the error.

    Returns:
        The cleaned note.

    Raises:
        ToolError: Fewer than :data:`MIN_NOTE_VISIBLE` visible characters.
    """
    text = strip_invisible(str(note or "")).strip()
    if visible_count(text) < MIN_NOTE_VISIBLE:
        raise ToolError(
            f"{what} is required: say what closed it (a commit, a file, a test, the answer)"
            f" in at least {MIN_NOTE_VISIBLE} visible characters"
        )
    return text


def check_body(body: object) -> str | None:
    """An item body as it will be stored, within :data:`MAX_BODY_BYTES`.

    Args:
        body: The agent's body, or ``None``.

    Returns:
        The cleaned body (invisible characters removed), or ``None``.

    Raises:
        ToolError: The body is over the bound (nothing is cut: the agent decides).
    """
    if body is None:
        return None
    text = strip_invisible(str(body))
    size = len(text.encode("utf-8"))
    if size > MAX_BODY_BYTES:
        raise ToolError(
            f"refused: the body is {size:,} bytes, over the {MAX_BODY_BYTES:,} bytes (4 KiB)"
            " an item may hold; keep the item short and name the file or commit with the detail"
        )
    return text


@dataclass
class ServerScope:
    """One server's repository, its read boundary and its add budget.

    ``repo`` is ``None`` only when the working directory is unusable (vanished, relative).
    """

    cwd: str
    repo: Repo | None
    all_repos: bool = False
    adds: AddBudget = field(default_factory=AddBudget)

    @classmethod
    def here(cls, cwd: str | None = None, *, all_repos: bool = False) -> ServerScope:
        """The scope of a server started in ``cwd``.

        Args:
            cwd: The server's working directory; ``None`` for the process's.
            all_repos: ``Settings.mcp_all_repos``.

        Returns:
            The scope.
        """
        where = os.path.abspath(cwd or os.getcwd())
        return cls(where, repo_for(where), all_repos)

    @property
    def key(self) -> str | None:
        """The server's repository key (``None`` when it has none)."""
        return self.repo.key if self.repo is not None else None

    def _outside(self, named: str, key: str) -> ToolError:
        mine = self.key or "none"
        return ToolError(
            f"refused: {named[:200]!r} is repository {key[:200]}, not this server's ({mine});"
            " it reads its own repository and the global learnings"
            " (REFLECT_MCP_ALL_REPOS=1 lets it read others)"
        )

    def read_key(self, repo: object) -> str | None:
        """The repository a read is about: the server's, or one the setting allows.

        Args:
            repo: The tool's ``repo``: omitted for the server's, a directory or a key, or
                ``*`` for every repository.

        Returns:
            The key to read (with the global learnings), or ``None`` for every repository
            (``*``) — and also for a server with no repository (then only globals apply:
            the caller passes ``None`` on only with :attr:`all_repos`).

        Raises:
            ToolError: ``repo`` names another repository (or ``*``) and the setting is off.
        """
        given = str(repo).strip() if repo is not None else ""
        if not given:
            return self.key
        if given == ALL:
            if not self.all_repos:
                raise ToolError(
                    "refused: repo '*' (every repository) needs REFLECT_MCP_ALL_REPOS=1;"
                    " this server reads its own repository and the global learnings"
                )
            return None
        relative = os.path.join(self.cwd, os.path.expanduser(given))
        if not os.path.isabs(os.path.expanduser(given)) and os.path.isdir(relative):
            given = os.path.normpath(relative)  # "." or "src": a directory of the server's
        key = key_of(given)
        if key is None:
            raise ToolError(f"repo {given[:120]!r} is neither a directory nor a repository key")
        if key != self.key and not self.all_repos:
            raise self._outside(given, key)
        return key

    def read_dir(self, cwd: object) -> str:
        """The directory a ``context`` call is about: the server's, or an allowed one.

        Args:
            cwd: The tool's ``cwd`` (omitted: the server's directory).

        Returns:
            An absolute directory.

        Raises:
            ToolError: It is in another repository and the setting is off.
        """
        given = str(cwd).strip() if cwd is not None else ""
        if not given:
            return self.cwd
        where = os.path.abspath(os.path.expanduser(given))
        found = repo_for(where)
        key = found.key if found is not None else None
        if key != self.key and not self.all_repos:
            raise self._outside(given, key or where)
        return where

    def write_repo(self, repo: object) -> str | None:
        """Check that a write is for the server's repository; the ``repo`` to open it with.

        Whatever ``REFLECT_MCP_ALL_REPOS`` says: a fooled agent must not be able to close
        another repository's handoff or fill its session-start block.

        Args:
            repo: The tool's ``repo`` (omitted: the server's repository).

        Returns:
            ``None`` (open the server's own repository from its directory).

        Raises:
            ToolError: ``repo`` names another repository, or the server's directory is not
                in a git repository.
        """
        if self.repo is None or not self.repo.in_git:
            raise ToolError(
                f"refused: this server's directory {self.cwd[:200]} is not in a git repository;"
                " items are written only in the server's own repository"
            )
        given = str(repo).strip() if repo is not None else ""
        if given:
            from reflect_jobs.repo_home import resolve

            try:
                key = resolve(given, self.cwd).key
            except RepoError as exc:
                raise ToolError(str(exc)) from None
            if key != self.key:
                raise ToolError(
                    f"refused: writes go only to this server's repository ({self.key}),"
                    f" not {key[:200]}; nothing was written"
                )
        return None
