"""The user config file, ``$XDG_CONFIG_HOME/reflect-jobs/config.toml`` (stdlib, on the hook path).

Why a file: a harness runs our hook with *its* environment, not the user's shell's, and a
service manager starts the worker with almost none. A home or KB path set only in the shell
used to send captures to ``~/.reflect/spool`` that the service never read. ``install``
writes what it was run with here, and every entry point — hook, worker, CLI, MCP server,
dashboard — reads it, the environment overriding it (:func:`overlay`).

The file is flat TOML: ``name = value`` per setting, the names of
:data:`reflect_jobs.settings_spec.SPECS` (``reflect-jobs config`` lists them). A key we do
not know is a warning naming the file and the key; a file that is not TOML is one line
naming the file, and the defaults are used — a typo there must never stop a session.

Speed: the hook pays every import after every agent turn, and ``tomllib`` costs ~5 ms
(``typing``, ``datetime``, ``string``). :func:`parse` reads the flat subset the file is made
of with ``str`` methods and ``json`` (already loaded by the hook) and hands anything else —
tables, dotted keys, multi-line values, dates, a duplicate key — to ``tomllib``, so the
answer is always ``tomllib``'s (``tests/test_userconfig.py`` compares them).
"""

from __future__ import annotations

import json
import os

from . import settings_spec as spec

TYPE_CHECKING = False  # not ``typing.TYPE_CHECKING``: the hook reads the config through this module
if TYPE_CHECKING:
    from collections.abc import Mapping

DIR_NAME = "reflect-jobs"
FILE_NAME = "config.toml"


class ConfigSyntaxError(ValueError):
    """The file is not TOML; the message names the file, line and column."""


def config_path(environ: dict[str, str] | None = None) -> str:
    """Where the config file is: ``$XDG_CONFIG_HOME/reflect-jobs/config.toml``.

    Args:
        environ: The environment to read (default ``os.environ``).

    Returns:
        The path (it may not exist). ``XDG_CONFIG_HOME`` counts only when absolute (the XDG
        spec); else ``$HOME/.config``.
    """
    env = os.environ if environ is None else environ
    xdg = (env.get("XDG_CONFIG_HOME") or "").strip()
    if xdg and os.path.isabs(xdg):
        base = xdg
    else:
        home = (env.get("HOME") or "").strip() or os.path.expanduser("~")
        base = os.path.join(home, ".config")
    return os.path.join(base, DIR_NAME, FILE_NAME)


# --- reading ---------------------------------------------------------------------------------

_BARE = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")
_DIGITS = frozenset("0123456789")


class _Fallback(Exception):
    """Something outside the flat subset: ``tomllib`` decides."""


def _bad(text: str) -> bool:
    """Whether ``text`` holds a control character TOML forbids in strings and comments."""
    return any((ord(ch) < 0x20 and ch != "\t") or ch == "\x7f" for ch in text)


def _scalar(text: str) -> tuple[object, str]:
    """One value at the start of ``text``; returns it and the rest of the text."""
    if text.startswith('"'):
        if text.startswith('"""'):
            raise _Fallback
        i = 1
        while i < len(text):
            c = text[i]
            if c == "\\":
                if text[i + 1 : i + 2] not in ('"', "\\", "b", "t", "n", "f", "r"):
                    raise _Fallback  # \u, \U, \e, line continuation: tomllib decides
                i += 2
                continue
            if c == '"':
                raw = text[: i + 1]
                if _bad(raw):
                    raise _Fallback
                try:
                    return json.loads(raw), text[i + 1 :]
                except ValueError:
                    raise _Fallback from None
            i += 1
        raise _Fallback
    if text.startswith("'"):
        if text.startswith("'''"):
            raise _Fallback
        end = text.find("'", 1)
        if end < 0 or _bad(text[1:end]):
            raise _Fallback
        return text[1:end], text[end + 1 :]
    word = text
    for stop in (",", "]", "#", " ", "\t"):
        cut = word.find(stop)
        if cut >= 0:
            word = word[:cut]
    rest = text[len(word) :]
    if word == "true":
        return True, rest
    if word == "false":
        return False, rest
    digits = word[1:] if word[:1] in ("+", "-") else word
    if digits and set(digits) <= _DIGITS and (digits == "0" or digits[0] != "0"):
        return int(word), rest
    whole, dot, frac = digits.partition(".")
    if (
        dot
        and whole
        and frac
        and set(whole + frac) <= _DIGITS
        and (whole == "0" or whole[0] != "0")
    ):
        return float(word), rest
    raise _Fallback


def _value(text: str) -> object:
    """A whole value (a scalar or a one-line array of scalars) and nothing but a comment."""
    text = text.strip()
    if text.startswith("["):
        items: list[object] = []
        rest = text[1:].lstrip()
        while not rest.startswith("]"):
            if not rest or rest.startswith(("[", "{", "#")):
                raise _Fallback
            item, rest = _scalar(rest)
            items.append(item)
            rest = rest.lstrip()
            if rest.startswith(","):
                rest = rest[1:].lstrip()
            elif not rest.startswith("]"):
                raise _Fallback
        if len({type(i) for i in items}) > 1:
            raise _Fallback  # mixed arrays: let tomllib say what it says
        value: object = items
        rest = rest[1:]
    else:
        value, rest = _scalar(text)
    rest = rest.strip()
    if rest and not rest.startswith("#"):
        raise _Fallback
    if _bad(rest):
        raise _Fallback
    return value


def _flat(text: str) -> dict[str, object]:
    """The flat subset: ``key = value`` lines, blank lines and comments."""
    out: dict[str, object] = {}
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            if _bad(stripped):
                raise _Fallback
            continue
        key, eq, rest = stripped.partition("=")
        key = key.strip()
        if not eq or not key or not set(key) <= _BARE or key in out:
            raise _Fallback
        out[key] = _value(rest)
    return out


def parse(text: str, where: str = "config file") -> dict[str, object]:
    """The file's TOML document, as ``tomllib.loads`` would give it.

    Args:
        text: The file's text.
        where: The file's name, for the error message.

    Returns:
        The top-level table.

    Raises:
        ConfigSyntaxError: The text is not TOML (the message names ``where``).
    """
    if "\r" not in text:
        try:
            return _flat(text)
        except _Fallback:
            pass
    import tomllib

    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigSyntaxError(f"{where} is not valid TOML ({exc}); using defaults") from None


def _env_text(name: str, value: object) -> str | None:
    """A config value as its variable would hold it; None when its shape cannot be one.

    Only the shape is checked here (a table or a list where one value belongs): whether the
    value is usable is ``Settings``' question, which names the file and key when it is not.
    """
    kind = spec.BY_NAME[name][3]
    if isinstance(value, bool):
        if kind in ("int", "float"):
            return None
        return "1" if value else "0"
    if isinstance(value, int | float | str):
        return str(value)
    if (
        name == "checkpoints"
        and isinstance(value, list)
        and all(isinstance(v, int) and not isinstance(v, bool) for v in value)
    ):
        return ",".join(str(v) for v in value) or "off"
    return None


class Loaded:
    """One reading of the config file: what it sets and what was wrong with it.

    Args:
        path: The file's path.
        exists: Whether it exists.
        values: Known keys with a usable value, as written.
        env: The same as variables.
        problems: One line per problem.
    """

    __slots__ = ("path", "exists", "values", "env", "problems")

    def __init__(
        self,
        path: str,
        exists: bool,
        values: dict[str, object],
        env: dict[str, str],
        problems: tuple[str, ...],
    ) -> None:
        #: The file's path.
        self.path = path
        #: Whether it exists.
        self.exists = exists
        #: Known keys with a value of the right type, as written (``ignore`` included).
        self.values = values
        #: The same as variables: ``{"REFLECT_HOME": "/x", …}`` (keys with a variable).
        self.env = env
        #: One line per problem (not TOML, an unknown key, a value of the wrong type).
        self.problems = problems


_CACHE: dict[str, tuple[tuple[int, int, int], Loaded]] = {}


def load(environ: dict[str, str] | None = None) -> Loaded:
    """Read the config file (cached by its stat: the hook may ask several times).

    Never raises: an unreadable or broken file reads as empty, with the reason in
    ``problems``.

    Args:
        environ: The environment that locates the file (default ``os.environ``).

    Returns:
        The file's values and problems.
    """
    path = config_path(environ)
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return Loaded(path, False, {}, {}, ())
    except OSError as exc:
        return Loaded(
            path, False, {}, {}, (f"{path}: cannot read ({exc.strerror}); using defaults",)
        )
    stamp = (st.st_mtime_ns, st.st_size, st.st_ino)
    hit = _CACHE.get(path)
    if hit is not None and hit[0] == stamp:
        return hit[1]
    loaded = _read(path)
    _CACHE[path] = (stamp, loaded)
    return loaded


def _read(path: str) -> Loaded:
    try:
        with open(path, "rb") as fh:
            text = fh.read(1 << 20).decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        return Loaded(path, True, {}, {}, (f"{path}: cannot read ({exc}); using defaults",))
    try:
        doc = parse(text, path)
    except ConfigSyntaxError as exc:
        return Loaded(path, True, {}, {}, (str(exc),))
    values: dict[str, object] = {}
    env: dict[str, str] = {}
    problems: list[str] = []
    for key, value in doc.items():
        row = spec.BY_NAME.get(key)
        if row is None:
            problems.append(
                f"{path}: unknown key {key!r} (ignored; `reflect-jobs config` lists the keys)"
            )
            continue
        if key == "ignore":
            if isinstance(value, list) and all(isinstance(v, str) for v in value):
                values[key] = tuple(value)
            else:
                problems.append(f"{path}: {key} must be a list of strings (ignored)")
            continue
        text_value = _env_text(key, value)
        if text_value is None:
            problems.append(f"{path}: {key} must be a single value, got {value!r} (ignored)")
            continue
        values[key] = value
        env[row[1]] = text_value
    return Loaded(path, True, values, env, tuple(problems))


def overlay(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment with the config file filling what it does not set.

    A variable that is set and not blank wins over the file; a blank or missing one takes
    the file's value, when the file has one.

    Args:
        environ: The environment (default ``os.environ``); never modified.

    Returns:
        A new dict: the environment plus the file's values for the variables it leaves open.
    """
    env = dict(os.environ if environ is None else environ)
    for var, value in load(env).env.items():
        if not _set(env, var):
            env[var] = value
    return env


def ignored(environ: dict[str, str] | None = None) -> tuple[str, ...]:
    """The repositories never captured nor told anything (``reflect-jobs ignore``).

    The config file's ``ignore`` list only (no variable sets it): the hook reads it here at
    the cost of one ``stat`` (the file's reading is cached by its stat).

    Args:
        environ: The environment that locates the file (default ``os.environ``).

    Returns:
        The entries as written (keys from ``repo.py``; see ``repo.listed``).
    """
    value = load(environ).values.get("ignore", ())
    return tuple(value) if isinstance(value, tuple | list) else ()


def _set(env: dict[str, str] | os._Environ[str], var: str) -> bool:
    """Whether the environment sets ``var`` (the deprecated ``REFLECT_STATE_DIR`` sets the home)."""
    if (env.get(var) or "").strip():
        return True
    return var == "REFLECT_HOME" and bool((env.get("REFLECT_STATE_DIR") or "").strip())


def from_file(environ: dict[str, str] | None = None) -> dict[str, str]:
    """Which variables :func:`overlay` took from the file: variable → setting name.

    Args:
        environ: The environment (default ``os.environ``).

    Returns:
        The variables the environment left open and the file set.
    """
    env = os.environ if environ is None else environ
    return {var: spec.BY_VAR[var] for var in load(dict(env)).env if not _set(env, var)}


# --- writing (install; not on the hook path) -----------------------------------------------

HEADER = """\
# reflect-jobs configuration: one `name = value` per setting (docs/CONFIGURATION.md).
# Written by `reflect-jobs install`; edit freely. A variable set in the environment
# (REFLECT_HOME for home, ...) overrides the value here; `reflect-jobs config` shows every
# setting, its value and where it came from.
"""


def toml_value(value: object) -> str:
    """A value as TOML text (strings as JSON strings, which are TOML basic strings).

    Args:
        value: A str, bool, int, float, or a list/tuple of them.

    Returns:
        The TOML literal.
    """
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, list | tuple):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    return json.dumps(str(value), ensure_ascii=False)


def updated_text(text: str, updates: dict[str, object | None]) -> str:
    """The file's text with ``updates`` applied, everything else (comments too) kept.

    A key's line is replaced where it is; a new key goes after the last top-level line
    (before any table); ``None`` removes a key.

    Args:
        text: The current text (``""`` for a new file, which gets :data:`HEADER`).
        updates: Setting name → new value, or None to remove it.

    Returns:
        The new text.
    """
    lines = text.splitlines() if text.strip() else HEADER.splitlines()
    table_at = next((i for i, ln in enumerate(lines) if ln.lstrip().startswith("[")), len(lines))
    pending = dict(updates)
    out: list[str] = []
    for i, line in enumerate(lines):
        key = line.split("=", 1)[0].strip() if "=" in line and i < table_at else None
        if key in pending and not line.lstrip().startswith("#"):
            value = pending.pop(key)
            if value is not None:
                out.append(f"{key} = {toml_value(value)}")
            continue
        if i == table_at:
            out += [f"{k} = {toml_value(v)}" for k, v in pending.items() if v is not None]
            pending = {}
            if out and out[-1].strip():
                out.append("")
        out.append(line)
    out += [f"{k} = {toml_value(v)}" for k, v in pending.items() if v is not None]
    return "\n".join(out).rstrip("\n") + "\n"
