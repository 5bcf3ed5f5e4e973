"""Graph + vector index over KB notes, built on nano-graphrag, fully offline.

What nano-graphrag gives us: its storages (JSON KV stores, nano-vectordb vector stores, the
NetworkX graph persisted as GraphML), its chunker, its entity-extraction parser/merger
(``extract_entities``) and its community-report generator.  What we do NOT use is
``GraphRAG.ainsert``: it keys documents by content hash (a changed note becomes a second doc,
SPEC B13), only extracts entities for *new* content (so a queue of sidecars handed out in
corpus order lands on the wrong notes, B13), drops and regenerates every community report and
re-clusters the whole graph on every insert (B14), and has no delete.  Instead
:class:`GraphIndex` runs its own insert/remove pipeline over the same storages:

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
* A manifest (``reflect_index_manifest.json``) maps note id -> doc key, chunk keys, a
  fingerprint of text+sidecar, and the note's normalised entity/relationship contributions, so
  ``remove()`` can delete chunks and vectors, strip the note's chunk ids from node/edge
  ``source_id``, drop nodes/edges left with no source, and recompute the descriptions, types and
  weights of shared nodes/edges from the notes that remain (and re-embed those entities).
* Clustering and community reports are deferred to :meth:`GraphIndex.rebuild_communities`
  (louvain via networkx; no graspologic).  Upserts never cluster and make no report calls.
* Every file is written atomically (tmp + ``os.replace``); the manifest is written last and is
  the commit point.  Writers are serialised by a thread lock and an ``flock`` on
  ``workdir/.index.lock``; an instance reloads its in-memory state when another process has
  committed since (checked by a ``stat`` of the manifest before every call).

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
import tempfile
import threading
from collections import Counter, defaultdict
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
from nano_graphrag._storage import (  # noqa: E402
    JsonKVStorage,
    NanoVectorDBStorage,
    NetworkXStorage,
)
from nano_graphrag._utils import (  # noqa: E402
    EmbeddingFunc,
    clean_str,
    compute_mdhash_id,
    encode_string_by_tiktoken,
)
from nano_graphrag.graphrag import GraphRAG  # noqa: E402
from nano_graphrag.prompt import GRAPH_FIELD_SEP, PROMPTS  # noqa: E402
from nano_vectordb import NanoVectorDB  # noqa: E402

log = logging.getLogger("reflect_jobs.index.graph")

# nano-graphrag prints progress tickers to stdout; the CLI prints JSON there.  Silence them
# for this module only (thread-safe, unlike swapping sys.stdout).
_ng_op.print = lambda *a, **k: None  # type: ignore[attr-defined]
for _name in ("nano-graphrag", "nano-vectordb"):
    logging.getLogger(_name).setLevel(logging.WARNING)

GRAPHML_NAME = "graph_chunk_entity_relation.graphml"
MANIFEST_NAME = "reflect_index_manifest.json"
COMMUNITY_VDB_NAME = "vdb_communities.json"
LOCK_NAME = ".index.lock"
MANIFEST_VERSION = 1

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
# storages: atomic writes, deletes, deferred graspologic-free clustering


def _atomic_write_text(path: str, text: str) -> None:
    d = os.path.dirname(path) or "."
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=d)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


@dataclass
class ReflectKVStorage(JsonKVStorage):
    async def index_done_callback(self):
        _atomic_write_text(self._file_name, json.dumps(self._data, ensure_ascii=False))

    def delete(self, ids) -> None:
        for i in ids:
            self._data.pop(i, None)


@dataclass
class ReflectVectorStorage(NanoVectorDBStorage):
    """nano-vectordb storage with delete, sync query, atomic save.  ``max_content_chars``
    (from ``addon_params['max_embed_chars'][namespace]``) caps the text embedded per vector:
    an entity's vector is ``name + description`` and descriptions merged from many notes get
    long, which only costs embedding time (the model truncates at 256 word pieces anyway)."""

    async def upsert(self, data: dict[str, dict]):
        cap = (self.global_config.get("addon_params", {}).get("max_embed_chars") or {}).get(
            self.namespace
        )
        if cap:
            data = {k: {**v, "content": v["content"][:cap]} for k, v in data.items()}
        return await super().upsert(data)

    def delete(self, ids: list[str]) -> None:
        if ids:
            self._client.delete(list(ids))

    def clear(self) -> None:
        missing = self._client_file_name + f".{os.getpid()}.{threading.get_ident()}.empty"
        self._client = NanoVectorDB(self.embedding_func.embedding_dim, storage_file=missing)
        self._client.storage_file = self._client_file_name

    def query_vector(self, vec: np.ndarray, top_k: int) -> list[tuple[str, float, dict]]:
        if len(self._client) == 0:
            return []
        res = self._client.query(
            query=vec, top_k=top_k, better_than_threshold=self.cosine_better_than_threshold
        )
        return [(d["__id__"], float(d["__metrics__"]), d) for d in res]

    def __len__(self) -> int:
        return len(self._client)

    async def index_done_callback(self):
        # NanoVectorDB.save() writes in place; write to a temp name and rename instead.
        final = self._client_file_name
        d = os.path.dirname(final) or "."
        fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=d)
        os.close(fd)
        try:
            self._client.storage_file = tmp
            self._client.save()
            os.replace(tmp, final)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
        finally:
            self._client.storage_file = final


@dataclass
class ReflectGraphStorage(NetworkXStorage):
    """NetworkX storage whose clustering is louvain (networkx) instead of graspologic's leiden,
    written atomically.  Clustering only runs when :meth:`GraphIndex.rebuild_communities`
    asks for it."""

    def __post_init__(self):
        super().__post_init__()
        self._clustering_algorithms["louvain"] = self._louvain_clustering
        self._clustering_algorithms["leiden"] = self._louvain_clustering

    @property
    def graph(self) -> nx.Graph:
        return self._graph

    async def index_done_callback(self):
        d = os.path.dirname(self._graphml_xml_file) or "."
        fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=".graphml", dir=d)
        os.close(fd)
        try:
            nx.write_graphml(self._graph, tmp)
            os.replace(tmp, self._graphml_xml_file)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise

    async def _louvain_clustering(self):
        g = self._graph
        for _, data in g.nodes(data=True):
            data.pop("clusters", None)
        if g.number_of_nodes() == 0:
            return
        seed = int(self.global_config.get("graph_cluster_seed", 0)) % (2**32)
        max_levels = int(self.global_config.get("addon_params", {}).get("max_cluster_levels", 3))
        # louvain_partitions yields finest -> coarsest; nano-graphrag's level 0 is the coarsest.
        parts = [list(p) for p in nx.community.louvain_partitions(g, weight="weight", seed=seed)]
        if not parts:
            parts = [[{n} for n in g.nodes]]
        levels = list(reversed(parts))[:max_levels]
        assign: dict[str, list[dict]] = defaultdict(list)
        next_id = 0
        parent_of: dict[str, frozenset] = {}
        for level, partition in enumerate(levels):
            this_of: dict[str, frozenset] = {}
            for comm in sorted(partition, key=lambda c: (-len(c), min(c))):
                fz = frozenset(comm)
                for n in comm:
                    this_of[n] = fz
                if len(comm) < 2:
                    continue  # singletons make no useful report
                if level > 0 and parent_of.get(next(iter(comm))) == fz:
                    continue  # unchanged from the level above: no duplicate report
                for n in comm:
                    assign[n].append({"level": level, "cluster": next_id})
                next_id += 1
            parent_of = this_of
        for n, cl in assign.items():
            g.nodes[n]["clusters"] = json.dumps(cl)


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
        self._sig: tuple | None = None
        with self._file_lock(fcntl.LOCK_SH):
            self._load()

    # ---------------------------------------------------------------- loading / persistence

    @property
    def _manifest_path(self) -> Path:
        return self.workdir / MANIFEST_NAME

    def graphml_path(self) -> Path:
        return self.workdir / GRAPHML_NAME

    def _embedding_func(self) -> EmbeddingFunc:
        emb = self.embedder
        dim = int(getattr(emb, "embedding_dim", None) or emb.dim)
        max_tok = int(getattr(emb, "max_token_size", 256) or 256)

        async def _embed(texts: list[str]) -> np.ndarray:
            return await emb(texts)

        return EmbeddingFunc(embedding_dim=dim, max_token_size=max_tok, func=_embed)

    def _manifest_sig(self) -> tuple | None:
        try:
            st = os.stat(self._manifest_path)
        except FileNotFoundError:
            return None
        return (st.st_ino, st.st_mtime_ns, st.st_size)

    def _load(self) -> None:
        with self._lock:
            sig = self._manifest_sig()
            manifest: dict = {}
            if sig is not None:
                manifest = json.loads(self._manifest_path.read_text(encoding="utf-8"))
            ef = self._embedding_func()
            settings = manifest.get("settings") or {}
            if settings.get("embedding_dim") and settings["embedding_dim"] != ef.embedding_dim:
                raise ValueError(
                    f"index in {self.workdir} was built with {settings['embedding_dim']}-d "
                    f"embeddings ({settings.get('embed_model')}); this embedder gives "
                    f"{ef.embedding_dim}-d: rebuild the index (reindex --force)"
                )
            self.rag = GraphRAG(
                working_dir=str(self.workdir),
                enable_local=True,
                enable_naive_rag=True,
                chunk_token_size=self.chunk_token_size,
                chunk_overlap_token_size=self.chunk_overlap,
                entity_extract_max_gleaning=0,
                graph_cluster_algorithm="louvain",
                embedding_func=ef,
                embedding_batch_num=256,
                embedding_func_max_async=1 << 30,
                best_model_func=self.llm,
                cheap_model_func=self.llm,
                best_model_max_async=1 << 30,
                cheap_model_max_async=1 << 30,
                key_string_value_json_storage_cls=ReflectKVStorage,
                vector_db_storage_cls=ReflectVectorStorage,
                graph_storage_cls=ReflectGraphStorage,
                enable_llm_cache=False,
                addon_params={
                    "max_cluster_levels": 3,
                    "max_embed_chars": {"entities": 300, "communities": 1000},
                },
            )
            self._cfg = asdict(self.rag)
            self.community_vdb = ReflectVectorStorage(
                namespace="communities",
                global_config=self._cfg,
                embedding_func=self.rag.embedding_func,
            )
            self.docs: dict[str, dict] = manifest.get("docs") or {}
            self.communities: dict = manifest.get("communities") or {"built": False, "stale": False}
            self.chunk_to_doc: dict[str, str] = {
                ck: did for did, e in self.docs.items() for ck in e["chunks"]
            }
            self._sig = sig

    def _maybe_reload(self, *, have_write_lock: bool = False) -> None:
        if self._manifest_sig() == self._sig:
            return
        log.info("index in %s changed on disk; reloading", self.workdir)
        if have_write_lock:
            self._load()
        else:
            with self._file_lock(fcntl.LOCK_SH):  # never read a half-committed write
                self._load()

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
    def _write_lock(self):
        with self._lock, self._file_lock(fcntl.LOCK_EX):
            self._maybe_reload(have_write_lock=True)
            try:
                yield
            except BaseException:
                # drop half-applied in-memory changes; the files hold the last commit
                self._load()
                raise

    def _write_manifest(self) -> None:
        data = {
            "version": MANIFEST_VERSION,
            "settings": {
                "embed_model": getattr(self.embedder, "model_name", repr(self.embedder)),
                "embedding_dim": self.rag.embedding_func.embedding_dim,
                "chunk_token_size": self.chunk_token_size,
                "chunk_overlap": self.chunk_overlap,
            },
            "communities": self.communities,
            "docs": self.docs,
        }
        _atomic_write_text(str(self._manifest_path), json.dumps(data, ensure_ascii=False))
        self._sig = self._manifest_sig()

    async def _persist(self, *, communities: bool = False) -> None:
        r = self.rag
        stores = [
            r.full_docs,
            r.text_chunks,
            r.chunks_vdb,
            r.entities_vdb,
            r.chunk_entity_relation_graph,
        ]
        if communities:
            stores += [r.community_reports, self.community_vdb]
        for s in stores:
            await s.index_done_callback()
        self._write_manifest()  # commit point

    # ---------------------------------------------------------------- public API

    def doc_ids(self) -> set[str]:
        with self._lock:
            self._maybe_reload()
            return set(self.docs)

    @property
    def communities_stale(self) -> bool:
        """True when notes changed since the last :meth:`rebuild_communities`."""
        return bool(self.communities.get("stale")) or not self.communities.get("built")

    def upsert(self, docs: list[IndexDoc]) -> None:
        """Insert new or changed notes as one batch; unchanged notes are skipped."""
        with self._write_lock():
            _run(lambda: self._aupsert(list(docs)))

    def remove(self, ids: list[str]) -> None:
        with self._write_lock():
            _run(lambda: self._aremove_and_persist(list(ids)))

    def rebuild_communities(self) -> None:
        with self._write_lock():
            _run(self._arebuild_communities)

    def clear(self) -> None:
        """Delete every file of this index (for ``reindex --force``)."""
        with self._write_lock():
            for p in self.workdir.iterdir():
                if (
                    p.is_file()
                    and p.name != LOCK_NAME
                    and (
                        p.name.startswith(("kv_store_", "vdb_", "graph_"))
                        or p.name == MANIFEST_NAME
                    )
                ):
                    p.unlink()
            self._load()

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
        todo = [d for i, d in latest.items() if (self.docs.get(i) or {}).get("fp") != fps[i]]
        if not todo:
            return
        contribs = {d.id: sidecar_contribution(d) for d in todo}
        replaced = [d.id for d in todo if d.id in self.docs]
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
            self.docs[d.id] = {
                "key": compute_mdhash_id(d.id, prefix="doc-"),
                "fp": fps[d.id],
                "chunks": per_doc_chunks.get(d.id, []),
                "entities": con.entities,
                "edges": con.edges,
            }
            for ck in per_doc_chunks.get(d.id, []):
                self.chunk_to_doc[ck] = d.id
        if self.communities.get("built"):
            self.communities["stale"] = True
        await self._persist()

    # ---------------------------------------------------------------- remove

    async def _aremove_and_persist(self, ids: list[str]) -> None:
        if await self._aremove(ids):
            if self.communities.get("built"):
                self.communities["stale"] = True
            await self._persist()

    async def _aremove(self, ids: list[str], skip_reembed: set[str] = frozenset()) -> bool:
        rag = self.rag
        g: nx.Graph = rag.chunk_entity_relation_graph.graph
        entries = {i: self.docs.pop(i) for i in dict.fromkeys(ids) if i in self.docs}
        if not entries:
            return False
        removed_chunks: set[str] = set()
        touched_nodes: set[str] = set()
        touched_edges: set[tuple[str, str]] = set()
        for e in entries.values():
            removed_chunks.update(e["chunks"])
            touched_nodes.update(x[0] for x in e["entities"])
            for a, b, *_ in e["edges"]:
                touched_nodes.update((a, b))
                touched_edges.add((a, b))
        for ck in removed_chunks:
            self.chunk_to_doc.pop(ck, None)
        rag.text_chunks.delete(removed_chunks)
        rag.full_docs.delete([e["key"] for e in entries.values()])
        rag.chunks_vdb.delete(list(removed_chunks))

        def remaining_sources(src: str) -> list[str]:
            return [s for s in src.split(GRAPH_FIELD_SEP) if s and s not in removed_chunks]

        # edges first (their recomputation reads the surviving docs)
        for a, b in touched_edges:
            if not g.has_edge(a, b):
                continue
            data = g.edges[a, b]
            srcs = remaining_sources(data.get("source_id", ""))
            if not srcs:
                g.remove_edge(a, b)
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
        dead_entities: list[str] = []
        refresh: dict[str, dict] = {}
        for n in touched_nodes:
            if not g.has_node(n):
                continue
            data = g.nodes[n]
            srcs = remaining_sources(data.get("source_id", ""))
            if not srcs:
                g.remove_node(n)
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
        out: dict[str, None] = {}
        for ck in chunk_keys:
            d = self.chunk_to_doc.get(ck)
            if d is not None and d in self.docs:
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
        reports = rag.community_reports._data
        self.community_vdb.clear()
        if reports:
            await self.community_vdb.upsert(
                {
                    f"community-{k}": {"content": v.get("report_string", "")}
                    for k, v in reports.items()
                }
            )
        self.communities = {
            "built": True,
            "stale": False,
            "count": len(reports),
            "report_calls": self.llm.calls["report"] - before,
        }
        await self._persist(communities=True)

    # ---------------------------------------------------------------- query internals

    def _embed_query(self, text: str) -> np.ndarray:
        emb = self.embedder
        v = emb.embed([text]) if hasattr(emb, "embed") else _run(lambda: emb([text]))
        return np.asarray(v, dtype=np.float32)[0]

    def _naive_scores(self, vec: np.ndarray, k: int) -> dict[str, float]:
        scores: dict[str, float] = {}
        top = max(4 * k, 20)
        for ck, sim, _ in self.rag.chunks_vdb.query_vector(vec, top):
            d = self.chunk_to_doc.get(ck)
            if d is not None and sim > scores.get(d, -1.0):
                scores[d] = sim
        return scores

    def _node_docs(self, node: str) -> list[str]:
        data = self.rag.chunk_entity_relation_graph.graph.nodes.get(node)
        if not data:
            return []
        return self._docs_of_chunks(data.get("source_id", "").split(GRAPH_FIELD_SEP))

    def _local_scores(self, vec: np.ndarray, k: int) -> dict[str, float]:
        """Entity vectors -> the notes those entities come from, plus (at half weight) the notes
        of their one-hop graph neighbours.  An entity shared by many notes counts for less."""
        g = self.rag.chunk_entity_relation_graph.graph
        direct: dict[str, float] = defaultdict(float)
        hood: dict[str, float] = defaultdict(float)
        hits = self.rag.entities_vdb.query_vector(vec, max(2 * k, 20))
        for rank, (_id, sim, meta) in enumerate(hits):
            name = meta.get("entity_name")
            if not name or not g.has_node(name):
                continue
            docs = self._node_docs(name)
            if not docs:
                continue
            w = sim / (1.0 + math.log(len(docs)))
            for d in docs:
                direct[d] += w
            if rank >= 10:
                continue
            nbrs = sorted(g[name], key=lambda n: -float(g[name][n].get("weight", 1.0)))[:25]
            for nb in nbrs:
                nd = self._node_docs(nb)
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
        reports = self.rag.community_reports._data
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
