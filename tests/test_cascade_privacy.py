"""Privacy filter (SPEC-drain §3.4, §9.7 tests 73–79; §10 B17: whole turns before slicing)."""

from __future__ import annotations

import pytest

from reflect_jobs.cascade import PRIVATE_MARKER, strip_private


def test_private_span_replaced_by_marker() -> None:  # 73
    out = strip_private("before <private>api key sk-123</private> after")
    assert "sk-123" not in out and PRIVATE_MARKER in out
    assert out.startswith("before ") and out.endswith(" after")


def test_two_disjoint_spans() -> None:  # 74
    out = strip_private("a <private>x</private> keep <private>y</private> b")
    assert out == f"a {PRIVATE_MARKER} keep {PRIVATE_MARKER} b"


def test_unclosed_private_fails_closed() -> None:  # 75
    assert strip_private("prefix <private>secret forever\nmore") == f"prefix {PRIVATE_MARKER}"


def test_case_and_attributes() -> None:  # 76
    out = strip_private('x <PRIVATE reason="pii">John Doe</PRIVATE > y')
    assert "John" not in out and out == f"x {PRIVATE_MARKER} y"


@pytest.mark.parametrize(
    "tag",
    [
        "claude-mem-context",
        "system-reminder",
        "system_instruction",
        "persisted-output",
        "reflect-private",
    ],
)
def test_machine_tags_removed_silently(tag: str) -> None:  # 77
    out = strip_private(f"a <{tag}>hidden</{tag}> b")
    assert out == "a  b" and PRIVATE_MARKER not in out


def test_untouched_inputs() -> None:  # 78
    assert strip_private("plain text") == "plain text"
    assert strip_private("a < b and c > d") == "a < b and c > d"
    assert strip_private("") == ""
    assert strip_private("orphan </private> close") == "orphan </private> close"


def test_nested_spans_are_depth_aware() -> None:
    text = "a <private>x <private>y</private> still secret</private> b"
    assert strip_private(text) == f"a {PRIVATE_MARKER} b"
    assert strip_private("<private>a</private>") == PRIVATE_MARKER
