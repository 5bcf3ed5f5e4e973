"""Reading one setting's value: the parsers ``config.resolve`` runs over the table.

Split from :mod:`reflect_jobs.config` (the ``Settings`` object and where each value comes
from) so each stays small. Every error is one line naming the variable, or the config
file's key and the file when the value came from there (:class:`Reader` ``labels``).
"""

from __future__ import annotations

import os
import re

from . import settings_spec as spec
from .envpaths import TRUE

FALSE = {"0", "false", "no", "off", ""}
WRITER_BACKENDS = spec.BY_NAME["writer_backend"][6]["choices"]
DEFAULT_CHECKPOINTS = spec.BY_NAME["checkpoints"][4]
#: A hub model id as sentence-transformers resolves it: ``name`` or ``owner/name``.
_HUB_MODEL = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*(/[A-Za-z0-9][A-Za-z0-9._-]*)?")


class SettingsError(ValueError):
    """A configuration value is unusable; the message names the variable or the file's key."""


class Reader:
    """Reads variables from a merged environment; messages name where a value came from.

    Args:
        env: The environment over the config file (``userconfig.overlay``).
        labels: Variable → ``"<key> in <config file>"`` for the values the file gave.
    """

    def __init__(self, env: dict[str, str], labels: dict[str, str]) -> None:
        self.env = env
        self.labels = labels

    def label(self, var: str) -> str:
        """How an error names a value's origin.

        Args:
            var: The variable.

        Returns:
            ``REFLECT_X``, or ``key in /path/config.toml`` for a value from the file.
        """
        return self.labels.get(var, var)

    def raw(self, var: str) -> str | None:
        """A value as set, stripped.

        Args:
            var: The variable.

        Returns:
            The value, or None when nothing sets it.
        """
        value = self.env.get(var)
        return None if value is None else value.strip()

    def integer(self, var: str, default: int, *, minimum: int = 0) -> int:
        """An integer setting.

        Args:
            var: The variable.
            default: For an unset or empty value.
            minimum: The smallest value accepted.

        Returns:
            The value.

        Raises:
            SettingsError: Not an integer, or below ``minimum``.
        """
        raw = self.raw(var)
        if raw is None or raw == "":
            return default
        try:
            value = int(raw)
        except ValueError:
            raise SettingsError(f"{self.label(var)} must be an integer, got {raw!r}") from None
        if value < minimum:
            raise SettingsError(f"{self.label(var)} must be >= {minimum}, got {value}")
        return value

    def number(
        self,
        var: str,
        default: float | None,
        *,
        low: float | None = None,
        high: float | None = None,
    ) -> float | None:
        """A number setting.

        Args:
            var: The variable.
            default: For an unset or empty value.
            low: The smallest value accepted (None: no bound).
            high: The largest value accepted (None: no bound).

        Returns:
            The value.

        Raises:
            SettingsError: Not a number, or out of bounds.
        """
        raw = self.raw(var)
        if raw is None or raw == "":
            return default
        try:
            value = float(raw)
        except ValueError:
            raise SettingsError(f"{self.label(var)} must be a number, got {raw!r}") from None
        if (low is not None and value < low) or (high is not None and value > high):
            raise SettingsError(f"{self.label(var)} must be between {low} and {high}, got {value}")
        return value

    def boolean(self, var: str, default: bool, *, empty_is_default: bool = False) -> bool:
        """A 0/1 setting (also true/false, yes/no, on/off).

        Args:
            var: The variable.
            default: For an unset value.
            empty_is_default: An empty value takes the default too (else it means false).

        Returns:
            The value.

        Raises:
            SettingsError: Not a boolean spelling.
        """
        raw = self.raw(var)
        if raw is None or (empty_is_default and raw == ""):
            return default
        low = raw.lower()
        if low in TRUE:
            return True
        if low in FALSE:
            return False
        raise SettingsError(f"{self.label(var)} must be 0/1 (or true/false), got {raw!r}")

    def choice(self, var: str, default: str, choices: tuple[str, ...]) -> str:
        """One of a fixed set of words (case ignored).

        Args:
            var: The variable.
            default: For an unset or empty value.
            choices: The words accepted.

        Returns:
            The value, lowercased.

        Raises:
            SettingsError: Not one of ``choices``.
        """
        raw = (self.raw(var) or "").lower()
        if not raw:
            return default
        if raw not in choices:
            raise SettingsError(
                f"{self.label(var)} must be one of {', '.join(choices)}, got {raw!r}"
            )
        return raw

    def text(self, var: str, default: str = "") -> str:
        """A text setting.

        Args:
            var: The variable.
            default: For an unset or empty value.

        Returns:
            The value, stripped.
        """
        return self.raw(var) or default


def parse_embed_model(r: Reader, *, check_path: bool) -> str | None:
    """``REFLECT_EMBED_MODEL``: a local model directory or a hub model name, or None.

    A value that looks like a path (``/``, ``~``, ``./`` or ``../`` first, or an existing
    path) must name a directory when the vector index is on, since that is where
    sentence-transformers loads it from; ``~`` is expanded. Anything else must be a hub
    model id (``all-MiniLM-L6-v2``, ``sentence-transformers/all-MiniLM-L6-v2``); with the
    network off that only loads if it is cached, which ``doctor`` checks.

    Args:
        r: The reader.
        check_path: Whether a path must exist (the vector index is on).

    Returns:
        The model to load, or None for the packaged MiniLM.

    Raises:
        SettingsError: The value is neither a usable directory nor a hub model id.
    """
    name = r.label("REFLECT_EMBED_MODEL")
    raw = r.raw("REFLECT_EMBED_MODEL")
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


def parse_checkpoints(r: Reader) -> tuple[int, ...]:
    """``REFLECT_CHECKPOINTS``: comma-separated percentages, ascending, each in 1..100.

    Args:
        r: The reader.

    Returns:
        The sorted, de-duplicated thresholds; the default when unset or empty; ``()`` for
        ``off``/``none``/``0`` (every capture makes a pass, the behaviour before checkpoints).

    Raises:
        SettingsError: A part is not an integer in 1..100.
    """
    raw = r.text("REFLECT_CHECKPOINTS")
    if not raw:
        return DEFAULT_CHECKPOINTS
    if raw.lower() in ("off", "none", "0"):
        return ()
    out: set[int] = set()
    for part in raw.split(","):
        part = part.strip().rstrip("%")
        if not part.isdigit() or not 1 <= int(part) <= 100:
            raise SettingsError(
                f"{r.label('REFLECT_CHECKPOINTS')} must be percentages 1..100 separated by "
                f"commas (or off), got {raw!r}"
            )
        out.add(int(part))
    return tuple(sorted(out))
