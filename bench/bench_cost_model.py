"""Cost model: one simulated month of captures, our pipeline vs the original drain's rules.

Run: .venv/bin/python bench/bench_cost_model.py [--seed N] [--transcripts N] [--days N]

Why a simulation: the question is what a month of real use costs, and the answer depends
on how often the gate fires, how big the slices are, how much the chunk-hash delta saves
and where the daily cap bites — all of which only show up over many sessions. We have seven
real Claude Code transcripts (~175 records, tests/data/transcripts/claude-code), so the
month is *recombined* from them:

* 300 sessions (deterministic seed), most on weekdays; lengths are mostly short, some
  medium, a few long (up to ~1 MB, the size class of the original's 10-day outage);
* each session is runs of consecutive real records taken from random real transcripts;
  identifiers, paths and numbers are renamed per session (different projects have
  different file names), so two sessions do not share whole windows by accident — without
  this, recombining 175 records would hand both systems' chunk-hash dedup free wins;
* synthetic human corrections (the human-signal lines of tests/data/signals_labelled.jsonl)
  at realistic rates: most sessions none, some one or two anywhere, and a few long
  sessions with corrections near the end (where the original's front-anchored caps lose them).

Ours, per capture: ``read_transcript`` + ``cascade.prepare`` (60,000-char budget) against an
in-memory ledger that remembers chunk hashes when a call succeeds (as the add stage does),
then ``build_prompt``. The original, per capture: its dialogue extractor (600K front cap),
its signal detector (``bench/original_signals.py``: any signal → reflect), its slice
(``slice_dialogue_original``, 60,000-char front cap; blank → first 60,000 chars), its
chunk-hash delta (recorded at prepare time, SPEC-drain §3.3) and its prompt overhead
(instructions + slice header + the always-appended observation block).

Both: a daily cap of 20 calls (UTC day), over-cap work waits for the next day (FIFO);
free skips never count. Tokens = chars/4; Sonnet $3/M input, $15/M output, 400 output
tokens per call. Each call is assumed to succeed (no retries) — the same for both.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import re
import statistics
import sys
import tempfile
from collections import Counter, deque
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from bench_prepare import REAL_DIR, original_dialogue  # noqa: E402
from original_signals import detect_signals_original, slice_dialogue_original  # noqa: E402

from reflect_jobs.cascade import RelatedCandidate, prepare  # noqa: E402
from reflect_jobs.transcripts import UnreadableTranscript, read_transcript  # noqa: E402
from reflect_jobs.writer.prompt import INSTRUCTIONS, build_prompt  # noqa: E402

LABELLED = ROOT / "tests" / "data" / "signals_labelled.jsonl"

DAILY_CAP = 20
MAX_CHARS = 60_000
PRICE_IN = 3.0 / 1_000_000
PRICE_OUT = 15.0 / 1_000_000
OUTPUT_TOKENS = 400

# The original's fixed prompt parts (SPEC-drain §3.5, §4.2). Its extract instructions are
# the same contract as ours, so their size is taken from ours; the observation block is
# reconstructed from §3.5 (always appended, even with zero observations).
ORIGINAL_SLICE_MARKER = "\n--- REFLECT SLICE ---\n"
ORIGINAL_OBSERVATION_BLOCK = (
    "\n\n## Consolidated observations (persona/conventions — second pass)\n"
    "Beyond individual corrections, aggregate recurring preferences into observations: "
    'statements like "this team prefers X" or "in this codebase we always Y". Emit actions '
    "as a JSON array of objects {action: CREATE|UPDATE|DELETE, target_id, content, "
    "source_correction_ids, reason}. Prefer UPDATE over CREATE when an existing observation "
    "already states the convention; cite the learning ids that support it; DELETE only when "
    "the convention no longer holds. Apply them with:\n"
    "python3 /home/user/.claude/plugins/reflect/plugin/scripts/reflect_cascade.py observe "
    "--actions '<json-array>'\n"
    "Existing observations in scope:\n[]\n"
)


# --- the month ---------------------------------------------------------------------------


@dataclass
class Session:
    day: int
    path: Path
    size: int
    length_class: str
    corrections: list[str] = field(default_factory=list)
    late_corrections: list[str] = field(default_factory=list)


def _real_records() -> list[list[dict]]:
    out = []
    for path in sorted(REAL_DIR.glob("*.jsonl")):
        recs = []
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                rec = json.loads(line)
            except ValueError:
                continue
            if isinstance(rec, dict):
                recs.append(rec)
        if recs:
            out.append(recs)
    return out


def _corrections() -> list[str]:
    rows = [json.loads(ln) for ln in LABELLED.read_text().splitlines()]
    return [
        r["text"]
        for r in rows
        if r["signal"] and r["role"] == "user" and 15 <= len(r["text"]) <= 200
    ]


_TOKEN = re.compile(r"\b[A-Za-z_][\w./-]*[A-Za-z0-9]\b|\b\d+\b")
_IDENT_MARK = re.compile(r"[\d_./]")  # digits, snake_case, paths, dotted names


def _renamer(rng: random.Random):  # type: ignore[no-untyped-def]
    """Per-session renaming of identifiers, paths and numbers (keeps words intact, so the
    signal vocabulary — never, always, wrong… — is untouched)."""
    tag = "".join(rng.choice("abcdefghjkmnpqrstuvwxyz") for _ in range(2))
    cache: dict[str, str] = {}

    def one(match: re.Match[str]) -> str:
        token = match.group(0)
        if not _IDENT_MARK.search(token):
            return token  # a plain word: never renamed
        if token not in cache:
            if token.isdigit():
                cache[token] = str(rng.randrange(10 ** max(len(token) - 1, 0), 10 ** len(token)))
            else:
                head = re.match(r"[A-Za-z_]+", token)
                cut = head.end() if head else 0
                cache[token] = token[:cut] + tag + token[cut:]
        return cache[token]

    return lambda text: _TOKEN.sub(one, text)


def _rename_record(rec: dict, rename) -> dict:  # type: ignore[no-untyped-def]
    rec = json.loads(json.dumps(rec))
    msg = rec.get("message")
    if isinstance(msg, dict):
        content = msg.get("content")
        if isinstance(content, str):
            msg["content"] = rename(content)
        elif isinstance(content, list):
            for block in content:
                if isinstance(block, dict) and isinstance(block.get("text"), str):
                    block["text"] = rename(block["text"])
    return rec


def _correction_record(text: str, session: str, n: int) -> dict:
    return {
        "type": "user",
        "uuid": f"{session}-fix-{n}",
        "sessionId": session,
        "message": {"role": "user", "content": text},
    }


def generate_month(
    out_dir: Path, *, seed: int, count: int, days: int
) -> tuple[list[Session], Counter]:
    rng = random.Random(seed)
    sources = _real_records()
    fixes = _corrections()
    weights = [0.3 if d % 7 in (5, 6) else 1.0 for d in range(days)]
    for burst in rng.sample(range(days), 3):  # release days, incident days
        weights[burst] = 2.5
    arrival_days = sorted(rng.choices(range(days), weights=weights, k=count))
    sessions: list[Session] = []
    kinds: Counter = Counter()
    for i, day in enumerate(arrival_days):
        sid = f"sim-{i:03d}"
        roll = rng.random()
        if roll < 0.55:
            length_class, target = "short", rng.randint(8, 30)
        elif roll < 0.85:
            length_class, target = "medium", rng.randint(30, 120)
        else:
            length_class, target = "long", rng.randint(150, 700)
        rename = _renamer(rng)
        records: list[dict] = []
        while len(records) < target:
            src = rng.choice(sources)
            start = rng.randrange(len(src))
            run = src[start : start + rng.randint(5, 40)]
            records += [_rename_record(r, rename) for r in run]
        records = records[:target]
        session = Session(day, out_dir / f"{sid}.jsonl", 0, length_class)
        # Correction rates: most sessions none; some one or two anywhere; a few long
        # sessions with corrections near the end.
        c = rng.random()
        if length_class == "long" and c < 0.45:
            kind, n_fix, late = "late", rng.randint(1, 3), True
        elif c < 0.62:
            kind, n_fix, late = "none", 0, False
        else:
            kind, n_fix, late = "some", 1 if rng.random() < 0.7 else 2, False
        kinds[kind] += 1
        for n in range(n_fix):
            text = rename(rng.choice(fixes))
            lo = int(len(records) * 0.9) if late else 1
            pos = rng.randint(lo, len(records))
            records.insert(pos, _correction_record(text, sid, n))
            (session.late_corrections if late else session.corrections).append(text)
        data = "".join(json.dumps(r) + "\n" for r in records)
        session.path.write_text(data, encoding="utf-8")
        session.size = len(data.encode())
        sessions.append(session)
    return sessions, kinds


# --- the two systems ---------------------------------------------------------------------


class MemoryLedger:
    """LedgerView that remembers chunk hashes once a call succeeded (as ``add`` records)."""

    def __init__(self) -> None:
        self.seen: set[str] = set()

    def seen_chunk_hashes(self, hashes: list[str]) -> set[str]:
        return self.seen.intersection(hashes)

    def related_candidates(self, limit: int = 1000) -> list[RelatedCandidate]:
        return []

    def learnings_with_signal_hash(self, signal_hash: str) -> list[str]:
        return []


@dataclass
class Pending:
    session: Session
    prompt: str
    hashes: list[str]


@dataclass
class Tally:
    name: str
    skips: Counter = field(default_factory=Counter)
    sent: list[int] = field(default_factory=list)  # prompt chars per call
    backlog: int = 0
    fixes_sent: int = 0
    fixes_total: int = 0
    late_sent: int = 0
    late_total: int = 0

    def record_call(self, pending: Pending) -> None:
        self.sent.append(len(pending.prompt))
        s = pending.session
        self.fixes_sent += sum(1 for f in s.corrections if f in pending.prompt)
        self.late_sent += sum(1 for f in s.late_corrections if f in pending.prompt)


def _chunk_hash(text: str) -> str:
    return hashlib.sha256(text.strip().encode()).hexdigest()[:16]


def _original_is_reflect_on_reflect(path: Path) -> bool:
    scanned = 0
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines()):
        if n >= 60 or scanned >= 50_000:
            break
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        msg = rec.get("message") if isinstance(rec, dict) else None
        content = None
        if isinstance(msg, dict) and msg.get("role") == "user":
            content = msg.get("content")
            content = content if isinstance(content, str) else json.dumps(content)
        elif isinstance(rec, dict) and rec.get("type") == "queue-operation":
            content = rec.get("content")
        if isinstance(content, str):
            scanned += len(content)
            low = content.lower()
            if "<command-name>reflect</command-name>" in low or "process the transcript at:" in low:
                return True
    return False


def original_prepare(session: Session, seen: set[str], tally: Tally) -> Pending | None:
    """The original cascade at pick time; it records chunk hashes BEFORE the call (B2)."""
    if _original_is_reflect_on_reflect(session.path):
        tally.skips["reflect_on_reflect"] += 1
        return None
    dialogue = original_dialogue(session.path)
    signals = detect_signals_original(dialogue)
    if not signals:
        tally.skips["no_signal"] += 1
        return None
    piece = slice_dialogue_original(dialogue, signals, context_lines=3, max_chars=MAX_CHARS)
    if not piece.strip():
        piece = dialogue[:MAX_CHARS]
    chunks = [
        c.strip()
        for c in piece.split("\u2026")
        if c.strip() and not c.strip().startswith("[slice truncated]")
    ]
    fresh = [c for c in chunks if _chunk_hash(c) not in seen]
    if not fresh:
        tally.skips["dup_chunk_hash"] += 1
        return None
    seen.update(_chunk_hash(c) for c in fresh)
    body = "\n\u2026\n".join(fresh)
    header = (
        f"# Reflect slice of {session.path.name}\n"
        f"# {len(signals)} signal-bearing windows extracted from a {len(dialogue) // 4}-token "
        f"transcript ({len(body) // 4} tokens).\n"
        "# Only correction/approval/knowledge exchanges are kept.\n\n"
    )
    prompt = INSTRUCTIONS + ORIGINAL_SLICE_MARKER + header + body + ORIGINAL_OBSERVATION_BLOCK
    return Pending(session, prompt, [])


def ours_prepare(session: Session, ledger: MemoryLedger, tally: Tally) -> Pending | None:
    try:
        transcript = read_transcript(session.path, harness="claude")
    except UnreadableTranscript:
        tally.skips["unreadable"] += 1
        return None
    out = prepare(transcript, ledger, source_name=session.path.name, max_chars=MAX_CHARS)
    if out.action == "skip":
        tally.skips[out.reason] += 1
        return None
    prompt = build_prompt(out.slice_text, allowed_ids=out.related_ids)
    return Pending(session, prompt, out.new_chunk_hashes)


def simulate(sessions: list[Session], days: int) -> tuple[Tally, Tally]:
    """Day by day: ours prepares at capture and defers writes over the cap; the original
    queues every capture and prepares when the drain picks it (≤ 20 paid entries a day)."""
    ours, orig = Tally("reflect-jobs"), Tally("original drain")
    ledger = MemoryLedger()
    orig_seen: set[str] = set()
    ours_q: deque[Pending] = deque()
    orig_q: deque[Session] = deque()
    by_day: dict[int, list[Session]] = {}
    for s in sessions:
        by_day.setdefault(s.day, []).append(s)
        for t in (ours, orig):
            t.fixes_total += len(s.corrections)
            t.late_total += len(s.late_corrections)
    for day in range(days):
        # ours: yesterday's deferred writes are due first, then today's captures in order.
        budget = DAILY_CAP
        while ours_q and budget:
            job = ours_q.popleft()
            ours.record_call(job)
            ledger.seen.update(job.hashes)
            budget -= 1
        for s in by_day.get(day, []):
            job = ours_prepare(s, ledger, ours)
            if job is None:
                continue
            if budget:
                ours.record_call(job)
                ledger.seen.update(job.hashes)
                budget -= 1
            else:
                ours_q.append(job)
        # original: FIFO queue; skips are free and do not use the daily cap.
        orig_q.extend(by_day.get(day, []))
        budget = DAILY_CAP
        while orig_q and budget:
            job = original_prepare(orig_q.popleft(), orig_seen, orig)
            if job is not None:
                orig.record_call(job)
                budget -= 1
    ours.backlog = len(ours_q)
    orig.backlog = len(orig_q)
    return ours, orig


# --- report ------------------------------------------------------------------------------


def _money(tokens_in: int, calls: int) -> tuple[float, float]:
    return tokens_in * PRICE_IN, calls * OUTPUT_TOKENS * PRICE_OUT


def _ratio(a: object, b: object) -> str:
    """``a / b`` for two figures ("1,234", "0.52" or "138/140" read as a fraction)."""

    def num(x: object) -> float | None:
        text = str(x).replace(",", "")
        try:
            if "/" in text:
                top, bottom = text.split("/")
                return float(top) / float(bottom)
            return float(text)
        except (ValueError, ZeroDivisionError):
            return None

    x, y = num(a), num(b)
    return f"{x / y:.2f}x" if x is not None and y else "-"


def report(ours: Tally, orig: Tally, sessions: list[Session], kinds: Counter, args) -> None:  # type: ignore[no-untyped-def]
    sizes = sorted(s.size for s in sessions)
    classes = Counter(s.length_class for s in sessions)
    print(
        f"# Cost model: {len(sessions)} recombined transcripts over {args.days} days "
        f"(seed {args.seed})"
    )
    print(
        f"transcripts: {classes['short']} short / {classes['medium']} medium / "
        f"{classes['long']} long; size median {statistics.median(sizes) / 1e3:.0f} KB, "
        f"max {sizes[-1] / 1e6:.2f} MB, total {sum(sizes) / 1e6:.1f} MB"
    )
    print(
        f"human corrections: {kinds['none']} sessions none, {kinds['some']} with 1-2, "
        f"{kinds['late']} long sessions with 1-3 near the end "
        f"({ours.fixes_total + ours.late_total} corrections in all)"
    )
    print(
        f"daily cap {DAILY_CAP} calls; tokens = chars/4; sonnet ${PRICE_IN * 1e6:.0f}/M in, "
        f"${PRICE_OUT * 1e6:.0f}/M out, {OUTPUT_TOKENS} output tokens/call\n"
    )
    rows: list[tuple[str, str, str, str]] = []

    def row(label: str, a: object, b: object) -> None:
        rows.append((label, str(a), str(b), _ratio(a, b)))

    t_ours = [c // 4 for c in ours.sent]
    t_orig = [c // 4 for c in orig.sent]
    in_ours, in_orig = sum(t_ours), sum(t_orig)
    d_ours, d_orig = _money(in_ours, len(t_ours)), _money(in_orig, len(t_orig))
    row("transcripts captured", len(sessions), len(sessions))
    row("skipped free", sum(ours.skips.values()), sum(orig.skips.values()))
    for reason in sorted(set(ours.skips) | set(orig.skips)):
        row(f"  skip: {reason}", ours.skips.get(reason, 0), orig.skips.get(reason, 0))
    row("sent to the model (calls)", len(t_ours), len(t_orig))
    row("still waiting at day 30 (cap)", ours.backlog, orig.backlog)
    row("input tokens, total", f"{in_ours:,}", f"{in_orig:,}")
    row(
        "input tokens per call, median",
        f"{statistics.median(t_ours):,.0f}" if t_ours else "-",
        f"{statistics.median(t_orig):,.0f}" if t_orig else "-",
    )
    row("input tokens per call, max", f"{max(t_ours, default=0):,}", f"{max(t_orig, default=0):,}")
    row("$ input", f"{d_ours[0]:.2f}", f"{d_orig[0]:.2f}")
    row("$ output", f"{d_ours[1]:.2f}", f"{d_orig[1]:.2f}")
    row("$ total for the month", f"{sum(d_ours):.2f}", f"{sum(d_orig):.2f}")
    row(
        "$ per call",
        f"{sum(d_ours) / max(len(t_ours), 1):.3f}",
        f"{sum(d_orig) / max(len(t_orig), 1):.3f}",
    )
    row(
        "corrections reaching the model",
        f"{ours.fixes_sent}/{ours.fixes_total}",
        f"{orig.fixes_sent}/{orig.fixes_total}",
    )
    row(
        "  late corrections (end of long sessions)",
        f"{ours.late_sent}/{ours.late_total}",
        f"{orig.late_sent}/{orig.late_total}",
    )
    width = max(len(r[0]) for r in rows)
    print(f"| {'':<{width}} | {'reflect-jobs':>14} | {'original rules':>14} | ours/orig |")
    print(f"|{'-' * (width + 2)}|{'-' * 15}:|{'-' * 15}:|{'-' * 10}:|")
    for label, a, b, ratio in rows:
        print(f"| {label:<{width}} | {a:>14} | {b:>14} | {ratio:>9} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seed", type=int, default=20261101)
    parser.add_argument("--transcripts", type=int, default=300)
    parser.add_argument("--days", type=int, default=30)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="cost-model-") as tmp:
        sessions, kinds = generate_month(
            Path(tmp), seed=args.seed, count=args.transcripts, days=args.days
        )
        ours, orig = simulate(sessions, args.days)
        print(f"$ .venv/bin/python bench/bench_cost_model.py --seed {args.seed}\n")
        report(ours, orig, sessions, kinds, args)


if __name__ == "__main__":
    main()
