"""Who wrote each slice line (cascade/origins.py): the map prepare keeps beside the slice."""

from __future__ import annotations

import pytest

from reflect_jobs.cascade import prepare as cascade_prepare
from reflect_jobs.cascade.model import EmptyLedger
from reflect_jobs.cascade.origins import decode, encode, strip_codes, turn_line_origins
from reflect_jobs.cascade.slicing import bounded_view, build_slice
from reflect_jobs.transcripts.model import Transcript, Turn


def test_roles_fences_and_quotes_give_the_codes():
    turns = [
        Turn(0, "user", "No, use pnpm.\n```\nnpm ERR! lockfile\n```\nfix it"),
        Turn(1, "assistant", "Done.\n> README: always run make\nok"),
    ]
    assert "".join(turn_line_origins(turns)) == "ptttp" + "ata"


@pytest.mark.parametrize("codes", ["", "p", "ppp-aat", "-" * 5000 + "p" * 3])
def test_encode_decode_round_trip(codes):
    assert decode(encode(codes)) == codes


@pytest.mark.parametrize("junk", [None, 5, "p", "x3", "p3q", "3p", "p3 a2", {"p": 3}])
def test_a_damaged_map_decodes_to_nothing(junk):
    assert decode(junk) == ""


def test_a_huge_count_is_capped():
    assert len(decode("p999999999999", limit=100)) == 100


def test_strip_codes_follows_the_stripped_text():
    text = "  \n\nabc\n  def  \n\n"
    assert strip_codes(text, "12345-") == "34"


def test_slice_chunks_carry_their_lines_codes():
    lines = [f"line {i}" for i in range(20)]
    codes = ["p" if i % 2 else "a" for i in range(20)]
    from reflect_jobs.cascade.model import Signal

    sig = Signal(10, "HIGH", "correction", "Tools", "line 9", "user")
    piece = build_slice(lines, [sig], context=2, origins=codes)
    (chunk,) = piece.chunks
    assert chunk.text.split("\n") == lines[7:12]
    assert chunk.origins == "".join(codes[7:12])
    view = bounded_view(lines, max_chars=60, origins=codes)
    for c in view.chunks:
        assert len(c.origins) == c.text.count("\n") + 1
        assert all(
            codes[lines.index(line)] == code
            for line, code in zip(c.text.split("\n"), c.origins, strict=True)
        )


def test_prepared_origins_align_with_the_whole_slice_including_context_and_revision():
    turns = [
        Turn(i, "user" if i % 2 == 0 else "assistant", f"filler number {i}") for i in range(12)
    ]
    turns.append(Turn(12, "user", "No, never commit the generated files."))
    turns.append(Turn(13, "assistant", "Right, I will add them to .gitignore."))
    prepared = cascade_prepare(Transcript("claude", turns=turns), EmptyLedger(), source_name="t")
    lines = prepared.slice_text.split("\n")
    assert len(prepared.slice_origins) == len(lines)
    for line, code in zip(lines, prepared.slice_origins, strict=True):
        if line.startswith("#") or line in ("", "…"):
            assert code == "-"
        elif "never commit" in line:
            assert code == "p"
        elif ".gitignore" in line:
            assert code == "a"
