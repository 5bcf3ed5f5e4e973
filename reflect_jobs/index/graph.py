"""Graph + vector index over KB notes, built on nano-graphrag, fully offline.

What nano-graphrag gives us: its chunker, its entity-extraction parser/merger
(``extract_entities``), its community-report generator and the storage interfaces they talk
to.  What we do NOT use is ``GraphRAG.ainsert``: it keys documents by content hash (a changed
note becomes a second doc, SPEC B13), only extracts entities for *new* content (so a queue of
sidecars handed out in corpus order lands on the wrong notes, B13), drops and regenerates every
community report and re-clusters the whole graph on every insert (B14), and has no delete.
Nor do we use its default storages: they rewrite whole files (JSON KV stores, nano-vectordb
matrices, the GraphML graph) on every commit, so one insert cost O(index) — about 24 MB
rewritten at 5,000 notes.  Instead :class:`GraphIndex` runs its own insert/remove pipeline over
SQLite-backed storages (:mod:`reflect_jobs.index.sqlite_store`, passed to ``GraphRAG`` as its
``key_string_value_json_storage_cls`` / ``vector_db_storage_cls`` / ``graph_storage_cls``):

* Keys are derived from the note id: ``doc-md5(id)``, ``chunk-md5(doc key + chunk text)``, so a
  changed note reuses its doc key, two notes with identical text never share a chunk, and a
  replayed insert is idempotent.
* Entities come from the note's own sidecar.  The passthrough "LLM" never guesses: the
  extraction prompt nano-graphrag builds for a chunk carries a marker naming that chunk key
  (``<<reflect-chunk:chunk-...>>`` is passed as the chunk text to ``extract_entities``; the real
  text goes to the text-chunk store and the chunk vector DB), and the LLM answers with the
  records registered for exactly that chunk.  Entities are attached to every chunk of the note,
  relationships to its first chunk (so edge weights equal the sidecar strength).  A note with no
  entities gets a placeholder entity named after its id.
* A manifest (table ``docs``; :attr:`GraphIndex.docs` is a live read-only view) maps note id ->
  doc key, chunk keys, a fingerprint of text+sidecar, and the note's normalised
  entity/relationship contributions, so ``remove()`` can delete chunks and vectors, strip the
  note's chunk ids from node/edge ``source_id``, drop nodes/edges left with no source, and
  recompute the descriptions, types and weights of shared nodes/edges from the notes that
  remain (and re-embed those entities).
* Clustering and community reports are deferred to :meth:`GraphIndex.rebuild_communities`
  (louvain via networkx; no graspologic).  Upserts never cluster and make no report calls.

Persistence (``workdir/reflect_index.db``, SQLite in WAL mode):

* Every store writes only the rows it touches: KV values as JSON, vectors as float32 BLOBs,
  graph nodes/edges as JSON rows.  The cost of upserting or removing one note no longer grows
  with the index (except through the entities it shares with other notes).
* One SQLite transaction per ``upsert``/``remove``/``rebuild_communities``/``clear`` spans every
  store and is the commit point; on any error it is rolled back and the in-memory read caches
  are dropped (nothing half-applied survives, in memory or on disk).
* Read caches (the vector matrices, the chunk -> note map, a networkx graph) are loaded lazily
  by queries / clustering and kept in sync on writes; a writer that only inserts never loads
  them, so opening the index and adding a note is cheap.
* Writers are serialised by a thread lock and an ``flock`` on ``workdir/.index.lock``.  Every
  commit bumps a generation counter in the ``meta`` table; before every call an instance
  compares it (and the database file's inode, for ``reindex --force`` which deletes the
  directory) and drops its caches when another process has committed since.
* ``graph_chunk_entity_relation.graphml`` (:meth:`GraphIndex.graphml_path`) is now an *export*
  of the graph tables, not the store: it is rewritten at the end of every
  :meth:`~GraphIndex.rebuild_communities` (the periodic task), written after any commit that
  finds it missing (so a fresh or ``--force``-rebuilt index always has one), and on demand by
  :meth:`~GraphIndex.export_graphml`.  Between rebuilds it may lag the index; edits to it
  (``repair --maintain``) do not flow back into the index and are overwritten by the next
  export.
* Migration: a workdir in the old whole-file format (``reflect_index_manifest.json`` +
  ``kv_store_*.json`` + ``vdb_*.json`` + GraphML) is imported into the database once, in one
  transaction, the first time it is opened (under the write lock); the old JSON files are then
  deleted.  If they cannot be read, :class:`IndexFormatError` says to run
  ``reflect-jobs reindex --force`` (which rebuilds the index from the notes anyway).

Queries do not go through nano-graphrag's answer-generation path: they read the vector stores
and the graph directly and return ``(note id, score)`` pairs.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import fcntl
import hashlib
import json
import logging
import math
import os
import re
import threading
from collections import Counter, defaultdict
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from . import offline_tiktoken

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
offline_tiktoken.install()

import networkx as nx  # noqa: E402
from nano_graphrag import _op as _ng_op  # noqa: E402
from nano_graphrag._op import (  # noqa: E402
    extract_entities,
    generate_community_report,
)
from nano_graphrag._utils import (  # noqa: E402
    EmbeddingFunc,
    clean_str,
    compute_mdhash_id,
    encode_string_by_tiktoken,
)
from nano_graphrag.graphrag import GraphRAG  # noqa: E402
from nano_graphrag.prompt import GRAPH_FIELD_SEP, PROMPTS  # noqa: E402

from .sqlite_graph import SQLiteGraphStorage  # noqa: E402
from .sqlite_store import (  # noqa: E402
    DB_NAME,
    SCHEMA_VERSION,
    IndexDB,
    IndexFormatError,
    JsonTableView,
    SQLiteKVStorage,
)
from .sqlite_vectors import SQLiteVectorStorage  # noqa: E402

log = logging.getLogger("reflect_jobs.index.graph")

# nano-graphrag prints progress tickers to stdout; the CLI prints JSON there.  Silence them
# for this module only (thread-safe, unlike swapping sys.stdout).
_ng_op.print = lambda *a, **k: None  # type: ignore[attr-defined]
for _name in ("nano-graphrag", "nano-vectordb"):
    logging.getLogger(_name).setLevel(logging.WARNING)

GRAPHML_NAME = "graph_chunk_entity_relation.graphml"
LEGACY_MANIFEST = "reflect_index_manifest.json"  # format 1 (whole-file stores): migrated
LOCK_NAME = ".index.lock"

_MARKER = "<<reflect-chunk:{}>>"
_MARKER_RE = re.compile(r"<<reflect-chunk:(chunk-[0-9a-f]{32})>>")
_TD = PROMPTS["DEFAULT_TUPLE_DELIMITER"]
_RD = PROMPTS["DEFAULT_RECORD_DELIMITER"]
_CD = PROMPTS["DEFAULT_COMPLETION_DELIMITER"]
_SUMMARY_MAX_CHARS = 600  # well under entity_summary_to_max_tokens (500 tokens)


def _prefix(template: str) -> str:
    return template.split("{", 1)[0]


_P_EXTRACT = _prefix(PROMPTS["entity_extraction"])
_P_REPORT = _prefix(PROMPTS["community_report"])
_P_SUMMARY = _prefix(PROMPTS["summarize_entity_descriptions"])
_P_GLOBAL_MAP = _prefix(PROMPTS["global_map_rag_points"])
_P_CONTINUE = PROMPTS["entiti_continue_extraction"]
_P_IFLOOP = PROMPTS["entiti_if_loop_extraction"]


# --------------------------------------------------------------------------------------------
# public data type


@dataclass
class IndexDoc:
    id: str
    text: str
    sidecar: dict = field(default_factory=dict)


# --------------------------------------------------------------------------------------------
# sidecar -> nano-graphrag records


def _sanitize(value: Any) -> str:
    """Make a value safe inside a quoted tuple field of nano-graphrag's record format."""
    s = "" if value is None else str(value)
    for bad in (_CD, _TD, _RD, '"'):
        s = s.replace(bad, " ")
    s = re.sub(r"[\x00-\x1f\x7f]+", " ", s)  # newlines would break the record regex
    return re.sub(r"\s{2,}", " ", s).strip()


def _norm_name(raw: str) -> str:
    """The node name nano-graphrag derives from a sanitised name (quotes included, upper)."""
    return clean_str(f'"{raw}"'.upper())


def _norm_desc(raw: str) -> str:
    return clean_str(f'"{raw}"')


def _strength(value: Any) -> float:
    try:
        v = float(value)
    except (TypeError, ValueError):
        return 5.0
    return v if math.isfinite(v) else 5.0


def _fmt_num(v: float) -> str:
    return str(int(v)) if float(v).is_integer() and abs(v) < 1e15 else repr(float(v))


@dataclass
class _Contribution:
    """A note's normalised graph contribution, as nano-graphrag will store it."""

    entity_records: str = ""  # records for every chunk
    relation_records: str = ""  # records for the first chunk only
    entities: list[list[str]] = field(default_factory=list)  # [name, type, desc]
    edges: list[list[Any]] = field(default_factory=list)  # [a, b, desc, weight] with a <= b


def sidecar_contribution(doc: IndexDoc) -> _Contribution:
    sc = doc.sidecar or {}
    ent_recs: list[str] = []
    entities: list[list[str]] = []
    for e in sc.get("entities") or []:
        if not isinstance(e, dict):
            continue
        name = _sanitize(e.get("name"))
        if not name:
            continue
        etype = _sanitize(e.get("type") or "concept") or "concept"
        desc = _sanitize(e.get("description") or "")
        ent_recs.append(f'("entity"{_TD}"{name}"{_TD}"{etype}"{_TD}"{desc}")')
        entities.append([_norm_name(name), clean_str(f'"{etype}"'.upper()), _norm_desc(desc)])
    if not entities:  # placeholder so the note is in the graph (local search) at all
        name = _sanitize(f"note {doc.id}")
        first = next((ln.strip("# ").strip() for ln in doc.text.splitlines() if ln.strip()), "")
        desc = _sanitize(first[:200]) or name
        ent_recs.append(f'("entity"{_TD}"{name}"{_TD}"note"{_TD}"{desc}")')
        entities.append([_norm_name(name), clean_str('"NOTE"'), _norm_desc(desc)])
    rel_recs: list[str] = []
    edges: list[list[Any]] = []
    for r in sc.get("relationships") or []:
        if not isinstance(r, dict):
            continue
        src, tgt = _sanitize(r.get("source")), _sanitize(r.get("target"))
        if not src or not tgt:
            continue
        rtype = _sanitize(r.get("type") or "relates_to")
        desc = _sanitize(r.get("description") or "")
        desc = f"[{rtype}] {desc}".strip() if rtype else desc
        w = _strength(r.get("strength", 5))
        rel_recs.append(f'("relationship"{_TD}"{src}"{_TD}"{tgt}"{_TD}"{desc}"{_TD}{_fmt_num(w)})')
        a, b = sorted((_norm_name(src), _norm_name(tgt)))
        edges.append([a, b, _norm_desc(desc), w])
    return _Contribution(
        entity_records=_RD.join(ent_recs),
        relation_records=_RD.join(rel_recs),
        entities=entities,
        edges=edges,
    )


def summarize_descriptions(descs: list[str], max_chars: int = _SUMMARY_MAX_CHARS) -> str:
    """Deterministic stand-in for the entity-summary LLM call: unique descriptions, in order,
    joined with '; ' and cut at ``max_chars``."""
    seen: list[str] = []
    for d in descs:
        d = str(d).strip().strip('"').strip()
        if d and d not in seen:
            seen.append(d)
    out = ""
    for d in seen:
        nxt = f"{out}; {d}" if out else d
        if len(nxt) > max_chars:
            if not out:
                out = d[:max_chars]
            break
        out = nxt
    return out


# --------------------------------------------------------------------------------------------
# passthrough LLM


class PassthroughLLM:
    """The fake model nano-graphrag talks to.  No prompt ever leaves the process."""

    def __init__(self) -> None:
        self.records: dict[str, str] = {}  # chunk key -> records text (set per batch)
        self.calls: Counter[str] = Counter()

    async def __call__(
        self,
        prompt: str,
        system_prompt: str | None = None,
        history_messages: list | None = None,
        **kwargs: Any,
    ) -> str:
        return self.answer(prompt, system_prompt)

    def answer(self, prompt: str, system_prompt: str | None = None) -> str:
        prompt = prompt or ""
        if prompt.startswith(_P_EXTRACT):
            self.calls["extract"] += 1
            return self._extraction(prompt)
        if prompt.startswith(_P_REPORT):
            self.calls["report"] += 1
            return json.dumps(_community_report(prompt))
        if prompt.startswith(_P_SUMMARY):
            self.calls["summary"] += 1
            return _entity_summary(prompt)
        if system_prompt and system_prompt.startswith(_P_GLOBAL_MAP):
            self.calls["global_map"] += 1
            return json.dumps({"points": []})
        if prompt.startswith(_P_CONTINUE):
            self.calls["glean"] += 1
            return _CD
        if prompt.startswith(_P_IFLOOP):
            self.calls["glean"] += 1
            return "NO"
        self.calls["other"] += 1
        return "No additional information available."

    def _extraction(self, prompt: str) -> str:
        tail = prompt.rsplit("-Real Data-", 1)[-1]
        found = _MARKER_RE.findall(tail)
        if found and found[-1] in self.records:
            body = self.records[found[-1]]
            return f"{body}{_CD}" if body else _CD
        # Text we were not told about (e.g. someone calling GraphRAG.insert directly): a
        # placeholder entity unique to that text, never another note's sidecar.
        m = re.search(r"Text: (.*)\n#+\nOutput:", tail, re.S)
        text = m.group(1) if m else tail
        h = hashlib.md5(text.encode()).hexdigest()[:12]
        log.warning("extraction prompt for an unregistered chunk; placeholder entity %s", h)
        return f'("entity"{_TD}"unattributed {h}"{_TD}"note"{_TD}"text without a sidecar"){_CD}'


def _csv_section(prompt: str, header: str) -> list[list[str]]:
    m = re.search(rf"-----{header}-----\s*```csv\n(.*?)```", prompt, re.S)
    if not m:
        return []
    rows = []
    for line in m.group(1).splitlines()[1:]:
        cells = [c.strip().strip('"') for c in line.split(",\t")]
        if len(cells) >= 4:
            rows.append(cells)
    return rows


def _community_report(prompt: str) -> dict:
    body = prompt.rsplit("# Real Data", 1)[-1]
    ents = _csv_section(body, "Entities")
    names = [r[1] for r in ents if r[1]]
    title = ", ".join(names[:3]) or "Community"
    summary = summarize_descriptions([f"{r[1]}: {r[3]}" for r in ents], max_chars=1000)
    findings = [{"summary": r[1], "explanation": r[3][:300]} for r in ents[:5]]
    return {
        "title": title,
        "summary": summary or title,
        "rating": float(min(10, max(1, len(ents)))),
        "rating_explanation": "Number of entities in the community (no model at index time).",
        "findings": findings,
    }


def _entity_summary(prompt: str) -> str:
    m = re.search(r"Description List: (.*)\n#######", prompt, re.S)
    raw = m.group(1) if m else ""
    descs: list[str]
    try:
        import ast

        val = ast.literal_eval(raw)
        descs = [str(x) for x in val] if isinstance(val, list | tuple) else [str(val)]
    except Exception:
        descs = raw.split(GRAPH_FIELD_SEP)
    return summarize_descriptions(descs)


# --------------------------------------------------------------------------------------------
# sync wrapper


def _run(coro_factory):
    """Run a coroutine to completion from sync code, in any thread, loop or no loop."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro_factory())
    with concurrent.futures.ThreadPoolExecutor(1) as ex:
        return ex.submit(lambda: asyncio.run(coro_factory())).result()


def _fingerprint(doc: IndexDoc) -> str:
    h = hashlib.sha256()
    h.update(doc.text.strip().encode())
    h.update(b"\0")
    h.update(json.dumps(doc.sidecar or {}, sort_keys=True, default=str).encode())
    return h.hexdigest()


# --------------------------------------------------------------------------------------------
# manifest views over the SQLite tables


class _Docs(JsonTableView):
    """note id -> manifest entry (``key``, ``fp``, ``chunks``, ``entities``, ``edges``)."""

    def __init__(self, db: IndexDB) -> None:
        super().__init__(db, "docs", "id", "entry")

    def put(self, doc_id: str, entry: dict) -> None:
        self._db.execute(
            "INSERT INTO docs VALUES (?, ?) ON CONFLICT(id) DO UPDATE SET entry = excluded.entry",
            (doc_id, json.dumps(entry, ensure_ascii=False)),
        )

    def delete(self, ids: list[str]) -> None:
        self._db.executemany("DELETE FROM docs WHERE id = ?", [(i,) for i in ids])

    def fingerprints(self, ids: list[str]) -> dict[str, str]:
        rows = self._db.execute(
            "SELECT d.id, json_extract(d.entry, '$.fp') FROM json_each(?) j "
            "JOIN docs d ON d.id = j.value",
            (json.dumps(ids),),
        ).fetchall()
        return dict(rows)


class _ChunkDocs(Mapping):
    """chunk key -> note id.  Point reads go to SQLite; queries load the whole map once
    (:meth:`load`) and it is then kept in sync on writes."""

    def __init__(self, db: IndexDB) -> None:
        self._db = db
        self._view = JsonTableView(db, "chunk_doc", "chunk", "doc_id")
        self._cache: dict[str, str] | None = None
        db.register(self)

    def invalidate(self) -> None:
        self._cache = None

    def load(self) -> dict[str, str]:
        if self._cache is None:
            with self._db.snapshot():
                self._cache = dict(
                    self._db.execute("SELECT chunk, doc_id FROM chunk_doc ORDER BY rowid")
                )
        return self._cache

    def __getitem__(self, k: str) -> str:
        return self._cache[k] if self._cache is not None else self._view[k]

    def __contains__(self, k: object) -> bool:
        return k in self._cache if self._cache is not None else k in self._view

    def __iter__(self):
        return iter(list(self._cache if self._cache is not None else self._view))

    def __len__(self) -> int:
        return len(self._cache) if self._cache is not None else len(self._view)

    def lookup(self, chunks: list[str]) -> dict[str, str]:
        if self._cache is not None:
            return {c: self._cache[c] for c in chunks if c in self._cache}
        rows = self._db.execute(
            "SELECT c.chunk, c.doc_id FROM json_each(?) j JOIN chunk_doc c ON c.chunk = j.value",
            (json.dumps(list(chunks)),),
        ).fetchall()
        return dict(rows)

    def put(self, pairs: dict[str, str]) -> None:
        self._db.executemany(
            "INSERT INTO chunk_doc VALUES (?, ?) "
            "ON CONFLICT(chunk) DO UPDATE SET doc_id = excluded.doc_id",
            list(pairs.items()),
        )
        if self._cache is not None:
            self._cache.update(pairs)

    def delete(self, chunks) -> None:
        self._db.executemany("DELETE FROM chunk_doc WHERE chunk = ?", [(c,) for c in chunks])
        if self._cache is not None:
            for c in chunks:
                self._cache.pop(c, None)


# --------------------------------------------------------------------------------------------
# the index


class GraphIndex:
    """See the module docstring.  Thread-safe; writers are serialised across processes."""

    def __init__(
        self, workdir: Path, *, embedder=None, chunk_token_size: int = 200, chunk_overlap: int = 20
    ):
        offline_tiktoken.install()
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        if embedder is None:
            from .embeddings import get_embedder

            embedder = get_embedder()
        self.embedder = embedder
        self.chunk_token_size = int(chunk_token_size)
        self.chunk_overlap = int(chunk_overlap)
        if self.chunk_overlap >= self.chunk_token_size:
            raise ValueError("chunk_overlap must be smaller than chunk_token_size")
        self.llm = PassthroughLLM()
        self._lock = threading.RLock()
        self._gen: int | None = None
        self._saved_communities: dict | None = None
        self.communities: dict = {"built": False, "stale": False}
        with self._lock:
            self.db = IndexDB(self.workdir / DB_NAME)
            self._build_rag()
            if (self.workdir / LEGACY_MANIFEST).exists():
                with self._file_lock(fcntl.LOCK_EX):
                    if (self.workdir / LEGACY_MANIFEST).exists():
                        self._import_legacy()
            self._refresh()

    # ---------------------------------------------------------------- setup / reload

    def graphml_path(self) -> Path:
        return self.workdir / GRAPHML_NAME

    def _embedding_func(self) -> EmbeddingFunc:
        emb = self.embedder
        dim = int(getattr(emb, "embedding_dim", None) or emb.dim)
        max_tok = int(getattr(emb, "max_token_size", 256) or 256)

        async def _embed(texts: list[str]) -> np.ndarray:
            return await emb(texts)

        return EmbeddingFunc(embedding_dim=dim, max_token_size=max_tok, func=_embed)

    def _build_rag(self) -> None:
        self.rag = GraphRAG(
            working_dir=str(self.workdir),
            enable_local=True,
            enable_naive_rag=True,
            chunk_token_size=self.chunk_token_size,
            chunk_overlap_token_size=self.chunk_overlap,
            entity_extract_max_gleaning=0,
            graph_cluster_algorithm="louvain",
            embedding_func=self._embedding_func(),
            embedding_batch_num=256,
            embedding_func_max_async=1 << 30,
            best_model_func=self.llm,
            cheap_model_func=self.llm,
            best_model_max_async=1 << 30,
            cheap_model_max_async=1 << 30,
            key_string_value_json_storage_cls=SQLiteKVStorage,
            vector_db_storage_cls=SQLiteVectorStorage,
            graph_storage_cls=SQLiteGraphStorage,
            enable_llm_cache=False,
            addon_params={
                "max_cluster_levels": 3,
                "max_embed_chars": {"entities": 300, "communities": 1000},
                "reflect_db": self.db,  # shared, never deep-copied (IndexDB.__deepcopy__)
            },
        )
        self._cfg = asdict(self.rag)
        self.community_vdb = SQLiteVectorStorage(
            namespace="communities",
            global_config=self._cfg,
            embedding_func=self.rag.embedding_func,
        )
        self.docs = _Docs(self.db)
        self.chunk_to_doc = _ChunkDocs(self.db)

    def _settings(self) -> dict:
        return {
            "embed_model": getattr(self.embedder, "model_name", repr(self.embedder)),
            "embedding_dim": self.rag.embedding_func.embedding_dim,
            "chunk_token_size": self.chunk_token_size,
            "chunk_overlap": self.chunk_overlap,
        }

    def _refresh(self) -> None:
        """Pick up another process's commits: reopen a replaced database file, drop the
        read caches when the commit generation moved.  Costs a stat and one row read."""
        with self._lock:
            if self.db.replaced():
                log.info("index database in %s was replaced; reopening", self.workdir)
                self.db.open()
                self._gen = None
            gen = self.db.generation()
            if gen == self._gen:
                return
            if self._gen is not None:
                log.info("index in %s changed on disk; reloading", self.workdir)
            self.db.invalidate()
            version = self.db.meta_get("version", SCHEMA_VERSION)
            if version != SCHEMA_VERSION:
                raise IndexFormatError(
                    f"index in {self.workdir} has format {version}, this version reads "
                    f"{SCHEMA_VERSION}: rebuild it (reindex --force)"
                )
            settings = self.db.meta_get("settings") or {}
            dim = self.rag.embedding_func.embedding_dim
            if settings.get("embedding_dim") and settings["embedding_dim"] != dim:
                raise ValueError(
                    f"index in {self.workdir} was built with {settings['embedding_dim']}-d "
                    f"embeddings ({settings.get('embed_model')}); this embedder gives "
                    f"{dim}-d: rebuild the index (reindex --force)"
                )
            self.communities = self.db.meta_get("communities") or {
                "built": False,
                "stale": False,
            }
            self._saved_communities = json.loads(json.dumps(self.communities))
            self._gen = gen

    def _maybe_reload(self) -> None:
        self._refresh()

    @contextlib.contextmanager
    def _file_lock(self, kind: int):
        fd = os.open(self.workdir / LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, kind)
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)

    @contextlib.contextmanager
    def _write_lock(self, *, export: str | None = "missing"):
        """One SQLite transaction per write: it is the commit point.  On any error the
        transaction is rolled back and the read caches dropped (the database holds the last
        commit).  After a commit the GraphML export is refreshed (``export="always"``) or
        written if it is missing (``"missing"``)."""
        with self._lock, self._file_lock(fcntl.LOCK_EX):
            self._refresh()
            db = self.db
            before = db.total_changes()
            db.begin()
            try:
                yield
                if db.total_changes() != before or self.communities != self._saved_communities:
                    self._gen = (self._gen or 0) + 1
                    db.meta_set("version", SCHEMA_VERSION)
                    db.meta_set("settings", self._settings())
                    db.meta_set("communities", self.communities)
                    db.meta_set("generation", self._gen)
                db.commit()
                self._saved_communities = json.loads(json.dumps(self.communities))
            except BaseException:
                db.rollback()
                self._gen = None
                self._refresh()
                raise
            if export == "always" or (export == "missing" and not self.graphml_path().exists()):
                self._export_graphml(only_if_nonempty=export == "missing")

    def _export_graphml(self, *, only_if_nonempty: bool = False) -> None:
        gs = self.rag.chunk_entity_relation_graph
        if only_if_nonempty and gs.number_of_nodes() == 0:
            return
        try:
            gs.export_graphml(self.graphml_path())
        except OSError as exc:  # the commit stands; the export is derived data
            log.warning("could not write %s: %s", self.graphml_path(), exc)

    def _import_legacy(self) -> None:
        """One-time migration of a whole-file (format 1) workdir into the database.

        Reads the manifest, JSON KV stores, nano-vectordb files and the GraphML graph, writes
        them in one transaction, then deletes the old files (the GraphML stays: it is the
        export).  Unreadable old files raise :class:`IndexFormatError` naming the fix."""
        import base64

        wd = self.workdir
        db = self.db
        if not db.is_empty():  # already migrated; the old files are leftovers
            self._remove_legacy_files()
            return
        try:
            manifest = json.loads((wd / LEGACY_MANIFEST).read_text(encoding="utf-8"))

            def kv(ns: str) -> dict:
                p = wd / f"kv_store_{ns}.json"
                return json.loads(p.read_text(encoding="utf-8")) if p.exists() else {}

            def vdb(ns: str) -> list[tuple[str, bytes, str]]:
                p = wd / f"vdb_{ns}.json"
                if not p.exists():
                    return []
                d = json.loads(p.read_text(encoding="utf-8"))
                m = np.frombuffer(base64.b64decode(d["matrix"]), dtype=np.float32)
                m = m.reshape(-1, int(d["embedding_dim"]))
                m = (m / np.linalg.norm(m, axis=-1, keepdims=True)).astype(np.float32)
                return [
                    (
                        row["__id__"],
                        m[i].tobytes(),
                        json.dumps({k: v for k, v in row.items() if k != "__id__"}),
                    )
                    for i, row in enumerate(d["data"])
                ]

            g = nx.read_graphml(self.graphml_path()) if self.graphml_path().exists() else nx.Graph()
            stores = {ns: kv(ns) for ns in ("full_docs", "text_chunks", "community_reports")}
            vectors = {ns: vdb(ns) for ns in ("chunks", "entities", "communities")}
            docs = manifest.get("docs") or {}
        except Exception as exc:
            raise IndexFormatError(
                f"{wd} holds an old-format (whole-file JSON/GraphML) index that cannot be "
                f"migrated ({type(exc).__name__}: {exc}); rebuild it: reflect-jobs reindex --force"
            ) from exc
        log.warning("migrating the old-format index in %s to %s", wd, DB_NAME)
        dumps = lambda v: json.dumps(v, ensure_ascii=False)  # noqa: E731
        db.begin()
        try:
            db.wipe()
            db.executemany(
                "INSERT INTO docs VALUES (?, ?)", [(i, dumps(e)) for i, e in docs.items()]
            )
            db.executemany(
                "INSERT OR REPLACE INTO chunk_doc VALUES (?, ?)",
                [(ck, i) for i, e in docs.items() for ck in e.get("chunks", [])],
            )
            for ns, data in stores.items():
                db.executemany(
                    "INSERT INTO kv VALUES (?, ?, ?)", [(ns, k, dumps(v)) for k, v in data.items()]
                )
            for ns, rows in vectors.items():
                db.executemany("INSERT INTO vectors VALUES (?, ?, ?, ?)", [(ns, *r) for r in rows])
            db.executemany(
                "INSERT INTO nodes VALUES (?, ?)", [(n, dumps(d)) for n, d in g.nodes(data=True)]
            )
            db.executemany(
                "INSERT OR REPLACE INTO edges VALUES (?, ?, ?)",
                [(*sorted((a, b)), dumps(d)) for a, b, d in g.edges(data=True)],
            )
            db.meta_set("version", SCHEMA_VERSION)
            db.meta_set("settings", manifest.get("settings") or self._settings())
            db.meta_set("communities", manifest.get("communities") or {"built": False})
            db.meta_set("generation", 1)
            db.commit()
        except BaseException:
            db.rollback()
            raise
        self._remove_legacy_files()

    def _remove_legacy_files(self) -> None:
        for p in self.workdir.iterdir():
            if p.is_file() and (
                p.name == LEGACY_MANIFEST
                or (p.name.startswith(("kv_store_", "vdb_")) and p.name.endswith(".json"))
            ):
                with contextlib.suppress(OSError):
                    p.unlink()

    # ---------------------------------------------------------------- public API

    def doc_ids(self) -> set[str]:
        with self._lock:
            self._maybe_reload()
            return set(self.docs)

    @property
    def communities_stale(self) -> bool:
        """True when notes changed since the last :meth:`rebuild_communities`."""
        with self._lock:
            self._maybe_reload()
        return bool(self.communities.get("stale")) or not self.communities.get("built")

    def upsert(self, docs: list[IndexDoc]) -> None:
        """Insert new or changed notes as one batch; unchanged notes are skipped."""
        with self._write_lock():
            _run(lambda: self._aupsert(list(docs)))

    def remove(self, ids: list[str]) -> None:
        with self._write_lock():
            _run(lambda: self._aremove_and_mark(list(ids)))

    def rebuild_communities(self) -> None:
        """Cluster, regenerate every community report, and refresh the GraphML export."""
        with self._write_lock(export="always"):
            _run(self._arebuild_communities)

    def export_graphml(self) -> Path:
        """Write the current graph to :meth:`graphml_path` (O(graph)); returns the path."""
        with self._lock, self._file_lock(fcntl.LOCK_SH):
            self._maybe_reload()
            self.rag.chunk_entity_relation_graph.export_graphml(self.graphml_path())
        return self.graphml_path()

    def clear(self) -> None:
        """Delete everything in this index (for ``reindex --force``)."""
        with self._write_lock(export=None):
            self.db.wipe()
            self.db.invalidate()
            self.communities = {"built": False, "stale": False}
            for p in self.workdir.iterdir():
                if p.is_file() and p.name.startswith(("kv_store_", "vdb_", "graph_")):
                    p.unlink()
            self._remove_legacy_files()

    def query(self, text: str, *, mode: str = "naive", k: int = 10) -> list[tuple[str, float]]:
        if mode not in ("naive", "local", "global"):
            raise ValueError(f"unknown mode {mode!r}")
        if k <= 0 or not text or not text.strip():
            return []
        with self._lock:
            self._maybe_reload()
            if not self.docs:
                return []
            vec = self._embed_query(text)
            self.chunk_to_doc.load()
            if mode == "naive":
                scores = self._naive_scores(vec, k)
            elif mode == "local":
                scores = self._local_scores(vec, k)
            else:
                scores = self._global_scores(vec, k)
        ranked = sorted(scores.items(), key=lambda kv: (-kv[1], kv[0]))
        return [(d, float(s)) for d, s in ranked[:k]]

    # ---------------------------------------------------------------- insert

    def _chunk(self, items: list[tuple[str, str]]) -> list[dict]:
        """[(doc key, text)] -> chunk dicts with our doc-scoped keys."""
        import tiktoken

        enc = tiktoken.encoding_for_model(self.rag.tiktoken_model_name)
        tokens = enc.encode_batch([t for _, t in items], num_threads=4)
        out = self.rag.chunk_func(
            tokens,
            doc_keys=[k for k, _ in items],
            tiktoken_model=enc,
            overlap_token_size=self.chunk_overlap,
            max_token_size=self.chunk_token_size,
        )
        return [c for c in out if c["content"]]

    async def _aupsert(self, docs: list[IndexDoc]) -> None:
        latest: dict[str, IndexDoc] = {}
        for d in docs:
            if not isinstance(d.id, str) or not d.id:
                raise ValueError(f"bad doc id {d.id!r}")
            latest[d.id] = d
        fps = {i: _fingerprint(d) for i, d in latest.items()}
        known = self.docs.fingerprints(list(latest))
        todo = [d for i, d in latest.items() if known.get(i) != fps[i]]
        if not todo:
            return
        contribs = {d.id: sidecar_contribution(d) for d in todo}
        replaced = [d.id for d in todo if d.id in known]
        if replaced:
            # nodes the new versions mention are re-embedded by the insert below
            again = {e[0] for c in contribs.values() for e in c.entities}
            await self._aremove(replaced, skip_reembed=again)

        rag = self.rag
        items = []
        new_docs: dict[str, dict] = {}
        for d in todo:
            key = compute_mdhash_id(d.id, prefix="doc-")
            content = d.text.strip() or d.id
            new_docs[key] = {"content": content, "doc_id": d.id}
            items.append((key, content))
        key_to_doc = {compute_mdhash_id(d.id, prefix="doc-"): d for d in todo}

        chunks: dict[str, dict] = {}
        per_doc_chunks: dict[str, list[str]] = defaultdict(list)
        for c in self._chunk(items):
            doc = key_to_doc[c["full_doc_id"]]
            ck = compute_mdhash_id(c["full_doc_id"] + "\n" + c["content"], prefix="chunk-")
            if ck in chunks:
                continue
            chunks[ck] = {**c, "doc_id": doc.id}
            per_doc_chunks[doc.id].append(ck)

        records: dict[str, str] = {}
        for did, cks in per_doc_chunks.items():
            con = contribs[did]
            for n, ck in enumerate(cks):
                parts = [con.entity_records] + ([con.relation_records] if n == 0 else [])
                records[ck] = _RD.join(p for p in parts if p)

        await rag.chunks_vdb.upsert({ck: {"content": c["content"]} for ck, c in chunks.items()})
        self.llm.records = records
        try:
            extraction_input = {
                ck: {**c, "content": _MARKER.format(ck)} for ck, c in chunks.items()
            }
            await extract_entities(
                extraction_input,
                knwoledge_graph_inst=rag.chunk_entity_relation_graph,
                entity_vdb=rag.entities_vdb,
                global_config=self._cfg,
            )
        finally:
            self.llm.records = {}
        await rag.full_docs.upsert(new_docs)
        await rag.text_chunks.upsert(chunks)

        for d in todo:
            con = contribs[d.id]
            self.docs.put(
                d.id,
                {
                    "key": compute_mdhash_id(d.id, prefix="doc-"),
                    "fp": fps[d.id],
                    "chunks": per_doc_chunks.get(d.id, []),
                    "entities": con.entities,
                    "edges": con.edges,
                },
            )
        self.chunk_to_doc.put({ck: c["doc_id"] for ck, c in chunks.items()})
        if self.communities.get("built"):
            self.communities["stale"] = True

    # ---------------------------------------------------------------- remove

    async def _aremove_and_mark(self, ids: list[str]) -> None:
        if await self._aremove(ids) and self.communities.get("built"):
            self.communities["stale"] = True

    async def _aremove(self, ids: list[str], skip_reembed: set[str] = frozenset()) -> bool:
        rag = self.rag
        gs = rag.chunk_entity_relation_graph
        entries: dict[str, dict] = {}
        for i in dict.fromkeys(ids):
            e = self.docs.get(i)
            if e is not None:
                entries[i] = e
        if not entries:
            return False
        self.docs.delete(list(entries))
        removed_chunks: set[str] = set()
        touched_nodes: set[str] = set()
        touched_edges: set[tuple[str, str]] = set()
        for e in entries.values():
            removed_chunks.update(e["chunks"])
            touched_nodes.update(x[0] for x in e["entities"])
            for a, b, *_ in e["edges"]:
                touched_nodes.update((a, b))
                touched_edges.add((a, b))
        self.chunk_to_doc.delete(removed_chunks)
        rag.text_chunks.delete(removed_chunks)
        rag.full_docs.delete([e["key"] for e in entries.values()])
        rag.chunks_vdb.delete(list(removed_chunks))

        def remaining_sources(src: str) -> list[str]:
            return [s for s in src.split(GRAPH_FIELD_SEP) if s and s not in removed_chunks]

        # edges first (their recomputation reads the surviving docs)
        for a, b in sorted(touched_edges):
            data = gs.edge_data(a, b)
            if data is None:
                continue
            srcs = remaining_sources(data.get("source_id", ""))
            if not srcs:
                gs.remove_edge(a, b)
                continue
            descs, weight = [], 0.0
            for did in self._docs_of_chunks(srcs):
                for ea, eb, desc, w in self.docs[did]["edges"]:
                    if (ea, eb) == (a, b):
                        descs.append(desc)
                        weight += float(w)
            data["source_id"] = GRAPH_FIELD_SEP.join(srcs)
            if descs:
                data["description"] = self._merge_desc(descs)
                data["weight"] = weight
            gs.put_edge(a, b, data)
        dead_entities: list[str] = []
        refresh: dict[str, dict] = {}
        for n in sorted(touched_nodes):
            data = gs.node_data(n)
            if data is None:
                continue
            srcs = remaining_sources(data.get("source_id", ""))
            if not srcs:
                gs.remove_node(n)
                dead_entities.append(n)
                continue
            types, descs, edge_descs = [], [], []
            for did in self._docs_of_chunks(srcs):
                doc = self.docs[did]
                for name, etype, desc in doc["entities"]:
                    if name == n:
                        types.append(etype)
                        descs.append(desc)
                for ea, eb, desc, _w in doc["edges"]:
                    if n in (ea, eb):
                        edge_descs.append(desc)
            data["source_id"] = GRAPH_FIELD_SEP.join(srcs)
            if descs:
                data["entity_type"] = sorted(Counter(types).items(), key=lambda x: (-x[1], x[0]))[
                    0
                ][0]
                data["description"] = self._merge_desc(descs)
            elif edge_descs:  # only created implicitly by relationships now
                data["entity_type"] = '"UNKNOWN"'
                data["description"] = self._merge_desc(edge_descs)
            gs.put_node(n, data)
            if n not in skip_reembed:
                refresh[n] = data
        if dead_entities:
            rag.entities_vdb.delete([compute_mdhash_id(n, prefix="ent-") for n in dead_entities])
        if refresh:
            await rag.entities_vdb.upsert(
                {
                    compute_mdhash_id(n, prefix="ent-"): {
                        "content": n + d.get("description", ""),
                        "entity_name": n,
                    }
                    for n, d in refresh.items()
                }
            )
        return True

    def _docs_of_chunks(self, chunk_keys) -> list[str]:
        found = self.chunk_to_doc.lookup(list(chunk_keys))
        out: dict[str, None] = {}
        for ck in chunk_keys:
            d = found.get(ck)
            if d is not None:
                out[d] = None
        return list(out)

    def _merge_desc(self, descs: list[str]) -> str:
        merged = GRAPH_FIELD_SEP.join(sorted(set(descs)))
        limit = int(self._cfg["entity_summary_to_max_tokens"])
        if len(merged) > limit and len(encode_string_by_tiktoken(merged)) >= limit:
            return summarize_descriptions(sorted(set(descs)))
        return merged

    # ---------------------------------------------------------------- communities

    async def _arebuild_communities(self) -> None:
        rag = self.rag
        storage = rag.chunk_entity_relation_graph
        await storage.clustering("louvain")
        await rag.community_reports.drop()
        before = self.llm.calls["report"]
        await generate_community_report(rag.community_reports, storage, self._cfg)
        reports = rag.community_reports._data.items()
        self.community_vdb.clear()
        if reports:
            await self.community_vdb.upsert(
                {f"community-{k}": {"content": v.get("report_string", "")} for k, v in reports}
            )
        self.communities = {
            "built": True,
            "stale": False,
            "count": len(reports),
            "report_calls": self.llm.calls["report"] - before,
        }

    # ---------------------------------------------------------------- query internals

    def _embed_query(self, text: str) -> np.ndarray:
        emb = self.embedder
        v = emb.embed([text]) if hasattr(emb, "embed") else _run(lambda: emb([text]))
        return np.asarray(v, dtype=np.float32)[0]

    def _naive_scores(self, vec: np.ndarray, k: int) -> dict[str, float]:
        scores: dict[str, float] = {}
        top = max(4 * k, 20)
        c2d = self.chunk_to_doc.load()
        for ck, sim, _ in self.rag.chunks_vdb.query_vector(vec, top):
            d = c2d.get(ck)
            if d is not None and sim > scores.get(d, -1.0):
                scores[d] = sim
        return scores

    def _local_scores(self, vec: np.ndarray, k: int) -> dict[str, float]:
        """Entity vectors -> the notes those entities come from, plus (at half weight) the notes
        of their one-hop graph neighbours.  An entity shared by many notes counts for less."""
        gs = self.rag.chunk_entity_relation_graph
        c2d = self.chunk_to_doc.load()
        memo: dict[str, list[str]] = {}

        def node_docs(node: str) -> list[str]:
            if node not in memo:
                data = gs.node_data(node)
                out: dict[str, None] = {}
                for ck in (data or {}).get("source_id", "").split(GRAPH_FIELD_SEP):
                    d = c2d.get(ck)
                    if d is not None:
                        out[d] = None
                memo[node] = list(out)
            return memo[node]

        direct: dict[str, float] = defaultdict(float)
        hood: dict[str, float] = defaultdict(float)
        hits = self.rag.entities_vdb.query_vector(vec, max(2 * k, 20))
        for rank, (_id, sim, meta) in enumerate(hits):
            name = meta.get("entity_name")
            if not name:
                continue
            docs = node_docs(name)
            if not docs:
                continue
            w = sim / (1.0 + math.log(len(docs)))
            for d in docs:
                direct[d] += w
            if rank >= 10:
                continue
            # heaviest 25 neighbours; ties by name (independent of storage order)
            nbrs = [
                nb
                for nb, _ in sorted(
                    gs.neighbours(name), key=lambda x: (-float(x[1].get("weight", 1.0)), x[0])
                )[:25]
            ]
            for nb in nbrs:
                nd = node_docs(nb)
                if not nd:
                    continue
                wn = 0.5 * sim / (1.0 + math.log(len(nd)))
                for d in nd:
                    hood[d] = max(hood[d], wn)
        out = dict(direct)
        for d, s in hood.items():
            out[d] = out.get(d, 0.0) + s
        return out

    def _global_scores(self, vec: np.ndarray, k: int) -> dict[str, float]:
        """Community reports (if built) -> their notes; padded/fallen back with local."""
        local = self._local_scores(vec, k)
        reports = self.rag.community_reports.cached()
        if not reports or len(self.community_vdb) == 0:
            return local
        scores: dict[str, float] = {}
        for cid, sim, _ in self.community_vdb.query_vector(vec, 5):
            rep = reports.get(cid.removeprefix("community-"))
            if not rep:
                continue
            for d in self._docs_of_chunks(rep.get("chunk_ids", [])):
                # community similarity first, local relevance breaks ties inside a community
                s = sim + 0.01 * local.get(d, 0.0)
                if s > scores.get(d, -1.0):
                    scores[d] = s
        if len(scores) < k and local:
            # pad with local results, ranked below every community hit
            floor = min(scores.values(), default=1.0)
            top_local = max(local.values()) or 1.0
            for d, s in local.items():
                if d not in scores:
                    scores[d] = 0.5 * floor * (s / top_local)
        return scores
