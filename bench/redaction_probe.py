"""What issue 21 measures of the redaction engine, as pure functions over the repository's data.

Shared by ``bench/bench_redact.py`` (which prints the figures) and
``tests/test_redaction_fp.py`` (which asserts them), so the benchmark and the tests cannot
drift apart. Three measures, each through the path the product takes:

* **False positives on real transcripts.** The files of ``tests/data/transcripts/fp-corpus``
  and the real ones in ``claude-code/`` and ``codex/`` hold no credential, so every
  ``[REDACTED:`` tag the engine adds to them is a false positive. Dialogue lines are the text
  lines of the person/assistant turns as ``read_transcript`` yields them, redacted as
  ``prepare`` does (``cascade.prepare.filter_turns``); the raw JSONL lines are redacted one by
  one as ``redact_secrets`` sees any other text.
* **Credentials caught.** Each credential of ``tests/secret_corpus.py`` and
  ``tests/secret_corpus_heldout.py`` goes (1) into a Claude Code transcript record as a
  person's message, read back by ``read_transcript`` and redacted by ``filter_turns``; (2) as
  that raw JSONL line through ``redact_secrets``; (3) echoed by a model into its answer
  (``{"actions": [{"action": "CREATE", "learning": {…}}]}``) through ``redact_structured``,
  which the write stage applies before anything is recorded. A credential is caught when none
  of its forms (as is, JSON-escaped once or twice) is left.
* **Look-alikes kept and field integrity.** A look-alike must come back from each path
  unchanged, and a clean model answer (``CLEAN_ANSWER``) must come back verbatim, field by field.
"""

from __future__ import annotations

import json
import re
import sys
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
for _p in (ROOT, ROOT / "tests"):
    if str(_p) not in sys.path:
        sys.path.insert(0, str(_p))

from secret_corpus import PEM, PEM_SECRET, SECRETS  # noqa: E402
from secret_corpus_heldout import (  # noqa: E402
    CLEAN_ANSWER,
    NOT_SECRETS,
    SECRETS_HELDOUT,
)

from reflect_jobs.cascade.prepare import filter_turns  # noqa: E402
from reflect_jobs.redaction import redact_secrets, redact_structured  # noqa: E402
from reflect_jobs.transcripts import read_transcript  # noqa: E402

TRANSCRIPTS = ROOT / "tests" / "data" / "transcripts"
#: The real transcripts (no constructed or synthetic file): the false-positive corpus.
FP_DIRS = (TRANSCRIPTS / "fp-corpus", TRANSCRIPTS / "claude-code", TRANSCRIPTS / "codex")
TAG = "[REDACTED:"
_TAG_RX = re.compile(r"\[REDACTED:[A-Za-z0-9_]*\]")
CONTEXT = 60


def fp_corpus_files() -> list[Path]:
    """Every real transcript file of the false-positive corpus, in a stable order."""
    return sorted(p for d in FP_DIRS for p in d.rglob("*.jsonl"))


@dataclass
class FalsePositive:
    """One tag the engine put into text that holds no credential."""

    file: str
    line: int  # 1-based: dialogue line of the file, or JSONL record line
    context: str  # CONTEXT characters either side of the tag, newlines shown as ⏎

    def show(self) -> str:
        return f"{self.file}:{self.line}: …{self.context}…"


@dataclass
class FpScan:
    """Tags added over a set of lines (all of them false positives on this corpus)."""

    files: int = 0
    lines: int = 0
    tags: int = 0
    samples: list[FalsePositive] = field(default_factory=list)

    @property
    def per_1000(self) -> float:
        return 1000 * self.tags / self.lines if self.lines else 0.0


def _new_tags(before: str, after: str, name: str, first_line: int) -> list[FalsePositive]:
    """The tags ``after`` has beyond those already in ``before``, each with its context."""
    extra = after.count(TAG) - before.count(TAG)
    if extra <= 0:
        return []
    found = []
    for m in _TAG_RX.finditer(after):
        lo, hi = max(0, m.start() - CONTEXT), min(len(after), m.end() + CONTEXT)
        line = first_line + after.count("\n", 0, m.start())
        found.append(FalsePositive(name, line, after[lo:hi].replace("\n", "⏎")))
    return found[-extra:] if len(found) > extra else found


def scan_dialogue(paths: Iterable[Path]) -> FpScan:
    """Tags ``prepare``'s redaction adds to the dialogue turns of ``paths``."""
    scan = FpScan()
    for path in paths:
        transcript = read_transcript(path)
        filtered, _ = filter_turns(transcript.turns)
        scan.files += 1
        line = 1
        for before, after in zip(transcript.turns, filtered, strict=True):
            found = _new_tags(before.text, after.text, path.name, line)
            scan.tags += len(found)
            scan.samples += found
            line += before.text.count("\n") + 1
        scan.lines += line - 1
    return scan


def scan_raw(paths: Iterable[Path]) -> FpScan:
    """Tags ``redact_secrets`` adds to the raw JSONL lines of ``paths``, line by line."""
    scan = FpScan()
    for path in paths:
        scan.files += 1
        with open(path, encoding="utf-8") as fh:
            for n, line in enumerate(fh, start=1):
                scan.lines += 1
                if not line.strip():
                    continue
                found = _new_tags(line, redact_secrets(line)[0], path.name, n)
                scan.tags += len(found)
                scan.samples += found
    return scan


# --- credentials ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Case:
    """One credential as it appears, with the look-alike that goes with it."""

    corpus: str  # "existing" | "held-out"
    name: str
    secret: str
    text: str
    lookalike: str


def cases() -> list[Case]:
    """Every credential of both corpora (the existing PEM block included)."""
    out = [Case("existing", n, s, t.format(s), look) for n, s, t, look in SECRETS]
    out.append(Case("existing", "pem_block", PEM_SECRET, f"Don't commit the key:\n{PEM}", ""))
    out += [Case("held-out", n, s, t.format(s), look) for n, s, t, look in SECRETS_HELDOUT]
    return out


def lookalikes() -> list[tuple[str, str]]:
    """``(name, text)`` of every look-alike: one per credential entry, then ``NOT_SECRETS``."""
    out = [(f"{c.corpus}:{c.name}", c.lookalike) for c in cases() if c.lookalike]
    out += [(f"not_secret:{i}", text) for i, text in enumerate(NOT_SECRETS)]
    return out


def forms(secret: str) -> set[str]:
    """How a secret can stand in text: as is, JSON-escaped once (a JSONL line, an answer),
    twice (JSON inside a JSON string)."""
    once = json.dumps(secret, ensure_ascii=False)[1:-1]
    twice = json.dumps(once, ensure_ascii=False)[1:-1]
    return {secret, once, twice}


def survives(secret: str, texts: Iterable[str]) -> bool:
    """Whether any form of ``secret`` is left in any of ``texts``."""
    blob = "\0".join(texts)
    return any(f in blob for f in forms(secret))


def claude_record(text: str, i: int = 0) -> dict[str, Any]:
    """A Claude Code user record (the shape ``claude.parse_record`` reads) saying ``text``."""
    return {
        "parentUuid": None,
        "isSidechain": False,
        "userType": "external",
        "cwd": "/home/dev/app",
        "sessionId": "5b1c0d3e-2f4a-4b6c-8d9e-0f1a2b3c4d5e",
        "version": "2.1.14",
        "gitBranch": "main",
        "type": "user",
        "message": {"role": "user", "content": text},
        "uuid": f"00000000-0000-4000-8000-{i:012d}",
        "timestamp": "2026-12-03T10:00:00.000Z",
    }


def jsonl_line(text: str, i: int = 0) -> str:
    """The raw transcript line of ``text``, serialised as Claude Code writes it."""
    return json.dumps(claude_record(text, i), ensure_ascii=False, separators=(",", ":"))


def dialogue_round_trip(texts: list[str]) -> list[tuple[str | None, str | None]]:
    """Each text as a person's turn of one real transcript file, read by ``read_transcript``
    and redacted by ``filter_turns``: ``(text as read, text as redacted)``, or
    ``(None, None)`` when the reader kept no turn of that record.

    The file is written to a temporary directory: a transcript is read from a file in the
    product, and reading it any other way would skip part of the path being measured.
    """
    with tempfile.TemporaryDirectory(prefix="redaction-probe-") as tmp:
        path = Path(tmp) / "probe.jsonl"
        ends, data = [], b""
        for i, text in enumerate(texts):
            data += (jsonl_line(text, i) + "\n").encode()
            ends.append(len(data))
        path.write_bytes(data)
        transcript = read_transcript(path, harness="claude")
    filtered, _ = filter_turns(transcript.turns)
    by_end = {
        t.end_offset: (t.text, f.text) for t, f in zip(transcript.turns, filtered, strict=True)
    }
    return [by_end.get(end, (None, None)) for end in ends]


def echoed_answer(text: str) -> dict[str, Any]:
    """A model answer that echoes ``text`` into a learning's fields (and, when ``text`` is a
    JSON object, also as fields of that learning)."""
    learning: dict[str, Any] = {
        "title": "Never paste deploy credentials into a session",
        "category": "Security",
        "key_insight": "Credentials pasted into a chat end up in the transcript.",
        "fix": text,
        "rule": "Load credentials from the secret store at run time.",
        "tags": ["security"],
        "entities": ["Vault"],
        "body": f"## Context\n{text}",
    }
    try:
        obj = json.loads(text)
    except ValueError:
        obj = None
    if isinstance(obj, dict):
        learning.update(obj)
    return {"actions": [{"action": "CREATE", "reason": "seen", "learning": learning}]}


def _carried(text: str) -> set[str]:
    """The learning fields :func:`echoed_answer` puts ``text`` (or its own fields) into."""
    try:
        obj = json.loads(text)
    except ValueError:
        obj = None
    return {"fix", "body"} | (set(obj) if isinstance(obj, dict) else set())


def _carried_same(text: str, answer: dict[str, Any], out: str) -> bool:
    """Whether the fields that carry ``text`` came back unchanged (the answer's other fields
    are the field-integrity check's business, not this look-alike's)."""
    try:
        got = json.loads(out)["actions"][0]["learning"]
    except (ValueError, KeyError, IndexError, TypeError):
        return False
    sent = answer["actions"][0]["learning"]
    return all(got.get(k) == sent[k] for k in _carried(text))


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in (*_strings(k), *_strings(v))]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


@dataclass
class CaseResult:
    """Where one credential was caught (True), missed (False) or never read (None)."""

    case: Case
    dialogue: bool | None
    raw: bool
    echo: bool
    dialogue_out: str | None
    raw_out: str
    echo_out: str


def check_cases(items: list[Case]) -> list[CaseResult]:
    """Run every case through the three paths."""
    dialogue = dialogue_round_trip([c.text for c in items])
    results = []
    for i, (case, (before, after)) in enumerate(zip(items, dialogue, strict=True)):
        read = before is not None and survives(case.secret, [before])
        caught_dialogue = (not survives(case.secret, [after or ""])) if read else None
        raw_out = redact_secrets(jsonl_line(case.text, i))[0]
        answer = json.dumps(echoed_answer(case.text), ensure_ascii=False)
        echo_out = redact_structured(answer)[0]
        try:
            decoded = _strings(json.loads(echo_out))
        except ValueError:
            decoded = []
        results.append(
            CaseResult(
                case,
                caught_dialogue,
                not survives(case.secret, [raw_out]),
                not survives(case.secret, [echo_out, *decoded]),
                after,
                raw_out,
                echo_out,
            )
        )
    return results


@dataclass
class LookalikeResult:
    """Whether one look-alike came back unchanged from each path."""

    name: str
    text: str
    dialogue: bool
    raw: bool
    echo: bool
    dialogue_out: str | None
    raw_out: str
    echo_out: str


def check_lookalikes(items: list[tuple[str, str]]) -> list[LookalikeResult]:
    """Run every look-alike through the three paths."""
    dialogue = dialogue_round_trip([text for _, text in items])
    results = []
    for i, ((name, text), (before, after)) in enumerate(zip(items, dialogue, strict=True)):
        line = jsonl_line(text, i)
        raw_out = redact_secrets(line)[0]
        answer = echoed_answer(text)
        echo_out = redact_structured(json.dumps(answer, ensure_ascii=False))[0]
        echo_same = _carried_same(text, answer, echo_out)
        results.append(
            LookalikeResult(
                name,
                text,
                before is not None and after == before,
                raw_out == line,
                echo_same,
                after,
                raw_out,
                echo_out,
            )
        )
    return results


def changed_fields(before: Any, after: Any, path: str = "") -> list[tuple[str, Any, Any]]:
    """``(path, before, after)`` for every leaf that differs between two decoded answers."""
    if isinstance(before, dict) and isinstance(after, dict):
        out = []
        for key in before.keys() | after.keys():
            out += changed_fields(before.get(key), after.get(key), f"{path}.{key}" if path else key)
        return sorted(out, key=lambda x: x[0])
    if isinstance(before, list) and isinstance(after, list) and len(before) == len(after):
        return [
            c
            for i, (b, a) in enumerate(zip(before, after, strict=True))
            for c in changed_fields(b, a, f"{path}[{i}]")
        ]
    return [] if before == after else [(path, before, after)]


def field_integrity(answer: dict[str, Any] | None = None) -> tuple[int, list[tuple[str, Any, Any]]]:
    """The clean answer through ``redact_structured``: ``(leaf count, changed leaves)``."""
    answer = CLEAN_ANSWER if answer is None else answer
    out = redact_structured(json.dumps(answer, ensure_ascii=False))[0]
    try:
        decoded = json.loads(out)
    except ValueError:
        return _leaves(answer), [("<answer>", "valid JSON", out[:200])]
    return _leaves(answer), changed_fields(answer, decoded)


def _leaves(value: Any) -> int:
    if isinstance(value, dict):
        return sum(_leaves(v) for v in value.values())
    if isinstance(value, list):
        return sum(_leaves(v) for v in value)
    return 1


def excerpt(secret: str, text: str | None, width: int = CONTEXT) -> str:
    """``width`` characters either side of where a form of ``secret`` is left in ``text``."""
    if not text:
        return ""
    for form in sorted(forms(secret), key=len, reverse=True):
        at = text.find(form)
        if at >= 0:
            lo, hi = max(0, at - width), min(len(text), at + len(form) + width)
            return text[lo:hi].replace("\n", "⏎")
    return text[: 2 * width].replace("\n", "⏎")


def first_difference(before: str, after: str | None, width: int = CONTEXT) -> str:
    """``after`` around the first place it differs from ``before`` (what redaction changed)."""
    if after is None:
        return "<no turn read>"
    i = next(
        (k for k, (a, b) in enumerate(zip(before, after, strict=False)) if a != b),
        min(len(before), len(after)),
    )
    return after[max(0, i - width) : i + width].replace("\n", "⏎")
