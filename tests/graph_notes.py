"""The 20 test notes (with sidecars) the graph-index tests share, and small helpers.

Importing this module skips the importing test module when the vector stack
(nano-graphrag, sentence-transformers) is not installed.
"""

from __future__ import annotations

import os
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import pytest  # noqa: E402

pytest.importorskip("nano_graphrag")
pytest.importorskip("sentence_transformers")

from nano_graphrag.prompt import GRAPH_FIELD_SEP  # noqa: E402

from reflect_jobs.index.graphrag import GraphIndex, IndexDoc  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
GRAPHML = "graph_chunk_entity_relation.graphml"

NOTES = [
    (
        "pg-pool",
        "PostgreSQL connection pool exhausted",
        "Under load the service failed with 'remaining connection slots are reserved'. The pool "
        "size exceeded max_connections; lowering the pool per worker and adding pgbouncer fixed it.",
        [("PostgreSQL", "tool", "relational database"), ("pgbouncer", "tool", "connection pooler")],
        [("pgbouncer", "PostgreSQL", "pools connections to")],
    ),
    (
        "pytest-tmp",
        "Use tmp_path in pytest",
        "Tests that wrote to the repository directory collided when run in parallel. Use the "
        "tmp_path fixture so each test gets its own temporary directory.",
        [
            ("pytest", "tool", "python test runner"),
            ("tmp_path", "api", "per-test temp dir fixture"),
        ],
        [("tmp_path", "pytest", "fixture of")],
    ),
    (
        "git-rebase",
        "Interactive rebase to squash commits",
        "To clean up a feature branch before review, run git rebase -i main and mark commits as "
        "fixup; force-push with --force-with-lease rather than --force.",
        [("git", "tool", "version control"), ("force-with-lease", "flag", "safe force push")],
        [],
    ),
    (
        "docker-cache",
        "Docker layer cache busting",
        "Copying the whole source tree before pip install invalidated the layer cache on every "
        "change. Copy requirements.txt first, install, then copy the rest.",
        [("Docker", "tool", "container builds"), ("layer cache", "concept", "reused image layers")],
        [],
    ),
    (
        "redis-ttl",
        "Redis keys need a TTL",
        "Session keys were never expiring and memory grew until eviction. Always SET with EX or "
        "call EXPIRE; monitor with INFO memory.",
        [("Redis", "tool", "in-memory key value store"), ("TTL", "concept", "time to live")],
        [],
    ),
    (
        "tz-utc",
        "Store timestamps in UTC",
        "A report showed events an hour off after daylight saving changed. Store datetimes as "
        "timezone-aware UTC and convert only when displaying to the user.",
        [("UTC", "concept", "coordinated universal time"), ("datetime", "api", "python datetime")],
        [],
    ),
    (
        "k8s-oom",
        "Kubernetes pod OOMKilled",
        "The worker pod restarted repeatedly with OOMKilled. Its memory limit was below the peak of "
        "the batch job; raising the limit and streaming the input solved it.",
        [
            ("Kubernetes", "tool", "container orchestrator"),
            ("OOMKilled", "error", "out of memory kill"),
        ],
        [],
    ),
    (
        "npm-lock",
        "Commit package-lock.json",
        "CI installed different dependency versions than local machines. Commit package-lock.json "
        "and use npm ci in pipelines for reproducible installs.",
        [("npm", "tool", "node package manager"), ("package-lock.json", "file", "lockfile")],
        [],
    ),
    (
        "regex-catastrophic",
        "Catastrophic regex backtracking",
        "A validation endpoint hung on long inputs because a nested quantifier caused exponential "
        "backtracking. Rewrote the pattern without nested repetition and added an input length cap.",
        [
            ("regex", "concept", "regular expressions"),
            ("backtracking", "concept", "regex engine search"),
        ],
        [],
    ),
    (
        "ssh-agent",
        "SSH agent forwarding for deploys",
        "Deploy scripts could not pull private repos on the bastion host. Enabled ForwardAgent for "
        "that host only in ssh config instead of copying private keys.",
        [("SSH", "tool", "secure shell"), ("ForwardAgent", "setting", "agent forwarding option")],
        [],
    ),
    (
        "css-flex",
        "Centering with flexbox",
        "To center a dialog both ways, use display flex on the parent with justify-content center "
        "and align-items center; avoid absolute positioning hacks.",
        [("flexbox", "concept", "css layout model"), ("CSS", "language", "style sheets")],
        [],
    ),
    (
        "rust-borrow",
        "Rust borrow checker and mutable borrows",
        "The compiler rejected two mutable references to the vector in one scope. Split the borrow "
        "with split_at_mut or restructure so the first borrow ends before the second begins.",
        [
            ("Rust", "language", "systems language"),
            ("borrow checker", "concept", "ownership rules"),
        ],
        [],
    ),
    (
        "s3-consistency",
        "S3 listing after upload",
        "A job listed the bucket immediately after uploading and sometimes missed objects written "
        "by another region's replication. Read the object key directly instead of listing.",
        [("S3", "tool", "object storage"), ("replication", "concept", "cross region copy")],
        [],
    ),
    (
        "http-retry",
        "Retry with exponential backoff",
        "Calls to the payment API failed intermittently with 503. Added retries with exponential "
        "backoff and jitter, and made the request idempotent with an idempotency key.",
        [
            ("exponential backoff", "concept", "growing retry delay"),
            ("503", "error", "service unavailable"),
        ],
        [],
    ),
    (
        "utf8-bom",
        "UTF-8 BOM breaks CSV header",
        "The first column name of an uploaded CSV had an invisible prefix, so lookups by header "
        "failed. Open files with encoding utf-8-sig to strip the byte order mark.",
        [("BOM", "concept", "byte order mark"), ("CSV", "format", "comma separated values")],
        [],
    ),
    (
        "cron-env",
        "Cron jobs run with a minimal environment",
        "A script worked in the shell but failed from crontab because PATH lacked /usr/local/bin. "
        "Set PATH explicitly at the top of the crontab or use absolute paths.",
        [("cron", "tool", "job scheduler"), ("PATH", "setting", "executable search path")],
        [],
    ),
    (
        "sql-index",
        "Missing index on foreign key",
        "Deleting parent rows took minutes because the child table's foreign key column had no "
        "index, forcing a sequential scan per row. Adding the index made deletes instant.",
        [
            ("foreign key", "concept", "referential constraint"),
            ("index", "concept", "b-tree index"),
        ],
        [],
    ),
    (
        "asyncio-block",
        "Blocking call inside asyncio event loop",
        "Latency spiked because a synchronous requests.get ran inside an async handler and blocked "
        "the event loop. Moved it to asyncio.to_thread or use an async HTTP client.",
        [("asyncio", "library", "python async runtime"), ("event loop", "concept", "scheduler")],
        [],
    ),
    (
        "feature-flag",
        "Remove stale feature flags",
        "Old feature flags left dead branches that confused new developers. Track each flag's owner "
        "and expiry and delete the flag and its code path once fully rolled out.",
        [("feature flag", "concept", "runtime toggle")],
        [],
    ),
    (
        "log-rotation",
        "Disk full from unrotated logs",
        "The server ran out of disk because application logs were never rotated. Configured "
        "logrotate with daily rotation, compression and a retention of fourteen files.",
        [
            ("logrotate", "tool", "log rotation utility"),
            ("disk space", "concept", "storage capacity"),
        ],
        [],
    ),
]


def make_doc(nid, title, body, ents, rels) -> IndexDoc:
    return IndexDoc(
        id=nid,
        text=f"# {title}\n\n{body}\n",
        sidecar={
            "entities": [{"name": n, "type": t, "description": d} for n, t, d in ents],
            "relationships": [
                {"source": s, "target": t, "type": "relates_to", "description": d, "strength": 5}
                for s, t, d in rels
            ],
        },
    )


ALL_DOCS = [make_doc(*n) for n in NOTES]


def node_docs(gi: GraphIndex, node: str) -> set[str]:
    data = gi.rag.chunk_entity_relation_graph.graph.nodes[node]
    return {gi.chunk_to_doc.get(c, "?" + c) for c in data["source_id"].split(GRAPH_FIELD_SEP)}
