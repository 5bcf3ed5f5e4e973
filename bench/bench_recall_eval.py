"""Recall at scale: does each session get told, and find, what its task needs — and nothing else?

Run (the 2,000 scale: 7.4 CPU minutes, 20 minutes wall on the shared 2-core machine at load
8-16; the model dominates: reindex embeddings and one query embedding per non-lexical search;
figures in docs/BENCHMARKS.md)::

    HF_HUB_OFFLINE=1 .venv/bin/python bench/bench_recall_eval.py [--split dev|test|all|heldout]
        [--scale 200|2000|both] [--modes lexical,hybrid,local,global] [--json out.json]
        [--sections block,branch,compact,handoff,prompt,search] [--reuse /tmp/rt/kb]

The labelled data is ``bench/data/recall_eval/`` (``recall_eval_data.py`` loads it; how it
was made is in its ``SOURCES.md``): 10 public projects' agent-instruction files paraphrased
into repository learnings, labelled global rules, 2,000+ distractor learnings in 48 other
repositories and global, and situations — a session in a labelled repository with its first
prompt, a search query and the learnings it needs (none for 64 of them: 24 off-topic, 40
in-domain tasks no stored learning helps with). Situations are split into dev and test by
sha256 of their id: tune on dev, report test. A later ``heldout`` split
(four more projects, ``heldout_*`` files, never used to tune) is reported on its own; its
learnings are in every KB, and ``all`` stays dev + test.

For each scale (``200``: the labelled learnings and 16 distractors; ``2000``: everything) a
KB is written with ``kb.write_learning`` and indexed with ``reflect-jobs reindex`` (plus
the worker's community pass) in a temporary directory, every repository gets a fake
checkout, and then for every situation:

* **block** — the SessionStart hook (``reflect-jobs-hook claude``) for the checkout: the
  share of the expected repository / global learnings told, their line among the learnings
  told, the characters, and the lines leaked from another repository or another stack;
  and how many of the expected learnings are awake (``repo_awake``/``global_awake``: a
  dormant one — the benchmark's ages run to 299 days with no confirmation — is not told by
  strength, only when a task asks for it);
* **prompt** — the UserPromptSubmit hook with ``REFLECT_RECALL_ON_PROMPT=1``, once in a
  fresh session (hit, precision, silence when nothing is needed) and once after the block
  in the same session (what the session was told in all);
* **compact** (``--sections block,compact``) — the SessionStart hook after a compaction:
  ``source`` ``compact`` and a small transcript whose last user prompt is the situation's,
  so the block ranks the learnings that task needs first (``recall/task_query.py``);
  the same figures as **block**, to compare with the fresh start's;
* **branch** (``--sections block,branch``) — the SessionStart hook at a fresh start with the
  checkout on the situation's branch (``branches.json``: a default, an opaque or a
  descriptive name, written from the prompt): the block ranks by the branch's words
  (``recall/task_query.py``); the same figures as **block** (which runs on ``main``);
* **handoff** (``--sections block,handoff``) — the SessionStart hook at a fresh start on
  ``main`` after the previous session left an open handoff (by the ``/handoff`` skill, whose
  title is the situation's prompt: the task as the person put it), closed after the call:
  the block ranks by the handoff (``recall/task_query.py``); the same figures as **block**.
  What this measures is the route (the item read back, chosen, used as the query), with a
  handoff that names the task well: a handoff about something else steers the block wrong;
* **context** (with the prompt section) — MCP ``context`` with the situation's query as its
  ``query`` (what an agent asks when its task needs more than the block holds: at most 8,
  above the relevance floor). The *reach* figures count a learning reached when the block,
  per-prompt recall in that session, or this ``context`` call told it — the issue's route
  for repositories with more learnings than the block can hold;
* **search** — ``reflect-jobs search QUERY --json -k 5`` per mode: with ``--repo``
  (``repo``), unscoped from inside the checkout (``here``: its own learnings first at equal
  relevance, every repository's still in) and unscoped from outside any checkout (``all``):
  hit@1 / hit@5 for repository and global learnings, and how often an irrelevant
  query is answered with nothing.

Nothing outside the repository is read; the model is the installed MiniLM, offline.
"""

from __future__ import annotations

import argparse
import io
import json
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]

import recall_eval_kb as kbuild  # noqa: E402
from click.testing import CliRunner  # noqa: E402
from recall_eval_data import Dataset, load, stack_mismatch  # noqa: E402

from reflect_jobs.cli import main as cli_main  # noqa: E402
from reflect_jobs.recall.hook import handle  # noqa: E402

MODES = ("lexical", "hybrid", "local", "global")
BIG_REPO = 40


def told_lines(block: str) -> list[tuple[str, str]]:
    """(note id, line) for every learning line (``- [id] …``) of a block, in order."""
    out = []
    for line in block.splitlines():
        if line.startswith("- [") and "]" in line:
            out.append((line[3 : line.index("]")], line))
    return out


def hook(event: str, cwd: Path, session: str, prompt: str = "", **extra: str) -> str:
    """The block one hook call prints (``""`` when it prints nothing)."""
    payload = {"hook_event_name": event, "cwd": str(cwd), "session_id": session, **extra}
    if prompt:
        payload["prompt"] = prompt
    out = io.StringIO()
    handle(["claude"], json.dumps(payload), out)
    text = out.getvalue().strip()
    if not text:
        return ""
    return json.loads(text)["hookSpecificOutput"]["additionalContext"]


def compact_block(cwd: Path, session: str, prompt: str, tmp: Path) -> str:
    """The SessionStart block after a compaction of a session whose last prompt was
    ``prompt`` (a small Claude Code transcript: an earlier exchange, the prompt, a tool call
    and its result, the summary the compacted session continues from)."""
    path = tmp / f"{session}.jsonl"

    def rec(role: str, content: object, **kw: object) -> str:
        return json.dumps({"type": role, "message": {"role": role, "content": content}, **kw})

    path.write_text(
        "\n".join(
            [
                rec("user", "look around the repository first"),
                rec("assistant", [{"type": "text", "text": "Done."}]),
                rec("user", prompt),
                rec("assistant", [{"type": "tool_use", "id": "t", "name": "Bash", "input": {}}]),
                rec("user", [{"type": "tool_result", "tool_use_id": "t", "content": "ok"}]),
                rec("user", "This session is being continued …", isCompactSummary=True),
            ]
        )
        + "\n"
    )
    return hook("SessionStart", cwd, session, source="compact", transcript_path=str(path))


def branch_block(cwd: Path, session: str, branch: str) -> str:
    """The SessionStart block at a fresh start on ``branch`` (the checkout's ``HEAD`` names
    it for this one call; the default branch's ``main`` is put back after)."""
    head = cwd / ".git" / "HEAD"
    head.write_text(f"ref: refs/heads/{branch}\n")
    try:
        return hook("SessionStart", cwd, session, source="startup")
    finally:
        head.write_text("ref: refs/heads/main\n")


def handoff_block(cwd: Path, session: str, prompt: str) -> str:
    """The SessionStart block at a fresh start on ``main`` with an open handoff whose title is
    ``prompt`` (as the ``/handoff`` skill records it); the handoff is closed after the call."""
    from reflect_jobs.reflections.store import open_store

    store = open_store(str(cwd), cwd)
    try:
        item, _ = store.add("handoff", prompt, None, by="skill", session=session)
        try:
            return hook("SessionStart", cwd, session, source="startup")
        finally:
            store.change("done", item.id, note="picked up by the benchmark's session")
    finally:
        store.close()


def context(query: str, cwd: Path) -> str:
    """The block MCP ``context`` answers for ``query`` in ``cwd`` (``""`` when nothing fits)."""
    from reflect_jobs.envpaths import kb_root_str
    from reflect_jobs.recall.mcp_scope import ServerScope
    from reflect_jobs.recall.tools import context_tool

    text = context_tool(
        Path(kb_root_str()), str(cwd), scope=ServerScope.here(str(cwd)), query=query
    )
    return text if "- [" in text else ""


def search(
    query: str, mode: str, repo_dir: Path | None, runner: CliRunner, where: Path
) -> list[str]:
    """Note ids ``reflect-jobs search --json`` returns (a list, or ``{"results": […]}``),
    run in the directory ``where`` (inside a checkout, its own learnings go first)."""
    import contextlib

    args = ["search", query, "--mode", mode, "-k", "5", "--json"]
    if repo_dir is not None:
        args += ["--repo", str(repo_dir)]
    with contextlib.chdir(where):
        result = runner.invoke(cli_main, args, catch_exceptions=False)
    if result.exit_code != 0:
        raise SystemExit(f"search failed: {args}: {result.output[-500:]}")
    data = json.loads(result.stdout)
    hits = data.get("results", data.get("hits", [])) if isinstance(data, dict) else data
    return [h["id"] for h in hits]


class Judge:
    """Maps told note ids back to benchmark learnings and judges each told line."""

    def __init__(self, ds: Dataset, ids: dict[str, str]) -> None:
        self.ds = ds
        self.bench_of = {note: bench for bench, note in ids.items()}
        self.by_id = ds.by_id()

    def told(self, block: str, repo_key: str) -> dict:
        """Benchmark ids told (in order), and the leaked lines and their characters."""
        repo = self.ds.repos[repo_key]
        ids, leak_repo, leak_stack, leak_chars = [], 0, 0, 0
        for note_id, line in told_lines(block):
            bench = self.bench_of.get(note_id)
            if bench is None:
                continue
            ids.append(bench)
            learning = self.by_id[bench]
            if learning.scope == "repo" and learning.repo != repo_key:
                leak_repo += 1
                leak_chars += len(line) + 1
            elif learning.scope == "global" and stack_mismatch(
                learning.applies_to, repo, self.ds.languages, self.ds.frameworks
            ):
                leak_stack += 1
                leak_chars += len(line) + 1
        return {
            "ids": ids,
            "chars": len(block),
            "leak_repo": leak_repo,
            "leak_stack": leak_stack,
            "leak_chars": leak_chars,
        }

    def ranked(self, note_ids: list[str]) -> list[str]:
        return [self.bench_of.get(n, "?" + n) for n in note_ids]


def start_worker() -> tuple:
    """The worker's model service and search socket, in this process (as ``worker`` runs
    them), the child warmed with one lookup so the first prompt does not pay its start."""
    from reflect_jobs.config import load_settings
    from reflect_jobs.warm import server, supervisor

    settings = load_settings()
    service = supervisor.ModelService(settings)
    sock = server.serve(settings, service)
    if sock is None:
        raise SystemExit("the worker socket could not be bound")
    service.call(
        "similar",
        timeout=600,
        text="warm up",
        k=1,
        kb_path=str(settings.kb_path),
        vectors=settings.index_vectors,
        embed_model=settings.embed_model,
    )
    return service, sock


def measure(
    ds: Dataset,
    scale: str,
    situations: list[dict],
    modes: list[str],
    vectors: bool,
    sections: tuple[str, ...] = ("block", "prompt", "search"),
    reuse: str | None = None,
    worker_ms: int | None = None,
) -> dict:
    """Build one scale's KB and ask every question; per-situation rows and timings."""
    with tempfile.TemporaryDirectory(prefix="recall-eval-") as tmp:
        root = Path(f"{reuse}{scale}") if reuse else Path(tmp)
        root.mkdir(parents=True, exist_ok=True)
        env = kbuild.env_for(root, vectors=vectors)
        if worker_ms is not None:
            env["REFLECT_RECALL_WORKER_MS"] = str(worker_ms)
        old = kbuild.apply_env(env)
        worker = None
        try:
            marker = root / "ids.json"
            if reuse and marker.exists():  # the same KB, built before: bring its index in line
                t0 = time.perf_counter()
                ids = json.loads(marker.read_text())
                kbuild.reindex(root / "kb", vectors=vectors)
                dirs = {key: kbuild.fake_repo(root, key, repo) for key, repo in ds.repos.items()}
                info = {
                    "notes": len(ids),
                    "repos_with_learnings": len({x.repo for x in ds.learnings(scale) if x.repo}),
                    "write_s": 0.0,
                    "reindex_s": round(time.perf_counter() - t0, 1),
                    "reused": str(root),
                }
            else:
                ids, dirs, info = kbuild.build(ds, scale, root, vectors=vectors)
                if reuse:
                    marker.write_text(json.dumps(ids))
            if worker_ms is not None:
                worker = start_worker()
            judge = Judge(ds, ids)
            sizes: dict[str, int] = {}
            for learning in ds.learnings(scale):
                if learning.repo:
                    sizes[learning.repo] = sizes.get(learning.repo, 0) + 1
            runner = CliRunner()
            lat: dict[str, list[float]] = {}
            rows = []
            t0 = time.perf_counter()

            def timed(kind: str, fn, *a):  # type: ignore[no-untyped-def]
                s = time.perf_counter()
                r = fn(*a)
                lat.setdefault(kind, []).append(time.perf_counter() - s)
                return r

            # Session ids unique to this run: a reused KB's home keeps what earlier runs'
            # sessions were told, and a session is never told a learning twice.
            run = uuid.uuid4().hex[:8]
            asleep = dormant(root / "kb", ids)
            for s in situations:
                cwd = dirs[s["repo"]]
                block = after = alone = ctx = compact = branch = handoff = ""
                if "block" in sections:
                    block = timed("block", hook, "SessionStart", cwd, f"{s['id']}-{run}-session")
                if "branch" in sections:
                    branch = timed(
                        "branch", branch_block, cwd, f"{s['id']}-{run}-branch", s["branch"]
                    )
                if "handoff" in sections:
                    handoff = timed(
                        "handoff", handoff_block, cwd, f"{s['id']}-{run}-handoff", s["prompt"]
                    )
                if "compact" in sections:
                    compact = timed(
                        "compact",
                        compact_block,
                        cwd,
                        f"{s['id']}-{run}-compact",
                        s["prompt"],
                        Path(tmp),
                    )
                if "prompt" in sections:
                    after = hook("UserPromptSubmit", cwd, f"{s['id']}-{run}-session", s["prompt"])
                    alone = timed(
                        "prompt",
                        hook,
                        "UserPromptSubmit",
                        cwd,
                        f"{s['id']}-{run}-fresh",
                        s["prompt"],
                    )
                    ctx = timed("context", context, s["query"], cwd)
                found = {}
                for mode in modes if "search" in sections else ():
                    # --repo; unscoped from the checkout; unscoped from outside any checkout
                    for scope, rd, where in (
                        ("repo", cwd, Path(tmp)),
                        ("here", None, cwd),
                        ("all", None, Path(tmp)),
                    ):
                        found[f"{mode}/{scope}"] = judge.ranked(
                            timed(
                                f"search {mode}/{scope}",
                                search,
                                s["query"],
                                mode,
                                rd,
                                runner,
                                where,
                            )
                        )
                b = judge.told(block, s["repo"])
                c = judge.told(compact, s["repo"])
                br = judge.told(branch, s["repo"])
                ho = judge.told(handoff, s["repo"])
                rows.append(
                    {
                        **{k: s[k] for k in ("id", "split", "kind", "repo")},
                        "repo_size": sizes.get(s["repo"], 0),
                        "expected": s["expected"],
                        "dormant": [e for e in s["expected"] if e in asleep],
                        "block": b,
                        "compact": c,
                        "branch": br,
                        "handoff": ho,
                        "prompt": judge.told(alone, s["repo"]),
                        "session_ids": sorted(
                            set(b["ids"]) | set(judge.told(after, s["repo"])["ids"])
                        ),
                        "context_ids": judge.told(ctx, s["repo"])["ids"],
                        "search": found,
                    }
                )
            info["questions_s"] = round(time.perf_counter() - t0, 1)
            info["latency_ms"] = {
                k: round(statistics.median(v) * 1000, 1) for k, v in sorted(lat.items())
            }
        finally:
            if worker is not None:
                worker[1].close()
                worker[0].close()
            kbuild.restore_env(old)
    return {"info": info, "rows": rows}


def dormant(kb_root: Path, ids: dict[str, str]) -> set[str]:
    """The benchmark ids whose learning is dormant now (not confirmed for the fading
    threshold: the benchmark's ages run to 299 days and it records no confirmation)."""
    from reflect_jobs.recall import fading, store

    conn = store.open_for_read(store.store_path(str(kb_root)))
    if conn is None:
        return set()
    try:
        awake = dict(conn.execute("SELECT id, awake_ts FROM notes").fetchall())
    finally:
        conn.close()
    days, now = fading.unused_days(), time.time()
    return {b for b, note in ids.items() if fading.is_dormant(awake.get(note), days, now)}


def _lines(rows: list[dict], key: str) -> list[int]:
    """The line (from 1, among the learnings told) of every expected learning ``key``'s
    block told."""
    return [r[key]["ids"].index(e) + 1 for r in rows for e in r["expected"] if e in r[key]["ids"]]


def _mean(xs: list[float]) -> float | None:
    return round(statistics.mean(xs), 3) if xs else None


def summarise(
    ds: Dataset, rows: list[dict], modes: list[str], sections: tuple[str, ...] = ("search",)
) -> dict:
    """The figures of one split at one scale (see the module docstring)."""
    by_id = ds.by_id()

    def part(row: dict, scope: str) -> list[str]:
        return [e for e in row["expected"] if by_id[e].scope == scope]

    rel = [r for r in rows if r["expected"]]
    none = [r for r in rows if not r["expected"]]
    out: dict = {"situations": len(rel), "irrelevant": len(none)}
    block: dict = {}
    for scope, name in (("repo", "repo_hit"), ("global", "global_hit")):
        sel = [r for r in rel if part(r, scope)]
        block[name] = _mean(
            [sum(e in r["block"]["ids"] for e in part(r, scope)) / len(part(r, scope)) for r in sel]
        )
        block[name + "_n"] = len(sel)
        # The most a block ranked by strength can tell: dormant learnings are left out of
        # it by design (recall/fading.py) until a task asks for them.
        block[name.replace("hit", "awake")] = _mean(
            [
                sum(e not in r.get("dormant", ()) for e in part(r, scope)) / len(part(r, scope))
                for r in sel
            ]
        )
        if scope == "repo":
            big = [r for r in sel if r["repo_size"] >= BIG_REPO]
            block["repo_hit_40plus"] = _mean(
                [
                    sum(e in r["block"]["ids"] for e in part(r, "repo")) / len(part(r, "repo"))
                    for r in big
                ]
            )
            block["repo_hit_40plus_n"] = len(big)
        block["session_" + name] = _mean(
            [sum(e in r["session_ids"] for e in part(r, scope)) / len(part(r, scope)) for r in sel]
        )

        def reached(r: dict, scope: str = scope) -> float:
            got = set(r["session_ids"]) | set(r.get("context_ids", ()))
            return sum(e in got for e in part(r, scope)) / len(part(r, scope))

        block["reach_" + name] = _mean([reached(r) for r in sel])
        if scope == "repo":
            block["reach_repo_hit_40plus"] = _mean(
                [reached(r) for r in sel if r["repo_size"] >= BIG_REPO]
            )
    lines = _lines(rel, "block")
    block["median_line"] = round(float(statistics.median(lines)), 1) if lines else None
    block["chars_mean"] = (
        round(statistics.mean(r["block"]["chars"] for r in rows)) if rows else None
    )
    block["leak_repo_lines"] = _mean([r["block"]["leak_repo"] for r in rows])
    block["leak_stack_lines"] = _mean([r["block"]["leak_stack"] for r in rows])
    block["leak_chars_mean"] = (
        round(statistics.mean(r["block"]["leak_chars"] for r in rows)) if rows else None
    )
    block["blocks_with_leak"] = _mean(
        [float(r["block"]["leak_repo"] + r["block"]["leak_stack"] > 0) for r in rows]
    )
    out["block"] = block
    for key in ("compact", "branch", "handoff"):
        if key in sections:
            out[key] = _told_figures(rel, rows, part, key)
    told = [r for r in rel if r["prompt"]["ids"]]
    good = sum(sum(x in r["expected"] for x in r["prompt"]["ids"]) for r in told)
    out["prompt"] = {
        "hit": _mean([float(any(e in r["prompt"]["ids"] for e in r["expected"])) for r in rel]),
        "recall": _mean(
            [sum(e in r["prompt"]["ids"] for e in r["expected"]) / len(r["expected"]) for r in rel]
        ),
        "precision": round(good / sum(len(r["prompt"]["ids"]) for r in told), 3) if told else None,
        "fired": _mean([float(bool(r["prompt"]["ids"])) for r in rel]),
        "silent_when_irrelevant": _mean([float(not r["prompt"]["ids"]) for r in none]),
        "leak_lines": _mean([r["prompt"]["leak_repo"] + r["prompt"]["leak_stack"] for r in rows]),
    }
    srch: dict = {}
    for mode in modes if "search" in sections else ():
        for scope in ("repo", "here", "all"):
            key = f"{mode}/{scope}"
            m: dict = {}
            for kind in ("repo", "global"):
                sel = [r for r in rel if part(r, kind)]
                for k in (1, 5):
                    m[f"{kind}_hit@{k}"] = _mean(
                        [float(any(e in r["search"][key][:k] for e in part(r, kind))) for r in sel]
                    )
            m["no_result_on_relevant"] = _mean([float(not r["search"][key]) for r in rel])
            m["empty_when_irrelevant"] = _mean([float(not r["search"][key]) for r in none])
            srch[key] = m
    out["search"] = srch
    return out


def _told_figures(rel: list[dict], rows: list[dict], part, key: str) -> dict:  # type: ignore[no-untyped-def]
    """Hit, 40+ hit, median line, characters and leaks of one told block per row."""
    out: dict = {}
    for scope, name in (("repo", "repo_hit"), ("global", "global_hit")):
        sel = [r for r in rel if part(r, scope)]

        def hit(r: dict, scope: str = scope) -> float:
            return sum(e in r[key]["ids"] for e in part(r, scope)) / len(part(r, scope))

        out[name] = _mean([hit(r) for r in sel])
        out[name + "_n"] = len(sel)
        if scope == "repo":
            out["repo_hit_40plus"] = _mean([hit(r) for r in sel if r["repo_size"] >= BIG_REPO])
    lines = _lines(rel, key)
    out["median_line"] = round(float(statistics.median(lines)), 1) if lines else None
    out["chars_mean"] = round(statistics.mean(r[key]["chars"] for r in rows)) if rows else None
    out["leak_lines"] = _mean([r[key]["leak_repo"] + r[key]["leak_stack"] for r in rows])
    return out


def _fmt(v: object) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.2f}"
    return str(v)


def print_tables(report: dict, splits: list[str]) -> None:
    for scale, res in report["scales"].items():
        info = res["info"]
        print(
            f"\n== scale {scale}: {info['notes']} notes in {info['repos_with_learnings']} repositories + global; "
            f"write {info['write_s']} s, reindex {info['reindex_s']} s, questions {info['questions_s']} s"
        )
        print(
            "   median latency ms: " + ", ".join(f"{k} {v}" for k, v in info["latency_ms"].items())
        )
        for section in ("block", "branch", "compact", "handoff", "prompt"):
            if section not in report.get("sections", (section,)) or (
                section not in res["splits"][splits[0]]
            ):
                continue
            keys = list(res["splits"][splits[0]][section])
            print(f"  {section:<28}" + "".join(f"{s:>8}" for s in splits))
            for k in keys:
                print(
                    f"    {k:<26}"
                    + "".join(f"{_fmt(res['splits'][s][section][k]):>8}" for s in splits)
                )
        cols = [
            "repo_hit@1",
            "repo_hit@5",
            "global_hit@1",
            "global_hit@5",
            "no_result_on_relevant",
            "empty_when_irrelevant",
        ]
        heads = ["repo@1", "repo@5", "glob@1", "glob@5", "none-rel", "empty-irr"]
        print("  search (k=5)          split" + "".join(f"{h:>10}" for h in heads))
        for key in res["splits"][splits[0]]["search"] if "search" in report["sections"] else ():
            for s in splits:
                m = res["splits"][s]["search"][key]
                print(f"    {key:<20}{s:>7}" + "".join(f"{_fmt(m[c]):>10}" for c in cols))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--split",
        choices=["dev", "test", "all", "heldout"],
        default="all",
        help="all = dev + test; heldout = the later set nobody tuned on (report it on its own)",
    )
    ap.add_argument("--scale", choices=["200", "2000", "both"], default="both")
    ap.add_argument("--modes", default=",".join(MODES), help="search modes, comma-separated")
    ap.add_argument(
        "--no-vectors", action="store_true", help="REFLECT_INDEX_VECTORS=0 (lexical only)"
    )
    ap.add_argument(
        "--worker-ms",
        type=int,
        default=None,
        help="run the worker's model service and socket in-process and give per-prompt "
        "recall this budget (REFLECT_RECALL_WORKER_MS); default: no worker (lexical)",
    )
    ap.add_argument(
        "--reuse",
        metavar="PREFIX",
        help="keep each scale's KB in PREFIX<scale> and reuse it when it is there (tuning)",
    )
    ap.add_argument(
        "--sections",
        default="block,prompt,search",
        help="what to measure, comma-separated (search alone: a fast tuning loop)",
    )
    ap.add_argument(
        "--json", dest="json_out", metavar="PATH", help="write the report and rows here"
    )
    args = ap.parse_args()
    modes = [m for m in args.modes.split(",") if m]
    ds = load()
    splits = ["dev", "test"] if args.split == "all" else [args.split]
    situations = [s for s in ds.situations if s["split"] in splits]
    scales = ["200", "2000"] if args.scale == "both" else [args.scale]
    started = time.perf_counter()
    sections = tuple(x for x in args.sections.split(",") if x)
    report: dict = {"scales": {}, "splits": splits, "modes": modes, "sections": sections}
    rows_out: dict = {}
    for scale in scales:
        res = measure(
            ds,
            scale,
            situations,
            modes,
            not args.no_vectors,
            sections,
            args.reuse,
            worker_ms=args.worker_ms,
        )
        per = {
            s: summarise(ds, [r for r in res["rows"] if r["split"] == s], modes, sections)
            for s in splits
        }
        if len(splits) > 1:
            per["all"] = summarise(ds, res["rows"], modes, sections)
        report["scales"][scale] = {"info": res["info"], "splits": per}
        rows_out[scale] = res["rows"]
    report["wall_s"] = round(time.perf_counter() - started, 1)
    print(
        f"recall eval: {len(situations)} situations ({', '.join(splits)}), modes {', '.join(modes)}"
    )
    print_tables(report, splits + (["all"] if len(splits) > 1 else []))
    print(f"\nwall time {report['wall_s']} s")
    if args.json_out:
        Path(args.json_out).write_text(
            json.dumps({"report": report, "rows": rows_out}, indent=1) + "\n"
        )


if __name__ == "__main__":
    main()
