"""The package's file-level import graph has no cycle and no upward import.

Measured by ``scripts/import_graph.py`` (``ast``, nothing imported): every import statement
of a file counts, deferred or not, so a cycle cannot hide behind a function-local import.
Before the second redesign there were 4 cycles (a 7-file one in ``writer/``) and the index
imported the worker's model service, which imported the Huey tasks.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _tool():
    spec = importlib.util.spec_from_file_location("import_graph", ROOT / "scripts/import_graph.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("import_graph", module)
    spec.loader.exec_module(module)
    return module


def test_no_import_cycle_and_no_upward_import() -> None:
    tool = _tool()
    edges = tool.graph()
    assert len(edges) > 150, "the graph covers the whole package"
    assert tool.cycles(edges) == []
    assert tool.upward(edges) == []


def test_the_tool_sees_a_cycle_through_a_deferred_import(tmp_path: Path) -> None:
    tool = _tool()
    pkg = tmp_path / "reflect_jobs"
    (pkg / "index").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "index" / "__init__.py").write_text("")
    (pkg / "index" / "a.py").write_text("from . import b\n")
    (pkg / "index" / "b.py").write_text("def f():\n    from reflect_jobs.index.a import x\n")
    (pkg / "index" / "c.py").write_text("def g():\n    import reflect_jobs.tasks\n")
    (pkg / "tasks.py").write_text("")
    edges = tool.graph(tmp_path)
    assert tool.cycles(edges) == [["reflect_jobs.index.a", "reflect_jobs.index.b"]]
    assert tool.upward(edges) == [("reflect_jobs.index.c", "reflect_jobs.tasks")]
