"""Dashboard benchmark: page weight and time to first render of ``reflect-jobs ui`` in Chromium.

Run: .venv/bin/python bench/bench_dashboard.py [--runs 5] [--notes 241]

Builds a throwaway installation — a KB of ``--notes`` notes from ``bench/corpus.py`` written
through ``kb.write_learning``, a ledger with 40 done, 5 poisoned and 2 quarantined jobs and
30 days of paid calls — starts ``reflect-jobs ui --port 0`` on it, and loads the page
``--runs`` times in headless Debian Chromium (``/usr/bin/chromium``, driven by Playwright),
each time in a fresh browser context (a cold cache). From the browser's own Performance API
it reports the bytes transferred (navigation plus every resource: ``transferSize``, headers
included), the number of requests, the time to the first response byte (the server's
render), ``first-contentful-paint`` and ``domContentLoaded`` (medians). The same-run baseline is ``/api/status`` from the same server loaded the same way
(one JSON document, Chromium's plain text view, no CSS or script): the ratio says what the
page costs over the cheapest thing this server can show.
"""

from __future__ import annotations

import argparse
import os
import random
import select
import statistics
import subprocess
import sys
import tempfile
from datetime import timedelta
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
CHROMIUM = "/usr/bin/chromium"
BIN = Path(sys.executable).parent

MEASURE_JS = """() => {
  const nav = performance.getEntriesByType('navigation')[0];
  const res = performance.getEntriesByType('resource');
  const fcp = performance.getEntriesByName('first-contentful-paint')[0];
  return {
    bytes: nav.transferSize + res.reduce((a, r) => a + r.transferSize, 0),
    body: nav.decodedBodySize + res.reduce((a, r) => a + r.decodedBodySize, 0),
    requests: 1 + res.length,
    fcp: fcp ? fcp.startTime : null,
    dcl: nav.domContentLoadedEventEnd,
    ttfb: nav.responseStart,
  };
}"""


def build(root: Path, notes: int) -> dict[str, str]:
    """Write the KB and the ledger; return the environment ``reflect-jobs ui`` runs with."""
    import corpus

    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("REFLECT_", "GLOBAL_LEARNINGS", "STUB_CLAUDE"))
    }
    env.update(
        REFLECT_HOME=str(root / "home"),
        GLOBAL_LEARNINGS_PATH=str(root / "kb"),
        REFLECT_INDEX_VECTORS="0",
        HF_HUB_OFFLINE="1",
    )
    os.environ.update(env)  # this process builds the ledger with the same settings
    from reflect_jobs import kb
    from reflect_jobs.config import load_settings
    from reflect_jobs.ledger.captures import record_capture
    from reflect_jobs.ledger.db import session_scope
    from reflect_jobs.ledger.jobs import transition
    from reflect_jobs.ledger.models import CostRow, Job, Learning, utcnow

    settings = load_settings(env)
    written = []
    for note in corpus.corpus(notes):
        learning = corpus.learning(note)
        nf = kb.write_learning(
            settings.kb_path,
            learning,
            created="2026-11-01T00:00:00Z",
            updated="2026-11-01T00:00:00Z",
            source_path="bench",
            session_id="bench",
        )
        written.append((nf, learning))
    rng = random.Random(20261201)
    now = utcnow()
    with session_scope(settings.db_url) as s:
        for i, state in enumerate(["done"] * 40 + ["poisoned"] * 5 + ["quarantined"] * 2):
            res = record_capture(
                s,
                harness="claude",
                session_id=f"bench-{i}",
                transcript_path=f"/bench/{i}.jsonl",
                event="Stop",
                size=10,
                mtime=1.0,
                settle_sec=0,
                now=now,
            )
            job = s.get(Job, res.job_id)
            transition(s, job, to_state="running")
            transition(s, job, to_state=state, outcome=f"bench_{state}", detail="bench")
        # The ledger's rows for the notes, as the add stage writes them: the memory view
        # lists learnings per repository (six repositories and the global ones), with ten
        # waiting for review.
        for i, (nf, learning) in enumerate(written):
            s.add(
                Learning(
                    id=nf.id,
                    title=str(learning.get("title", ""))[:300],
                    scope="repo" if i % 3 else "global",
                    repo_key=f"github.com/acme/r{i % 6}" if i % 3 else None,
                    status="proposed" if i < 10 else "active",
                    confidence_num=float(learning.get("confidence_num", 0.6)),
                    note_path=str(nf.path),
                    evidence=str(learning.get("key_insight", ""))[:300],
                    evidence_origin="person",
                    session_id=f"bench-{i % 40}",
                )
            )
        for d in range(30):
            day = now - timedelta(days=d)
            for _ in range(rng.randint(0, settings.daily_max)):
                s.add(
                    CostRow(
                        at=day,
                        day=day.strftime("%Y-%m-%d"),
                        outcome="ok",
                        entries=1,
                        tokens=20000,
                        cost_usd=round(rng.uniform(0.02, 0.12), 4),
                    )
                )
    return env


def load(browser, url: str) -> dict:  # type: ignore[no-untyped-def]
    """Load ``url`` in a fresh context and read the Performance API once it has painted."""
    ctx = browser.new_context()
    page = ctx.new_page()
    page.goto(url, wait_until="load")
    page.wait_for_function(
        "() => performance.getEntriesByName('first-contentful-paint').length > 0"
    )
    figures = page.evaluate(MEASURE_JS)
    ctx.close()
    return figures


def main() -> None:
    """Build, serve, load, print."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--notes", type=int, default=241)
    args = ap.parse_args()
    if not os.path.exists(CHROMIUM):
        sys.exit(f"needs {CHROMIUM} (apt-get install chromium)")
    from playwright.sync_api import sync_playwright

    load_start = Path("/proc/loadavg").read_text().split()[0]
    with tempfile.TemporaryDirectory(prefix="bench-dashboard-") as tmp:
        env = build(Path(tmp), args.notes)
        proc = subprocess.Popen(
            [str(BIN / "reflect-jobs"), "ui", "--port", "0"],
            env=env,
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            ready, _, _ = select.select([proc.stdout], [], [], 60)
            line = proc.stdout.readline() if ready else ""
            if "http://127.0.0.1:" not in line:
                sys.exit(f"ui did not start: {line!r}")
            url = line.split()[2]
            results: dict[str, list[dict]] = {"dashboard /": [], "baseline /api/status": []}
            with sync_playwright() as p:
                flags = ["--no-sandbox"] if os.geteuid() == 0 else []
                browser = p.chromium.launch(executable_path=CHROMIUM, args=flags)
                load(browser, url)  # warm the server (first ledger/KB reads) and the browser
                for _ in range(args.runs):  # interleaved, so load changes hit both alike
                    results["dashboard /"].append(load(browser, url))
                    results["baseline /api/status"].append(load(browser, url + "api/status"))
                version = browser.version
                browser.close()
        finally:
            proc.terminate()
            proc.wait(timeout=30)
    load_end = Path("/proc/loadavg").read_text().split()[0]
    print(
        f"Chromium {version}, {args.runs} cold-cache loads each, KB {args.notes} notes, "
        f"load average {load_start} -> {load_end}"
    )
    print(
        f"{'page':<24}{'bytes':>9}{'decoded':>9}{'reqs':>6}{'TTFB ms':>9}{'FCP ms':>9}{'DCL ms':>9}"
    )
    med = {}
    for name, runs in results.items():
        m = {
            k: statistics.median(r[k] for r in runs)
            for k in ("bytes", "body", "ttfb", "fcp", "dcl")
        }
        med[name] = m
        print(
            f"{name:<24}{m['bytes']:>9.0f}{m['body']:>9.0f}{runs[0]['requests']:>6}"
            f"{m['ttfb']:>9.1f}{m['fcp']:>9.1f}{m['dcl']:>9.1f}"
        )
    d, b = med["dashboard /"], med["baseline /api/status"]
    print(
        f"ratio dashboard/baseline: bytes {d['bytes'] / b['bytes']:.1f}x, "
        f"FCP {d['fcp'] / b['fcp']:.2f}x"
    )


if __name__ == "__main__":
    main()
