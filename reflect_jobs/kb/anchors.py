"""Anchors: the code a learning speaks about, found at add time for $0 and without a model.

A learning names files and symbols — ``reflect_jobs/writer/prompt.py``, `` `plan_actions` ``,
``REFLECT_REVIEW_BELOW`` — in its title, rule, fix and evidence. Those that exist in the
session's repository are stored as ``anchors: [{path, symbol?}]`` (at most
:data:`MAX_ANCHORS`) in the note and the ledger, so a later recall can check that the code a
learning is about still exists before telling it (ARCHITECTURE §7).

What counts, and why:

* Candidates: backticked spans, path-like tokens (a ``/`` or a known file extension),
  dotted module names (``reflect_jobs.writer.actions``), and identifiers no prose word has
  (``snake_case``, ``ALL_CAPS_NAMES``, ``camelCase``, ``name()``). ``CamelCase`` and a
  backticked plain word (`` `drain` ``) are looked for only in the files the learning
  names, unless backticked or called: ``SQLite`` and ``JavaScript`` have that shape too.
* Paths are the model's (hostile) text: an absolute path, a ``~`` or ``..`` component, a
  NUL or anything under ``.git/`` is refused before the file system is touched; the rest is
  resolved under the repository root and kept only when the resolved path is still inside
  it (a symlink that leaves the repository is never followed to its target's contents) and
  is a regular file or a directory (a FIFO is never opened).
* Symbols are searched with a fixed string: first in the files the learning names (at most
  :data:`FILE_READ_BYTES` read per file, :data:`TOTAL_READ_BYTES` in all), then, for those
  not found there, with one ``git grep -F -I -o`` over the repository's tracked files whose
  output is read line by line and which is killed when every symbol has a code file or the
  time budget ends (a hit in prose or data — ``.md``, ``.json``, ``.jsonl`` — anchors
  nothing: it mentions the name, code defines it). A bare file name (``prompt.py``) not at the root is
  looked up in one ``git ls-files`` listing, streamed the same way.

Cost on a large repository: nothing walks the tree. A few ``stat`` calls per candidate
(at most :data:`MAX_PATHS` paths and :data:`MAX_SYMBOLS` symbols per learning), bounded
reads, and for a whole add (:func:`find_anchors_many`, every learning of one answer) at most
one ``git ls-files`` and one ``git grep``, killed once answered or at the deadline (at most
:data:`BUDGET_SEC`, less when the caller says so). A repository that is gone (or unknown)
gives no anchors — the learning is stored anyway.
"""

from __future__ import annotations

import os
import re
import stat
import subprocess
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from ..recall.verify import safe_relpath as _safe_relpath
from .render import MAX_ANCHORS

#: Per learning: candidate paths and symbols looked at (the rest are ignored).
MAX_PATHS = 20
MAX_SYMBOLS = 12
#: Bounded symbol search in named files.
FILE_READ_BYTES = 1_000_000
TOTAL_READ_BYTES = 8_000_000
#: Time one call may take, at most, spawned ``git`` included (the caller may give less).
BUDGET_SEC = 2.0
#: The fields anchors are read from (ARCHITECTURE §7).
FIELDS = ("title", "rule", "fix", "evidence")
_FIELD_SCAN_CHARS = 4_000

_BACKTICK = re.compile(r"`([^`\n]{1,200})`")
_EXTENSIONS = frozenset(
    {
        "py", "pyi", "js", "mjs", "cjs", "ts", "tsx", "jsx", "go", "rs", "rb", "java", "kt", "kts",
        "c", "h", "cc", "cpp", "cxx", "hpp", "hh", "cs", "php", "swift", "m", "mm", "sh", "bash",
        "zsh", "fish", "ps1", "toml", "yaml", "yml", "json", "jsonl", "md", "rst", "txt", "cfg",
        "ini", "conf", "sql", "html", "htm", "css", "scss", "sass", "less", "lock", "mk", "proto",
        "gradle", "xml", "env", "ipynb", "vue", "svelte", "lua", "pl", "pm", "r", "scala", "ex",
        "exs", "erl", "hs", "ml", "tf", "hcl", "dockerfile", "gitignore", "editorconfig", "csv",
        "tsv",
    }
)  # fmt: skip
_SPECIAL_FILES = frozenset(
    {
        "Makefile", "Dockerfile", "Containerfile", "Procfile", "Gemfile", "Rakefile", "Justfile",
        "Vagrantfile", "Jenkinsfile", "LICENSE", "README", "CHANGELOG",
    }
)  # fmt: skip
_PATHISH = re.compile(
    r"(?<![\w/.~-])((?:\.{0,2}/)?[\w.@+-]+(?:/[\w.@+-]+)*/?)(?::(\d+|[A-Za-z_]\w*))?(?![\w/])"
)
_IDENT = re.compile(r"(?<![\w./-])([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*)(\(\))?(?![\w/-])")
_MODULE_DEPTH = 6
_STRIP = ".,;:!?)]}>'\""
#: Files a grep hit does not anchor to: prose and data mention names, code defines them.
_PROSE = frozenset({"md", "rst", "txt", "adoc", "json", "jsonl", "csv", "tsv", "log"})
_NOT_SYMBOLS = frozenset({"macOS", "iPhone", "iPad", "iCloud", "eBay", "iTunes", "watchOS"})


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
    """An identifier no prose word or product name has: worth a repository-wide search.

    ``snake_case``, ``ALL_CAPS_NAMES`` and ``camelCase`` (a lower-case start) qualify;
    ``CamelCase`` does not on its own — ``SQLite``, ``PostgreSQL``, ``JavaScript`` have that
    shape too — so it is searched repository-wide only when backticked or called (``X()``).
    """
    bare = name.removesuffix("()")
    if len(bare) < 4 or "." in bare:
        return False
    if "_" in bare.strip("_"):
        return True
    return bool(re.match(r"[a-z]+[A-Z]", bare)) and bare not in _NOT_SYMBOLS


def _is_camel(name: str) -> bool:
    """``CamelCase`` with two humps (``ModelResult``): a class, or a product name."""
    return bool(re.fullmatch(r"[A-Z]\w*[a-z]\w*[A-Z]\w*", name)) and len(name) >= 4


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

    The one rule is :func:`reflect_jobs.recall.verify.safe_relpath` (stdlib, so the
    SessionStart hook checks stored anchors by the same rule they were written by).

    Args:
        token: A path as a learning wrote it.

    Returns:
        The normalised relative path, or ``None`` (see the rule).
    """
    return _safe_relpath(token)


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
            if _is_strong(name) or match.group(2) or (backticked and _is_camel(name)):
                add_symbol(name, True)
            elif (backticked and len(name) >= 3) or _is_camel(name):
                add_symbol(name, False)  # looked for in the named files only

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


def _stream_git(
    root: str, args: list[str], deadline: float, on_line: Callable[[bytes], bool]
) -> None:
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
    """The first tracked code file (in git's order) holding each symbol, by one fixed-string
    grep; it stops once every symbol has one, or at ``deadline``. Prose and data files
    (:data:`_PROSE`) are skipped: they mention a name, the code defines it."""
    found: dict[str, str] = {}
    wanted = set(symbols)
    args = ["grep", "-F", "-I", "-o", "-z", "--no-color", "--full-name"]
    for sym in symbols:
        args += ["-e", sym]

    def on_line(line: bytes) -> bool:
        path, sep, match = line.partition(b"\x00")
        if sep:
            name = match.decode("utf-8", "replace")
            if name in wanted and name not in found:
                where = path.decode("utf-8", "replace")
                if where.rsplit(".", 1)[-1].lower() not in _PROSE:
                    found[name] = where
        return len(found) == len(wanted)

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


class _Found:
    """One learning's anchors as they are found (first mention first, at most ten)."""

    def __init__(self, cands: Candidates) -> None:
        self.cands = cands
        self.anchors: list[Anchor] = []
        self.left = list(cands.symbols)  # strong symbols not yet found in a named file
        self.bare: dict[str, str | None] = {}  # bare file name -> its named symbol

    @property
    def full(self) -> bool:
        return len(self.anchors) >= MAX_ANCHORS

    def add(self, anchor: Anchor) -> None:
        if not self.full and all(
            (a.path, a.symbol) != (anchor.path, anchor.symbol) for a in self.anchors
        ):
            self.anchors.append(anchor)

    def has_path(self, rel: str) -> bool:
        return any(a.path == rel for a in self.anchors)

    def file(
        self, rel: str, real: str, is_file: bool, named: str | None, budget: list[int]
    ) -> None:
        """Anchor a named path, with the first named symbol its bounded read holds."""
        symbol = None
        if is_file:
            data = _read(real, budget)
            order = [named] if named else []
            order += [x for x in self.cands.symbols + self.cands.weak if x != named]
            symbol = next((x for x in order if x and x.encode() in data), None)
        if symbol in self.left:
            self.left.remove(symbol)
        self.add(Anchor(rel, symbol))


def find_anchors_many(
    learnings: list[Mapping[str, object]],
    root: str | None,
    *,
    deadline: float | None = None,
) -> list[list[dict[str, str]]]:
    """The anchors of several learnings of one repository, with one ``git`` of each kind.

    Args:
        learnings: The learnings; the :data:`FIELDS` of each are read (non-strings ignored).
        root: The session's repository root (``prepare_stats["repo"]["root"]``); ``None``,
            or a directory that no longer exists, gives no anchors.
        deadline: A ``time.monotonic()`` time no work may pass; at most
            :data:`BUDGET_SEC` from now in any case.

    Returns:
        Per learning, at most :data:`MAX_ANCHORS` ``{"path"}`` / ``{"path", "symbol"}``
        mappings: the named paths that exist (each with the first named symbol found in
        it), then code files where a named symbol was found by ``git grep``.
    """
    if not isinstance(root, str) or not root or not os.path.isdir(root):
        return [[] for _ in learnings]
    until = time.monotonic() + BUDGET_SEC
    if deadline is not None:
        until = min(until, deadline)
    root_real = os.path.realpath(root)
    budget = [TOTAL_READ_BYTES]
    found = []
    for learning in learnings:
        texts = [learning.get(f) for f in FIELDS]
        found.append(_Found(candidates(t for t in texts if isinstance(t, str))))
    for f in found:  # named paths and dotted modules: stat and bounded reads only
        for rel, named in f.cands.paths:
            if f.full or time.monotonic() > until:
                break
            if f.has_path(rel):
                continue
            hit = _inside(root_real, rel)
            if hit is not None:
                f.file(rel, hit[0], hit[1], named, budget)
            elif "/" not in rel:
                f.bare.setdefault(rel, named)
        for dotted in f.cands.modules:
            if f.full or time.monotonic() > until:
                break
            module = _module_file(root_real, dotted)
            if module is not None and not f.has_path(module[0]):
                f.file(*module, budget)
    bare = {name for f in found if not f.full for name in f.bare}
    if bare and time.monotonic() < until:  # one listing for every learning's bare names
        paths = _ls_basenames(root_real, bare, until)
        for f in found:
            for name, named in f.bare.items():
                path = paths.get(name)
                if path and not f.full and not f.has_path(path):
                    hit = _inside(root_real, path)
                    if hit is not None:
                        f.file(path, hit[0], hit[1], named, budget)
    symbols = list(dict.fromkeys(x for f in found if not f.full for x in f.left))
    if symbols and time.monotonic() < until:  # one grep for every learning's symbols
        where = _grep_symbols(root_real, symbols, until)
        for f in found:
            for sym in f.left:
                path = where.get(sym)
                if path and safe_relpath(path) is not None and _inside(root_real, path):
                    f.add(Anchor(path, sym))
    return [[a.as_dict() for a in f.anchors] for f in found]


def find_anchors(
    learning: Mapping[str, object], root: str | None, *, deadline: float | None = None
) -> list[dict[str, str]]:
    """The anchors of one learning (see :func:`find_anchors_many`).

    Args:
        learning: The learning; the :data:`FIELDS` are read.
        root: The repository root, or ``None``.
        deadline: A ``time.monotonic()`` time no work may pass.

    Returns:
        At most :data:`MAX_ANCHORS` ``{"path", "symbol"?}`` mappings.
    """
    return find_anchors_many([learning], root, deadline=deadline)[0]
