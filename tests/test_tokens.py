"""Code-aware tokens: what a query and a note are reduced to before the lexical index sees them."""

from __future__ import annotations

import time

from reflect_jobs.index.tokens import (
    MAX_TERMS,
    index_text,
    query_terms,
    split_word,
    squash,
)


def test_path_is_split_and_kept_whole() -> None:
    t = query_terms("test/js/bun/http/serve.test.ts fails")
    assert {"serve", "http", "fails", "ts"} <= set(t.words)
    assert "testjsbunhttpservetestts" in t.idents  # the whole path
    assert "servetestts" in t.idents  # its last component


def test_slashed_pair_becomes_two_words_and_an_identifier() -> None:
    t = query_terms("try/except around the call")
    assert t.words[:2] == ("try", "except")
    assert "tryexcept" in t.idents
    assert "the" not in t.words and "around" not in t.idents


def test_camel_and_snake_case() -> None:
    assert split_word("getUserName") == ["get", "user", "name"]
    assert split_word("HTTPServer") == ["http", "server"]
    assert split_word("user_id") == ["user", "id"]
    assert split_word("größeWert") == ["größe", "wert"]
    assert split_word("e2e") == ["e2e"] and split_word("B950") == ["b950"]
    t = query_terms("getUserName returns None")
    assert {"getusername", "user", "name", "returns", "none"} <= set(t.words)
    assert "getusername" in t.idents


def test_a_camel_cased_name_is_not_its_parts() -> None:
    """GitHub is not about git: split, a prompt naming it matched every git learning."""
    t = query_terms("GitHub-hosted runners build the macOS and JavaScript bundles")
    assert {"github", "macos", "javascript", "hosted"} <= set(t.words)
    assert not {"git", "hub", "mac", "os", "java", "script"} & set(t.words)
    assert split_word("GitHubClient") == ["github", "client"]
    assert split_word("PostgreSQLDriver") == ["postgresql", "driver"]
    assert split_word("getHubName") == ["get", "hub", "name"]  # no name spelled: split as ever


def test_stop_words_and_punctuation_give_nothing() -> None:
    assert not query_terms("how do I do it with the")
    assert not query_terms("?! ... --- /// ")
    assert not query_terms("")


def test_squash_and_index_text() -> None:
    assert squash("foo_bar.py") == "foobarpy"
    assert squash("std::sync::Mutex") == "stdsyncmutex"
    extra = index_text("Call getUserName from src/foo_bar.py").split()
    assert {"getusername", "get", "user", "name", "srcfoobarpy", "foobarpy"} <= set(extra)


def test_huge_query_is_bounded() -> None:
    query = " ".join(f"word{i}" for i in range(20_000))  # ~200 KB
    start = time.perf_counter()
    t = query_terms(query)
    assert time.perf_counter() - start < 0.5
    assert len(t.words) <= MAX_TERMS and t.words[0] == "word0"


def test_the_hook_path_can_import_it_standard_library_only() -> None:
    import subprocess
    import sys

    code = (
        "import sys, reflect_jobs.index.tokens as t\n"
        "print(sorted(m for m in sys.modules if m.startswith('reflect_jobs')))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "['reflect_jobs', 'reflect_jobs.index', 'reflect_jobs.index.tokens']"


def test_one_stop_word_list_for_search_and_prompt_recall() -> None:
    """Search and per-prompt recall read the same words of the same text: a conversational
    word or a contraction's stem is dropped by both, and the terms they keep agree."""
    from reflect_jobs.recall import relevance

    prompt = "Hey, please don't make the new retryUntil thing flaky; it's still failing"
    words = set(query_terms(prompt).words)
    assert {"retryuntil", "retry", "flaky", "failing"} <= words
    assert not words & {"hey", "please", "don", "make", "new", "thing", "still"}
    assert set(relevance.terms(prompt)) <= words | set(query_terms(prompt).idents) | {"retryuntil"}
    assert not hasattr(relevance, "STOPWORDS")  # one owner: index/tokens.STOP_WORDS
