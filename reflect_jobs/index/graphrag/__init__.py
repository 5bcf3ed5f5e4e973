"""Graph + vector index over KB notes, built on nano-graphrag, fully offline.

:class:`GraphIndex` is the whole public surface (with :class:`IndexDoc`, the note it takes,
and :class:`IndexFormatError`); the modules behind it each hold one concept:

* :mod:`.bootstrap`: offline/quiet setup that must run before nano-graphrag is used
  (imported first, here);
* :mod:`.engine`: nano-graphrag's ``GraphRAG`` wired to our SQLite storages, passthrough
  model and embedder;
* :mod:`.passthrough`: the fake model answering nano-graphrag's prompts from sidecars;
* :mod:`.sidecars`: a note's sidecar as nano-graphrag records and normalised contributions;
* :mod:`.manifest`: which chunks/entities/edges each note contributed;
* :mod:`.mutations`: per-note upsert/remove and the community rebuild;
* :mod:`.scoring`: naive/local/global query scores;
* :mod:`.graph_index`: the façade (locks, transactions, reloads, GraphML export);
* :mod:`.legacy`: the one-off migration of the old whole-file format (scheduled for removal).

The storages themselves are :mod:`reflect_jobs.index.sqlite_store` and
:mod:`reflect_jobs.index.sqlite_vectors`; clustering is :mod:`reflect_jobs.index.clustering`.
"""

from . import bootstrap  # noqa: F401, I001 - must run before anything imports nano-graphrag
from ..sqlite_store import IndexFormatError
from .graph_index import GraphIndex
from .sidecars import IndexDoc

__all__ = ["GraphIndex", "IndexDoc", "IndexFormatError"]
