"""Fixtures of the graph-index tests: the packaged embedder and indexes built from the notes
of :mod:`graph_notes`."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="package")
def embedder():
    from reflect_jobs.index.embeddings import get_embedder

    return get_embedder()


@pytest.fixture(scope="package")
def built(tmp_path_factory, embedder):
    """An index of all 20 notes, shared by the read-only tests of this package."""
    from graph_notes import ALL_DOCS

    from reflect_jobs.index.graphrag import GraphIndex

    wd = tmp_path_factory.mktemp("built")
    gi = GraphIndex(wd, embedder=embedder)
    gi.upsert(ALL_DOCS)
    return gi


@pytest.fixture
def fresh(tmp_path, embedder):
    """An empty index of its own."""
    from reflect_jobs.index.graphrag import GraphIndex

    return GraphIndex(tmp_path / "idx", embedder=embedder)
