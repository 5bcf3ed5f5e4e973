"""The per-file transcript report and its held-out scoring (issue item 9).

Pins what the real and format-built fixtures are (how many records each has, that the
non-interactive ones skip as ``skip_not_interactive``) and that the held-out labels stay
matched to turns the readers keep; the precision/recall figures themselves are printed by
``bench/report_transcripts.py``, not asserted.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

import report_transcripts as report  # noqa: E402


def test_every_labelled_file_is_read_and_every_label_matches_a_kept_turn() -> None:
    transcripts = {}
    for path in report.session_files():
        row, t = report.file_row(path)
        assert t is not None, row.outcome
        transcripts[row.name] = t
    scores, notes = report.score_heldout(transcripts)
    assert not [n for n in notes if n.startswith(("MISSING", "unmatched"))], notes
    labels = json.loads(report.LABELS.read_text())["files"]
    assert scores["all"].tp + scores["all"].fp + scores["all"].fn + scores["all"].tn == sum(
        len(e["turns"]) for e in labels.values()
    )


def test_non_interactive_fixtures_skip_for_free() -> None:
    labels = json.loads(report.LABELS.read_text())["files"]
    skipped = [n for n, e in labels.items() if e["outcome"] == "skip_not_interactive"]
    assert len(skipped) == 6
    for name in skipped:
        row, _ = report.file_row(report.DATA / name)
        assert row.outcome == "skip_not_interactive", name


def test_real_headless_runs_are_recognised_by_their_records() -> None:
    for name, why in [
        ("claude-code/agent-history-cc2.1.152-headless-sdk-cli.jsonl", "entrypoint sdk-cli"),
        ("codex/agent-history-codex0.135-exec.jsonl", "originator codex_exec"),
    ]:
        _, t = report.file_row(report.DATA / name)
        assert t is not None and why in t.not_interactive, name


def test_real_codex_prefix_reads_the_event_copy_and_the_interruption() -> None:
    row, t = report.file_row(report.DATA / "codex" / "agentcmd-codex0.40-vscode-prefix.jsonl")
    assert (row.records, row.user_turns) == (6, 2)
    assert t is not None and t.turns[0].text.startswith("Updating a team")  # IDE context gone
    assert row.signals["interruption"] == 1


def test_report_prints_a_row_per_file(capsys) -> None:  # type: ignore[no-untyped-def]
    assert report.main() == 0
    out = capsys.readouterr().out
    for path in report.session_files():
        assert str(path.relative_to(report.DATA)) in out
    assert "held-out real" in out and "tuned-on" in out
