"""The KB's derived indexes: lexical (SQLite FTS5) and graph/vector (nano-graphrag).

Both are rebuilt from the notes, so damage is repaired by reindexing, never by hand.
:mod:`.lexical` is the exact-match leg and always present; :mod:`.graphrag` (with the
SQLite storages :mod:`.sqlite_store`, :mod:`.sqlite_vectors`, :mod:`.sqlite_graph` and
:mod:`.clustering`) needs torch and is optional (``REFLECT_INDEX_VECTORS=0``).
:mod:`.search` queries them, :mod:`.maintenance` keeps them in step with the notes,
:mod:`.graphml_repair` fixes the GraphML export, and :mod:`.semantic` answers the pipeline's
similarity questions.

Nothing is imported here: the heavy modules load only when a caller asks for them.
"""
