"""What the heuristic writer stores, today's against the baseline, measured in the same run.

Run: .venv/bin/python bench/bench_heuristic_writer.py [--rules]

The heuristic writer (no model) turns a slice into learnings. Each group of transcripts goes
through the real path — ``prepare`` with an empty ledger, the writer, ``plan_actions``,
``write_learning`` into a temporary KB — once with today's writer and extractor and once
with the baseline ``bench/baseline_heuristic_writer.py`` (the code before issue 21 item 6,
whose sidecars are recomputed with the baseline extractor from the same notes). Groups:

* ``demo``: ``samples/*.jsonl`` (what ``make demo`` reflects on);
* ``real``: the twelve real session files in ``tests/data/transcripts/claude-code`` and
  ``codex`` (``tests/data/SOURCES.md``); only two of them carry a signal, so
* ``synthetic``: ten sessions in ``bench/data/heuristic_sessions`` with realistic corrections
  (``bench/data/heuristic_sessions/README.md``), written before the new writer was;
* ``lines``: every user line of ``tests/data/signals_labelled.jsonl`` alone as a slice,
  corrections written by another engineer for the detector (``signal: true``), and the
  ``signal: false`` ones, where any learning is a false one.

Per group: notes (distinct ids), the share whose rule passes :func:`imperative_verdict` (an
imperative sentence a person would keep: it opens with a verb or a Never/Always/Don't/Prefer/
Use form, has no first/second-person conversational marker, no quote marks, no filler, and is
one complete sentence), titles cut mid-phrase (:func:`title_verdict`), titles over 80
characters, and entities/relationships per note as the sidecar holds them. ``--rules``
prints every rule with the checker's verdict, for reading.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from baseline_heuristic_writer import (  # noqa: E402
    heuristic_actions_baseline,
    heuristic_sidecar_baseline,
)

from reflect_jobs.cascade import EmptyLedger, prepare  # noqa: E402
from reflect_jobs.kb import load_sidecar, parse_note, write_learning  # noqa: E402
from reflect_jobs.transcripts import UnreadableTranscript, read_transcript  # noqa: E402
from reflect_jobs.writer.actions import plan_actions  # noqa: E402
from reflect_jobs.writer.heuristic import heuristic_actions  # noqa: E402

DATA = ROOT / "tests" / "data"
REAL = [DATA / "transcripts" / "claude-code", DATA / "transcripts" / "codex"]
SYNTHETIC = ROOT / "bench" / "data" / "heuristic_sessions"
LABELLED = DATA / "signals_labelled.jsonl"
T = "2026-12-01T00:00:00Z"
TITLE_MAX = 80

# --- the checker: written apart from the writer, with its own word lists ----------------

#: Verbs a kept rule may open with (base form). Deliberately broad; the checker's job is to
#: reject conversation, not to police vocabulary.
VERBS = frozenset(
    """
    accept add adjust align allow annotate append apply ask assert audit avoid await back
    batch benchmark bind block bound break bubble build bump cache call cap catch change
    check choose clean clear close collect commit compare compile configure confirm consider
    copy create cut debounce declare default defer define delete deploy describe destroy
    disable document double drop dump edit emit enable encode enforce ensure escape evict
    exclude execute expect explain export extract fail fetch filter fix flush follow force
    format freeze gate generate give group guard handle hash hide hold ignore import include
    index initialise initialize inject inline insert install invalidate isolate keep kill label
    launch
    leave let limit link lint list load lock log look make mark measure merge migrate mock
    move name normalise normalize note notify open order pack page parse pass patch pause pin
    place poll prefer prefix prepare print profile prune publish pull push put query queue
    quote raise read rebase rebuild record reduce refactor refresh register reject release
    reload remove rename render reorder repeat replace report request require reset resolve
    restart restore retry return reuse revert review rewrite roll rotate run sanitise
    sanitize save scope search seed select send separate serialise serialize set share ship
    show shut sign skip sleep sort specify split squash stage start stick stop store strip
    stub submit swap switch sync tag take test throttle time trace track treat trigger trim
    truncate try turn type unpin unset update upgrade upload use validate vendor verify wait
    warn watch wrap write yield
    """.split()  # noqa: SIM905 - a word list reads better than 300 quoted strings
)
_RULE_FORMS = re.compile(
    r"^(?:never|always|don't|do not|prefer|use|avoid|only)\b", re.IGNORECASE | re.UNICODE
)
_PERSON = re.compile(
    r"(?<![\w/.-])(?:I|I'm|I've|I'd|I'll|me|my|mine|you|you're|you've|you'll|you'd|your|"
    r"yours|yourself)(?![\w/'-])",
    re.IGNORECASE,
)
_FILLER = re.compile(
    r"\b(?:please|thanks|thank you|lol|ugh|wtf|okay|ok|hmm|sorry|already told|as i said)\b",
    re.IGNORECASE,
)
_DANGLING = frozenset(
    """
    the a an to and or of with for from in on at by as that which but if when then than into
    onto via per not no is are was be
    """.split()  # noqa: SIM905
)


def imperative_verdict(rule: str) -> tuple[bool, str]:
    """Whether ``rule`` reads as an imperative sentence a person would keep, and why not.

    Args:
        rule: A stored rule.

    Returns:
        ``(True, "")`` or ``(False, reason)``.
    """
    text = " ".join(rule.split())
    if not text:
        return False, "empty"
    words = text.split()
    first = words[0].strip("`*_").lower().replace("\u2019", "'")
    if not text[0].isupper():
        return False, "not capitalised"
    if not text.endswith("."):
        return False, "no final period"
    if text.endswith("?.") or "?" in text:
        return False, "a question"
    if first not in VERBS and not _RULE_FORMS.match(text.replace("\u2019", "'")):
        return False, f"opens with {words[0]!r}, not a verb"
    if _PERSON.search(text):
        return False, "first/second person"
    if _FILLER.search(text):
        return False, "conversational filler"
    if text[0] in "\"'\u201c\u2018" or any(q in text for q in "\u201c\u201d"):
        return False, "quote marks"
    if "\u2026" in text:
        return False, "an ellipsis"
    if len(words) < 2 or words[-1].rstrip(".").lower() in _DANGLING:
        return False, "incomplete"
    for a, b in ("()", "[]"):
        if text.count(a) != text.count(b):
            return False, "unbalanced brackets"
    if text.count("`") % 2:
        return False, "unbalanced backticks"
    if len(text) > 300:
        return False, "over 300 chars"
    return True, ""


def title_verdict(title: str, rule: str) -> str:
    """Why ``title`` is cut mid-phrase, or ``""`` when it ends at a word/clause boundary.

    A title that is a prefix of its rule must stop where the rule has a boundary
    (punctuation or the rule's end); any title must not end on a dangling word, an open
    bracket or backtick, or an ellipsis.

    Args:
        title: The stored title.
        rule: The stored rule.

    Returns:
        The reason, or an empty string.
    """
    t = " ".join(title.split())
    if not t:
        return "empty"
    if "\u2026" in t or t.endswith("..."):
        return "ellipsis"
    last = t.split()[-1].lower().strip(",;:")
    if last in _DANGLING:
        return f"ends on {last!r}"
    for a, b in ("()", "[]"):
        if t.count(a) != t.count(b):
            return "open bracket"
    if t.count("`") % 2:
        return "open backtick"
    r = " ".join(rule.split())
    if r.lower().startswith(t.lower()) and len(r) > len(t):
        rest = r[len(t) :]
        if not re.match(r"^\s*(?:[.;:,!?\u2014\u2013)]|\s-\s|$)", rest):
            return f"cut before {rest.strip()[:24]!r}"
    return ""


# --- running the writers -------------------------------------------------------------------


@dataclass
class Note:
    """One stored note as a reader sees it."""

    source: str
    title: str
    rule: str
    entities: int
    relationships: int
    evidence: str = ""
    names: tuple[str, ...] = ()


@dataclass
class Run:
    """What one writer stored for one group."""

    notes: dict[str, Note] = field(default_factory=dict)
    slices: int = 0


Writer = Callable[[str], list[dict]]


def store(run: Run, kb: Path, source: str, slice_text: str, writer: Writer, baseline: bool) -> None:
    """Write what ``writer`` makes of ``slice_text`` into ``kb`` and record each note.

    Args:
        run: Where the notes are recorded (by id: the same learning twice is one note).
        kb: The temporary KB.
        source: A name for the transcript or line.
        slice_text: The slice.
        writer: ``heuristic_actions`` or the baseline's.
        baseline: Recompute each sidecar with the baseline extractor.
    """
    run.slices += 1
    plan = plan_actions(writer(slice_text), allowed_ids=set())
    raw = {a["learning"]["title"]: a["learning"] for a in writer(slice_text)}
    for learning in plan.creates:
        nf = write_learning(kb, learning, created=T, updated=T, source_path=source, session_id="b")
        side = (
            heuristic_sidecar_baseline(parse_note(nf.path))
            if baseline
            else load_sidecar(nf.sidecar_path)
        )
        evidence = str(raw.get(learning["title"], {}).get("evidence", ""))
        run.notes[nf.id] = Note(
            source,
            learning["title"],
            learning["rule"],
            len(side["entities"]),
            len(side["relationships"]),
            evidence,
            tuple(e["name"] for e in side["entities"]),
        )


def transcript_slices(paths: list[Path]) -> tuple[list[tuple[str, str]], int]:
    """``(name, slice)`` of every path ``prepare`` would reflect on, and how many were read.

    Args:
        paths: Session files.

    Returns:
        The slices and the number of readable files.
    """
    out, readable = [], 0
    for path in paths:
        try:
            t = read_transcript(path)
        except UnreadableTranscript:
            continue
        readable += 1
        prepared = prepare(t, EmptyLedger(), source_name=path.name)
        if prepared.action == "reflect":
            out.append((path.name, prepared.slice_text))
    return out, readable


def groups() -> dict[str, tuple[list[tuple[str, str]], str]]:
    """Every group's slices and a one-line description."""
    rows = [json.loads(ln) for ln in LABELLED.read_text(encoding="utf-8").splitlines()]
    out: dict[str, tuple[list[tuple[str, str]], str]] = {}
    for name, paths in (
        ("demo", sorted((ROOT / "samples").glob("*.jsonl"))),
        ("real", sorted(p for d in REAL for p in d.glob("*.jsonl"))),
        ("synthetic", sorted(SYNTHETIC.glob("*.jsonl"))),
    ):
        slices, readable = transcript_slices(paths)
        out[name] = (slices, f"{readable} files, {len(slices)} with a slice")
    for name, want in (("lines+", True), ("lines-", False)):
        picked = [
            (r["source"], r["text"]) for r in rows if r["role"] == "user" and r["signal"] is want
        ]
        label = "correction" if want else "non-correction"
        out[name] = (picked, f"{len(picked)} labelled {label} user lines")
    return out


def summary(run: Run) -> dict[str, str]:
    """The printed figures of one run."""
    notes = list(run.notes.values())
    n = len(notes)
    if not n:
        return {"notes": "0"}
    ok = sum(imperative_verdict(x.rule)[0] for x in notes)
    cut = sum(bool(title_verdict(x.title, x.rule)) for x in notes)
    long = sum(len(x.title) > TITLE_MAX for x in notes)
    ents = [x.entities for x in notes]
    rels = [x.relationships for x in notes]
    return {
        "notes": str(n),
        "imperative": f"{ok}/{n} = {ok / n:.0%}",
        "titles cut": f"{cut}/{n}",
        "titles >80": f"{long}/{n}",
        "entities": f"{statistics.mean(ents):.1f} ({min(ents)}–{max(ents)})",
        "entities 3–8": f"{sum(3 <= e <= 8 for e in ents)}/{n}",
        "no entities": f"{sum(e == 0 for e in ents)}/{n}",
        "relationships": f"{statistics.mean(rels):.1f} ({min(rels)}–{max(rels)})",
    }


def main() -> int:
    """Print the table (and with ``--rules`` every rule)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rules", action="store_true", help="print every rule and verdict")
    args = parser.parse_args()
    runs: dict[tuple[str, str], Run] = {}
    described = groups()
    with tempfile.TemporaryDirectory() as tmp:
        for group, (slices, _) in described.items():
            for which, writer, baseline in (
                ("before", heuristic_actions_baseline, True),
                ("after", heuristic_actions, False),
            ):
                run = runs.setdefault((group, which), Run())
                kb = Path(tmp) / f"{group}-{which}"
                for source, text in slices:
                    store(run, kb, source, text, writer, baseline)
    keys = list(summary(runs[("demo", "before")]).keys())
    print(f"{'group':<11} {'':<7} " + " ".join(f"{k:>16}" for k in keys))
    for group, (_, what) in described.items():
        for which in ("before", "after"):
            s = summary(runs[(group, which)])
            print(f"{group:<11} {which:<7} " + " ".join(f"{s.get(k, '-'):>16}" for k in keys))
        print(f"{'':<11} ({what})")
    if args.rules:
        for group in described:
            for which in ("before", "after"):
                print(f"\n## {group} — {which}")
                for note in runs[(group, which)].notes.values():
                    ok, why = imperative_verdict(note.rule)
                    cut = title_verdict(note.title, note.rule)
                    print(f"  [{'ok' if ok else 'NO: ' + why}] {note.rule}")
                    print(f"      title: {note.title}{'   <-- ' + cut if cut else ''}")
                    print(
                        f"      {note.entities} entities {list(note.names)}, "
                        f"{note.relationships} relationships  ({note.source})"
                    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
