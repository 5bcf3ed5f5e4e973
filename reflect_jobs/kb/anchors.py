"""Anchors: the code a learning speaks about, found at add time for $0 and without a model.

A learning names files and symbols — ``reflect_jobs/writer/prompt.py``, `` `plan_actions` ``,
``REFLECT_REVIEW_BELOW`` — in its title, rule, fix and evidence. Those that exist in the
session's repository are stored as ``anchors: [{path, symbol?}]`` (at most
:data:`MAX_ANCHORS`) in the note and the ledger, so a later recall can check that the code a
learning is about still exists before telling it (ARCHITECTURE §7).

What counts, and why:

* Candidates: backticked spans, path-like tokens (a ``/`` or a known file extension),
  dotted module names (``reflect_jobs.writer.actions``), and identifiers that cannot be
  plain words (``snake_case``, ``CamelCase``, ``ALL_CAPS_NAMES``, ``name()``). A backticked
  plain word (`` `drain` ``) is looked for only in files the learning names.
* Paths are the model's (hostile) text: an absolute path, a ``~`` or ``..`` component, a
  NUL or anything under ``.git/`` is refused before the file system is touched; the rest is
  resolved under the repository root and kept only when the resolved path is still inside
  it (a symlink that leaves the repository is never followed to its target's contents) and
  is a regular file or a directory (a FIFO is never opened).
* Symbols are searched with a fixed string: first in the files the learning names (at most
  :data:`FILE_READ_BYTES` read per file, :data:`TOTAL_READ_BYTES` in all), then, for those
  not found there, with one ``git grep -F -I -o`` over the repository's tracked files whose
  output is read line by line and which is killed when every symbol has a file or the time
  budget ends. A bare file name (``prompt.py``) not at the root is looked up in one ``git
  ls-files`` listing, streamed the same way.

Cost on a large repository: a few ``stat`` calls per candidate, bounded reads, and at most
two ``git`` processes per learning, each killed at the learning's deadline (at most
:data:`LEARNING_BUDGET_SEC`, and the caller's overall deadline); nothing walks the tree.
A repository that is gone (or unknown) gives no anchors — the learning is stored anyway.
"""

from __future__ import annotations

import os
import re
import stat
import subprocess
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from .render import MAX_ANCHORS

#: Per learning: candidate paths and symbols looked at (the rest are ignored).
MAX_PATHS = 20
MAX_SYMBOLS = 12
#: Bounded symbol search in named files.
FILE_READ_BYTES = 1_000_000
TOTAL_READ_BYTES = 8_000_000
#: Time one learning's anchors may take, at most (spawned ``git`` included).
LEARNING_BUDGET_SEC = 1.0
#: The fields anchors are read from (ARCHITECTURE §7).
FIELDS = ("title", "rule", "fix", "evidence")
_FIELD_SCAN_CHARS = 4_000
_MAX_TOKEN = 200

_BACKTICK = re.compile(r"`([^`\n]{1,200})`")
_EXTENSIONS = [
    "py",
    "pyi",
    "js",
    "mjs",
    "cjs",
    "ts",
    "tsx",
    "jsx",
    "go",
    "rs",
    "rb",
    "java",
    "kt",
    "kts",
    "c",
    "h",
    "cc",
    "cpp",
    "cxx",
    "hpp",
    "hh",
    "cs",
    "php",
    "swift",
    "m",
    "mm",
    "sh",
    "bash",
    "zsh",
    "fish",
    "ps1",
    "toml",
    "yaml",
    "yml",
    "json",
    "jsonl",
    "md",
    "rst",
    "txt",
    "cfg",
    "ini",
    "conf",
    "sql",
    "html",
    "htm",
    "css",
    "scss",
    "sass",
    "less",
    "lock",
    "mk",
    "proto",
    "gradle",
    "xml",
    "env",
    "ipynb",
    "vue",
    "svelte",
    "lua",
    "pl",
    "pm",
    "r",
    "scala",
    "ex",
    "exs",
    "erl",
    "hs",
    "ml",
    "tf",
    "hcl",
    "dockerfile",
    "gitignore",
    "editorconfig",
    "csv",
    "tsv",
]
_SPECIAL_FILES = frozenset(
    [
        "Makefile",
        "Dockerfile",
        "Containerfile",
        "Procfile",
        "Gemfile",
        "Rakefile",
        "Justfile",
        "Vagrantfile",
        "Jenkinsfile",
        "LICENSE",
        "README",
        "CHANGELOG",
    ]
)
_PATHISH = re.compile(
    r"(?<![\w/.~-])((?:\.{0,2}/)?[\w.@+-]+(?:/[\w.@+-]+)*/?)(?::(\d+|[A-Za-z_]\w*))?(?![\w/])"
)
_IDENT = re.compile(r"(?<![\w./-])([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*)(\(\))?(?![\w/-])")
_MODULE_DEPTH = 6
_STRIP = ".,;:!?)]}>'\""
_PROSE = frozenset({"md", "rst", "txt", "adoc"})


@dataclass(frozen=True)
class Anchor:
    """A repository-relative path, and a symbol found in it (when one was)."""

    path: str
    symbol: str | None = None

    def as_dict(self) -> dict[str, str]:
        """The frontmatter/ledger form: ``{"path"}`` or ``{"path", "symbol"}``.

        Returns:
            The mapping.
        """
        return (
            {"path": self.path}
            if self.symbol is None
            else {"path": self.path, "symbol": self.symbol}
        )


@dataclass
class Candidates:
    """What a learning's text names: paths (maybe with a symbol) and symbols."""

    paths: list[tuple[str, str | None]] = field(default_factory=list)
    symbols: list[str] = field(default_factory=list)  # grep-worthy identifiers
    weak: list[str] = field(default_factory=list)  # backticked words: named files only
    modules: list[str] = field(default_factory=list)  # dotted names: maybe a/b/c.py


def _is_strong(name: str) -> bool:
    """An identifier that cannot be an ordinary word: worth a repository-wide search."""
    bare = name.removesuffix("()")
    if len(bare) < 4 or "." in bare:
        return False
    if "_" in bare.strip("_"):
        return True
    return bool(re.search(r"[a-z][A-Z]|[A-Z]{2,}[a-z]|^[A-Z][a-z]+[A-Z]", bare))


def _looks_like_path(token: str) -> bool:
    if "://" in token or token.startswith("www."):
        return False
    if "/" in token.strip("/"):
        return True
    base = token.rsplit("/", 1)[-1]
    if base in _SPECIAL_FILES:
        return True
    stem, dot, ext = base.rpartition(".")
    return bool(dot and stem and ext.lower() in _EXTENSIONS)


def safe_relpath(token: str) -> str | None:
    """``token`` as a repository-relative path, or ``None`` when it must not be touched.

    Args:
        token: A path as a learning wrote it.

    Returns:
        The normalised relative path (``./a/b.py`` → ``a/b.py``, a trailing ``/`` dropped);
        ``None`` for an empty token, an absolute path, a ``~`` or ``..`` component, a NUL, a
        backslash, or a path into ``.git``.
    """
    if not token or len(token) > _MAX_TOKEN or "\x00" in token or "\\" in token:
        return None
    if token.startswith(("/", "~")) or re.match(r"^[A-Za-z]:", token):
        return None
    parts = [p for p in token.split("/") if p not in ("", ".")]
    if not parts or any(p == ".." or p.startswith("~") for p in parts) or parts[0] == ".git":
        return None
    return "/".join(parts)


def candidates(texts: Iterable[str]) -> Candidates:
    """The paths and symbols a learning's text names, in order of first mention.

    Args:
        texts: The learning's fields (see :data:`FIELDS`).

    Returns:
        The :class:`Candidates`, each list without duplicates and bounded.
    """
    out = Candidates()
    seen: set[object] = set()

    def add_path(token: str, symbol: str | None) -> None:
        rel = safe_relpath(token.rstrip(_STRIP))
        key = ("p", rel, symbol)
        if rel and key not in seen and len(out.paths) < MAX_PATHS:
            seen.add(key)
            out.paths.append((rel, symbol))

    def add_symbol(name: str, strong: bool) -> None:
        name = name.removesuffix("()")
        if not name or name in seen:
            return
        seen.add(name)
        target = out.symbols if strong else out.weak
        if len(target) < MAX_SYMBOLS:
            target.append(name)

    def scan(text: str, backticked: bool) -> None:
        for match in _PATHISH.finditer(text):
            token, suffix = match.group(1), match.group(2)
            if not _looks_like_path(token):
                continue
            symbol = suffix if suffix and not suffix.isdigit() else None
            add_path(token, symbol)
            if symbol:
                add_symbol(symbol, _is_strong(symbol) or backticked)
        for match in _IDENT.finditer(text):
            name = match.group(1)
            if _looks_like_path(name):
                continue
            if "." in name:  # a module path (maybe), and its last part as the symbol
                if name not in out.modules and len(out.modules) < MAX_PATHS:
                    out.modules.append(name)
                name = name.rsplit(".", 1)[1]
            if _is_strong(name) or match.group(2):
                add_symbol(name, True)
            elif backticked and len(name) >= 3:
                add_symbol(name, False)

    for text in texts:
        text = text[:_FIELD_SCAN_CHARS]
        for span in _BACKTICK.findall(text):
            span = span.strip()
            if "::" in span:  # path::symbol (Rust, pytest ids)
                left, _, right = span.partition("::")
                if _looks_like_path(left):
                    add_path(left, right.split("::")[0] or None)
            scan(span, backticked=" " not in span)
        scan(_BACKTICK.sub(" ", text), backticked=False)
    return out


def _inside(root_real: str, rel: str) -> tuple[str, bool] | None:
    """The real path of ``root/rel`` and whether it is a regular file; ``None`` when it does
    not exist, leaves the root (through ``..`` or a symlink), or is neither file nor dir."""
    joined = os.path.join(root_real, rel)
    try:
        os.lstat(joined)
        real = os.path.realpath(joined)
        if real != root_real and not real.startswith(root_real + os.sep):
            return None
        mode = os.stat(real).st_mode
    except (OSError, ValueError):
        return None
    if stat.S_ISREG(mode):
        return real, True
    if stat.S_ISDIR(mode):
        return real, False
    return None


def _read(real: str, budget: list[int]) -> bytes:
    """At most :data:`FILE_READ_BYTES` of a regular file, charged to ``budget``."""
    want = min(FILE_READ_BYTES, budget[0])
    if want <= 0:
        return b""
    try:
        fd = os.open(
            real, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
        )
    except OSError:
        return b""
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return b""
        data = os.read(fd, want)
    except OSError:
        return b""
    finally:
        os.close(fd)
    budget[0] -= len(data)
    return data


def _stream_git(root: str, args: list[str], deadline: float, on_line) -> None:  # type: ignore[no-untyped-def]
    """Run ``git -C root *args``, feeding each stdout line to ``on_line`` until it returns
    True, the output ends, or ``deadline`` (``time.monotonic()``) passes; then kill it."""
    remaining = deadline - time.monotonic()
    if remaining <= 0:
        return
    env = {**os.environ, "GIT_OPTIONAL_LOCKS": "0", "LC_ALL": "C"}
    try:
        proc = subprocess.Popen(
            ["git", "-C", root, *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            stdin=subprocess.DEVNULL,
            env=env,
        )
    except OSError:
        return
    timer = threading.Timer(remaining, proc.kill)
    timer.daemon = True
    timer.start()
    try:
        assert proc.stdout is not None
        for raw in proc.stdout:
            if on_line(raw.rstrip(b"\n")) or time.monotonic() > deadline:
                break
    finally:
        timer.cancel()
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()


def _grep_symbols(root: str, symbols: list[str], deadline: float) -> dict[str, str]:
    """The first tracked file (in git's order, code before prose) holding each symbol, by one
    fixed-string grep; it stops once every symbol is in a code file, or at ``deadline``."""
    found: dict[str, str] = {}
    in_code: set[str] = set()  # symbols whose file is code, not prose: settled
    wanted = set(symbols)
    args = ["grep", "-F", "-I", "-o", "-z", "--no-color", "--full-name"]
    for sym in symbols:
        args += ["-e", sym]

    def on_line(line: bytes) -> bool:
        path, sep, match = line.partition(b"\x00")
        if sep:
            name = match.decode("utf-8", "replace")
            if name in wanted and name not in in_code:
                where = path.decode("utf-8", "replace")
                prose = where.rsplit(".", 1)[-1].lower() in _PROSE
                if not prose:
                    in_code.add(name)
                    found[name] = where
                elif name not in found:
                    found[name] = where  # documentation: kept unless code names it too
        return len(in_code) == len(wanted)

    _stream_git(root, [*args, "--", "."], deadline, on_line)
    return found


def _ls_basenames(root: str, names: set[str], deadline: float) -> dict[str, str]:
    """The first tracked path whose file name is each of ``names`` (one ``git ls-files``)."""
    found: dict[str, str] = {}

    def on_line(line: bytes) -> bool:
        for entry in line.split(b"\x00"):
            path = entry.decode("utf-8", "replace")
            base = path.rsplit("/", 1)[-1]
            if base in names and base not in found:
                found[base] = path
        return len(found) == len(names)

    _stream_git(root, ["ls-files", "-z", "--full-name"], deadline, on_line)
    return found


def _module_file(root_real: str, dotted: str) -> tuple[str, str, bool, str | None] | None:
    """``a.b.c`` as ``a/b/c.py``, the package ``a/b/c/``, or ``a/b.py`` holding ``c``."""
    parts = dotted.split(".")[:_MODULE_DEPTH]
    for k in range(len(parts), 0, -1):
        base = "/".join(parts[:k])
        for rel in (base + ".py", base) if k == len(parts) else (base + ".py",):
            if safe_relpath(rel) is None:
                continue
            hit = _inside(root_real, rel)
            if hit is not None:
                return rel, hit[0], hit[1], parts[k] if k < len(parts) else None
    return None


def find_anchors(
    learning: Mapping[str, object], root: str | None, *, deadline: float | None = None
) -> list[dict[str, str]]:
    """The anchors of one learning in the repository at ``root``.

    Args:
        learning: The learning; the :data:`FIELDS` are read (non-strings ignored).
        root: The session's repository root (``prepare_stats["repo"]["root"]``); ``None``,
            or a directory that no longer exists, gives no anchors.
        deadline: A ``time.monotonic()`` time no work may pass (the caller's budget for all
            its learnings); this learning also stops after :data:`LEARNING_BUDGET_SEC`.

    Returns:
        At most :data:`MAX_ANCHORS` ``{"path"}`` / ``{"path", "symbol"}`` mappings:
        the named paths that exist (each with the first named symbol found in it), then
        files where a named symbol was found by ``git grep``.
    """
    if not isinstance(root, str) or not root or not os.path.isdir(root):
        return []
    start = time.monotonic()
    until = start + LEARNING_BUDGET_SEC
    if deadline is not None:
        until = min(until, deadline)
    root_real = os.path.realpath(root)
    texts = [learning.get(f) for f in FIELDS]
    cands = candidates(t for t in texts if isinstance(t, str))
    anchors: list[Anchor] = []
    seen_paths: set[str] = set()
    budget = [TOTAL_READ_BYTES]
    unresolved: dict[str, str | None] = {}  # bare file name -> its symbol
    symbols_left = list(cands.symbols)
    all_symbols = cands.symbols + cands.weak

    def add(anchor: Anchor) -> None:
        if len(anchors) < MAX_ANCHORS and (anchor.path, anchor.symbol) not in {
            (a.path, a.symbol) for a in anchors
        }:
            anchors.append(anchor)
            seen_paths.add(anchor.path)

    def with_symbol(rel: str, real: str, is_file: bool, named: str | None) -> None:
        symbol = None
        if is_file and time.monotonic() < until:
            data = _read(real, budget)
            order = [named] if named else []
            order += [s for s in all_symbols if s != named]
            for sym in order:
                if sym and sym.encode() in data:
                    symbol = sym
                    break
        if symbol in symbols_left:
            symbols_left.remove(symbol)
        add(Anchor(rel, symbol))

    for rel, named in cands.paths:
        if len(anchors) >= MAX_ANCHORS or time.monotonic() > until:
            break
        if rel in seen_paths:
            continue
        hit = _inside(root_real, rel)
        if hit is None:
            if "/" not in rel:
                unresolved.setdefault(rel, named)
            continue
        with_symbol(rel, hit[0], hit[1], named)
    for dotted in cands.modules:
        if len(anchors) >= MAX_ANCHORS or time.monotonic() > until:
            break
        module = _module_file(root_real, dotted)
        if module is not None and module[0] not in seen_paths:
            with_symbol(*module)
    if unresolved and len(anchors) < MAX_ANCHORS and time.monotonic() < until:
        for base, path in _ls_basenames(root_real, set(unresolved), until).items():
            hit = _inside(root_real, path)
            if hit is not None and path not in seen_paths:
                with_symbol(path, hit[0], hit[1], unresolved[base])
    if symbols_left and len(anchors) < MAX_ANCHORS and time.monotonic() < until:
        for sym, path in sorted(
            _grep_symbols(root_real, symbols_left, until).items(),
            key=lambda kv: symbols_left.index(kv[0]),
        ):
            if safe_relpath(path) is not None and _inside(root_real, path) is not None:
                add(Anchor(path, sym))
    return [a.as_dict() for a in anchors[:MAX_ANCHORS]]
