"""Every public function of the library documents its parameters and returns (Google style).

The rule (redesign issue, item 9): a public function or method — no leading underscore, at
module level or on a public class — has a docstring; if it takes parameters (``self``/``cls``
aside) the docstring has an ``Args:`` section naming each of them and nothing else; if its
return annotation is something other than ``None`` it has a ``Returns:`` or ``Yields:``
section. Read with ``ast``, so no module is imported and the check costs nothing.

The allow-list is explicit and small:

* properties (and their setters/deleters): a docstring, no sections; protocol dunders
  (``__len__``, ``__enter__``, ``__post_init__``…): nothing, their name is their contract;
  ``__init__`` and ``__call__`` are checked like any method, and ``__init__`` may document its
  parameters in the class docstring instead, as Google style allows;
* ``@overload`` stubs: nothing (the implementation carries the docstring);
* methods of a ``Protocol`` class: nothing (they are ``...`` stubs; the Protocol's own
  docstring describes the contract);
* click commands: ``Args:`` must come after the ``\\f`` line, because click shows everything
  before it as ``--help`` text.

``ENFORCED`` covers the whole package: every module is checked.
"""

from __future__ import annotations

import ast
import inspect
import re
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "reflect_jobs"

_SECTION = re.compile(
    r"^(?P<indent>\s*)(?P<name>Args|Arguments|Returns|Yields|Raises|Attributes|Examples?|"
    r"Notes?|Warns|Warnings|See Also|Todo):\s*$"
)
_ARG_ENTRY = re.compile(r"^(?P<name>\*{0,2}[A-Za-z_]\w*)\s*(?:\([^)]*\))?\s*:(?P<rest>.*)$")
_PROPERTY_DECORATORS = {"property", "cached_property", "setter", "getter", "deleter"}
_CLICK_DECORATORS = {"command", "group"}
_NO_RETURN = {"None", "NoReturn", "Never"}


def _relative(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def _decorator_names(node: ast.FunctionDef | ast.AsyncFunctionDef) -> set[str]:
    """Last dotted component of each decorator: ``@x.setter`` -> ``setter``."""
    names = set()
    for dec in node.decorator_list:
        target = dec.func if isinstance(dec, ast.Call) else dec
        if isinstance(target, ast.Attribute):
            names.add(target.attr)
        elif isinstance(target, ast.Name):
            names.add(target.id)
    return names


def _is_protocol(cls: ast.ClassDef) -> bool:
    for base in cls.bases:
        target = base.value if isinstance(base, ast.Subscript) else base
        name = target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", "")
        if name == "Protocol":
            return True
    return False


def sections(doc: str) -> dict[str, list[str]]:
    """Google-style sections of a docstring: name -> its body lines (header excluded)."""
    lines = inspect.cleandoc(doc).splitlines()
    found: dict[str, list[str]] = {}
    i = 0
    while i < len(lines):
        match = _SECTION.match(lines[i])
        i += 1
        if not match:
            continue
        indent = len(match.group("indent"))
        body: list[str] = []
        while i < len(lines) and (
            not lines[i].strip() or len(lines[i]) - len(lines[i].lstrip()) > indent
        ):
            body.append(lines[i])
            i += 1
        name = "Args" if match.group("name") == "Arguments" else match.group("name")
        found[name] = body
    return found


def arg_entries(body: list[str]) -> dict[str, bool]:
    """Parameter names an ``Args:`` body documents -> whether each has a description."""
    content = [line for line in body if line.strip()]
    if not content:
        return {}
    indent = min(len(line) - len(line.lstrip()) for line in content)
    entries: dict[str, bool] = {}
    current = None
    for line in content:
        depth = len(line) - len(line.lstrip())
        match = _ARG_ENTRY.match(line.strip()) if depth == indent else None
        if match:
            current = match.group("name").lstrip("*")
            entries[current] = bool(match.group("rest").strip())
        elif current is not None and depth > indent:
            entries[current] = True  # a continuation line describes it
    return entries


def _parameters(node: ast.FunctionDef | ast.AsyncFunctionDef, is_method: bool) -> list[str]:
    args = node.args
    positional = [a.arg for a in [*args.posonlyargs, *args.args]]
    if is_method and "staticmethod" not in _decorator_names(node) and positional:
        positional = positional[1:]  # self / cls
    names = positional + ([args.vararg.arg] if args.vararg else [])
    names += [a.arg for a in args.kwonlyargs]
    if args.kwarg:
        names.append(args.kwarg.arg)
    return names


def _returns_something(node: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    ann = node.returns
    if ann is None:
        return False
    if isinstance(ann, ast.Constant):
        return ann.value is not None and str(ann.value) not in _NO_RETURN
    text = ast.unparse(ann)
    return text.rsplit(".", 1)[-1] not in _NO_RETURN


def check_function(
    node: ast.FunctionDef | ast.AsyncFunctionDef,
    *,
    owner: ast.ClassDef | None = None,
) -> list[str]:
    """Problems of one public function or method (``owner`` is its class, if any)."""
    where = f"{owner.name}.{node.name}" if owner else node.name
    where = f"{where} (line {node.lineno})"
    decorators = _decorator_names(node)
    if "overload" in decorators or (owner is not None and _is_protocol(owner)):
        return []
    dunder = node.name.startswith("__") and node.name.endswith("__")
    if dunder and node.name not in ("__init__", "__call__"):
        return []  # protocol methods (__len__, __enter__, __post_init__…) say what they do
    doc = ast.get_docstring(node, clean=False)
    if not doc and node.name == "__init__" and owner is not None:
        doc = ast.get_docstring(owner, clean=False)  # Google style: Args on the class
    if not doc:
        return [f"{where}: no docstring"]
    if decorators & _PROPERTY_DECORATORS:
        return []
    params = _parameters(node, is_method=owner is not None)
    documented_in = doc
    if decorators & _CLICK_DECORATORS:
        if params and "\f" not in doc:
            return [f"{where}: click command without a \\f line before its Args section"]
        documented_in = doc.split("\f", 1)[1] if "\f" in doc else ""
    found = sections(documented_in)
    if node.name == "__init__" and "Args" not in found and owner is not None:
        found = sections(ast.get_docstring(owner, clean=False) or "")
    problems = []
    if params:
        if "Args" not in found:
            problems.append(f"{where}: no Args section for {', '.join(params)}")
        else:
            entries = arg_entries(found["Args"])
            missing = [p for p in params if p not in entries]
            extra = [e for e in entries if e not in params]
            vague = [e for e, described in entries.items() if e in params and not described]
            if missing:
                problems.append(f"{where}: Args does not name {', '.join(missing)}")
            if extra:
                problems.append(f"{where}: Args names non-parameters {', '.join(extra)}")
            if vague:
                problems.append(f"{where}: Args entries without a description: {', '.join(vague)}")
    if _returns_something(node):
        body = found.get("Returns", found.get("Yields"))
        if body is None:
            problems.append(f"{where}: returns {ast.unparse(node.returns)} but has no Returns")
        elif not any(line.strip() for line in body):
            problems.append(f"{where}: empty Returns/Yields section")
    return problems


def check_source(source: str) -> list[str]:
    """Every docstring problem in one module's source."""
    tree = ast.parse(source)
    problems: list[str] = []

    def visit_class(cls: ast.ClassDef) -> None:
        for item in cls.body:
            if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef):
                dunder = item.name.startswith("__") and item.name.endswith("__")
                if dunder or not item.name.startswith("_"):
                    problems.extend(check_function(item, owner=cls))
            elif isinstance(item, ast.ClassDef) and not item.name.startswith("_"):
                visit_class(item)

    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            if not node.name.startswith("_"):
                problems.extend(check_function(node))
        elif isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
            visit_class(node)
    return problems


MODULES = sorted([*PACKAGE.rglob("*.py"), *(ROOT / "workers").rglob("*.py")])


@pytest.mark.parametrize("path", MODULES, ids=_relative)
def test_public_functions_document_args_and_returns(path: Path) -> None:
    problems = check_source(path.read_text(encoding="utf-8"))
    assert not problems, f"{_relative(path)}:\n  " + "\n  ".join(problems)


def test_checker_reports_each_kind_of_gap() -> None:
    source = textwrap.dedent(
        '''
        import click
        from typing import Protocol, overload

        def bare(x): pass

        def no_args(x: int, *rest: str, flag: bool = False) -> int:
            """Summary only."""

        def partial(x: int, y: int) -> None:
            """Summary.

            Args:
                x: The x.
                z: Not a parameter.
                y:
            """

        def empty_returns() -> str:
            """Summary.

            Returns:
            """

        @click.command()
        @click.option("--n")
        def cmd(n: int) -> None:
            """Help text.

            Args:
                n: Shown in --help, wrongly.
            """

        def fine(x: int, *rest: str, **extra: int) -> list[int]:
            """Summary.

            Args:
                x: The x, in seconds.
                *rest: Names,
                    one per item.
                **extra: More.

            Returns:
                The list.
            """

        def gen() -> "Iterator[int]":
            """Summary.

            Yields:
                Numbers.
            """

        def _private(x): pass

        class Thing:
            """A thing.

            Args:
                size: How big.
            """

            def __init__(self, size: int) -> None:
                """Build it."""

            def __repr__(self) -> str:
                """Its repr."""

            @property
            def area(self) -> int:
                """The area."""

            @staticmethod
            def make(size: int) -> "Thing":
                """Make one.

                Returns:
                    A Thing.
                """

            def method(self, y: int) -> None:
                pass

        class Store(Protocol):
            def get(self, key: str) -> str: ...

        @overload
        def over(x: int) -> int: ...
        '''
    )
    problems = [p.split(" (line")[0] + p.split(")", 1)[1] for p in check_source(source)]
    assert problems == [
        "bare: no docstring",
        "no_args: no Args section for x, rest, flag",
        "no_args: returns int but has no Returns",
        "partial: Args names non-parameters z",
        "partial: Args entries without a description: y",
        "empty_returns: empty Returns/Yields section",
        "cmd: click command without a \\f line before its Args section",
        "Thing.make: no Args section for size",
        "Thing.method: no docstring",
    ]
