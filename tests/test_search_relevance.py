"""Search finds what is asked, scoped before it is cut, and says "nothing" when nothing fits.

Every test writes learnings, indexes them with the product's reindex, and compares what
``reflect-jobs search --json`` answers with what went in (issue 25 item 3).
"""

from __future__ import annotations

import json
import socket
import threading
from pathlib import Path

import pytest
from click.testing import CliRunner
from recall_support import add_note, learning, make_repo, reindex

from reflect_jobs.cli import main
from reflect_jobs.index.search import BELOW_FLOOR, NO_TERMS

SHOP = "https://github.com/acme/shop.git"
SHOP_KEY = "github.com/acme/shop"


@pytest.fixture
def cli(env, monkeypatch):  # type: ignore[no-untyped-def]
    """``reflect-jobs search … --json`` in-process; returns (results, reason, stderr)."""
    for key, value in env.items():
        monkeypatch.setenv(key, value)

    def run(*args: str) -> tuple[list[dict], str | None, str]:
        result = CliRunner().invoke(main, ["search", *args, "--json"], catch_exceptions=False)
        assert result.exit_code == 0, result.output
        data = json.loads(result.stdout)
        return data["results"], data["reason"], result.stderr

    return run


def _ids(results: list[dict]) -> list[str]:
    return [h["id"] for h in results]


def _kb(env) -> dict[str, str]:  # type: ignore[no-untyped-def]
    """A small KB where each target shares words with several distractors."""
    notes = {
        "path": learning(
            "Debugger runs need a longer timeout",
            "Run test/js/bun/http/serve.test.ts with --timeout 0 when a debugger is attached.",
            scope="global",
        ),
        "try": learning(
            "No try/except around the whole request handler",
            "Catch the specific exception; a handler-wide try/except hides KeyError.",
            scope="global",
        ),
        "camel": learning(
            "getUserName returns None for deleted accounts",
            "Check for None before formatting the display label of an account.",
            scope="global",
        ),
        "d1": learning(
            "Run the whole test suite before pushing",
            "Use bun test in the js directory; http tests need a free port.",
            scope="global",
        ),
        "d2": learning(
            "Try the cache before the network",
            "Read the request from the local cache first; except on CI, where it is cold.",
            scope="global",
        ),
        "d3": learning(
            "User names must be unique",
            "The name column has a unique index; get a fresh name on conflict.",
            scope="global",
        ),
        "d4": learning(
            "Serve static files from the CDN",
            "The test server serves http only; the CDN serves static assets in production.",
            scope="global",
        ),
    }
    ids = {key: add_note(env.kb, item).id for key, item in notes.items()}
    reindex(env.kb)
    return ids


def test_a_path_a_slashed_pair_and_a_camel_case_identifier_find_their_learning_first(env, cli):
    ids = _kb(env)
    for query, key in (
        ("test/js/bun/http/serve.test.ts", "path"),
        ("serve.test.ts hangs", "path"),
        ("try/except", "try"),
        ("getUserName", "camel"),
    ):
        for mode in ("lexical", "hybrid"):
            results, reason, _ = cli(query, "--mode", mode)
            assert _ids(results)[:1] == [ids[key]], (query, mode, results)
            assert reason is None


def test_irrelevant_or_empty_queries_answer_nothing_and_say_why(env, cli):
    _kb(env)
    for query in ("banana bread recipe", "capital of australia"):
        results, reason, _ = cli(query)
        assert results == [] and reason == BELOW_FLOOR or reason.startswith("no stored"), query
    for query in ("how do I do it with the", "?! ... --- ///", "   "):
        results, reason, _ = cli(query, "--mode", "hybrid")
        assert (results, reason) == ([], NO_TERMS), query


def test_a_huge_query_is_bounded_and_still_answers(env, cli):
    ids = _kb(env)
    query = "getUserName returns None; " * 4200  # ~105 KB, a pasted log repeating itself
    for mode in ("lexical", "hybrid"):
        results, _, _ = cli(query, "--mode", mode)
        assert _ids(results)[:1] == [ids["camel"]]
    results, reason, _ = cli("banana " * 20000, "--mode", "lexical")
    assert results == [] and reason


def test_one_plain_word_of_a_longer_query_is_a_chance_match_not_an_answer(env, cli):
    """A note sharing one rare word with a three-word query ("systemd unit" for "write unit
    test") clears a coverage floor on that word's rarity alone; it is not returned. A note
    sharing two of its words is, and so is one an identifier of the query names alone."""
    for i in range(6):  # "write" and "test" are everywhere: they say little
        add_note(
            env.kb,
            learning(f"Write the test fixture {i} first", f"Write test {i} before the code."),
        )
    chance = add_note(
        env.kb,
        learning("systemd services restart on failure", "Give the unit Restart=on-failure."),
    ).id
    ident = add_note(
        env.kb,
        learning("request_timeout is in milliseconds", "Set request_timeout in ms, not seconds."),
    ).id
    code = add_note(
        env.kb, learning("Long URLs may break the line limit", "Silence B950 on that line.")
    ).id
    reindex(env.kb)
    for mode in ("lexical", "hybrid"):
        results, _, _ = cli("write unit test", "--mode", mode)
        assert chance not in _ids(results), (mode, results)
        results, _, _ = cli("systemd unit restart", "--mode", mode)
        assert _ids(results)[:1] == [chance], mode
        results, _, _ = cli("raise request_timeout for uploads", "--mode", mode)
        assert _ids(results)[:1] == [ident], mode
        # One code term of several (a lint code) is evidence, not chance.
        results, _, _ = cli("write test b950", "--mode", mode)
        assert _ids(results)[:1] == [code], (mode, results)


def test_scoped_search_finds_a_repository_learning_that_ranks_low_overall(env, cli, tmp_path):
    shop = make_repo(tmp_path / "shop", SHOP)
    make_repo(tmp_path / "other", "https://github.com/acme/other.git")
    for i in range(70):  # another repository's notes all outrank it on this query
        add_note(
            env.kb,
            learning(
                f"Webpack build cache invalidation {i}",
                f"Webpack build cache goes stale after upgrade {i}; clear the build cache.",
                repo="github.com/acme/other",
            ),
        )
    own = add_note(
        env.kb,
        learning(
            "Clear the webpack cache after switching branches",
            "Switching branches leaves stale webpack output in .cache.",
            repo=SHOP_KEY,
        ),
    ).id
    reindex(env.kb)
    everywhere, _, _ = cli("webpack build cache", "--mode", "lexical", "-k", "20")
    assert own not in _ids(everywhere), "the test needs it to rank low in the whole KB"
    here, _, _ = cli("webpack build cache", "--mode", "lexical", "--repo", str(shop))
    assert _ids(here)[:1] == [own]
    hybrid, _, _ = cli("webpack build cache", "--repo", str(shop))
    assert _ids(hybrid)[:1] == [own]
    elsewhere, _, _ = cli("webpack build cache", "--repo", str(tmp_path / "other"))
    assert own not in _ids(elsewhere)


def test_the_repositorys_own_learning_beats_a_global_one_at_equal_relevance(env, cli, tmp_path):
    shop = make_repo(tmp_path / "shop", SHOP)
    rule = "Floating tags changed the base image."
    # One word longer, so the global one scores a hair higher before precedence.
    mine = add_note(
        env.kb, learning("Pin the docker base image by its digest", rule, repo=SHOP_KEY)
    )
    theirs = add_note(env.kb, learning("Pin the docker base image by digest", rule, scope="global"))
    mine, theirs = mine.id, theirs.id
    reindex(env.kb)
    for mode in ("lexical", "hybrid"):
        results, _, _ = cli("docker base image digest", "--mode", mode, "--repo", str(shop))
        # The same lesson (the same rule) takes one slot: the repository's own copy.
        assert _ids(results) == [mine], mode
    results, _, _ = cli("docker base image digest", "--global")
    assert _ids(results) == [theirs]


def test_one_lesson_recorded_in_many_repositories_takes_one_result_slot(env, cli, tmp_path):
    """Six copies of one lesson (global and in five repositories, as an un-deduplicated KB
    holds it) would fill an unscoped top 5; the different learning asked for stays in it."""
    rule = "Never make a cargo feature remove functionality from the crate."
    copies = [
        add_note(
            env.kb,
            learning(
                f"{part}: cargo features must be additive",
                rule,
                repo=f"github.com/acme/{part}" if part != "global" else None,
                scope="global" if part == "global" else "repo",
            ),
        ).id
        for part in ("global", "indexer", "watchdog", "cli", "agent", "server")
    ]
    wanted = add_note(
        env.kb,
        learning(
            "Cargo unifies features across the dependency graph",
            "Two crates enabling different cargo features of one dependency build it once "
            "with both: a feature seen in one crate leaks into the other.",
            scope="global",
        ),
    ).id
    reindex(env.kb)
    for mode in ("lexical", "hybrid"):
        results, _, _ = cli("additive cargo features graph", "--mode", mode, "-k", "5")
        ids = _ids(results)
        assert wanted in ids, mode
        assert len(set(ids) & set(copies)) == 1, mode


class _Stub:
    """A unix socket where the worker's would be, answering garbage or never."""

    def __init__(self, path: Path, mode: str) -> None:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        self.sock = socket.socket(socket.AF_UNIX)
        self.sock.bind(str(path))
        self.sock.listen(4)
        self.mode = mode
        self.served = 0
        self.conns: list[socket.socket] = []
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.served += 1
            self.conns.append(conn)
            conn.recv(1 << 16)
            if self.mode == "garbage":
                conn.sendall(b"\x00\xffnot json at all\n")
                conn.close()
            elif self.mode == "wrong":
                conn.sendall(b'{"ok": true, "hits": [{"id": 5}]}\n')
                conn.close()
            # "never": keep the connection open and say nothing

    def close(self) -> None:
        self.sock.close()
        for c in self.conns:
            c.close()


@pytest.mark.parametrize("mode", ["garbage", "wrong", "never"])
def test_a_worker_answering_garbage_or_never_falls_back_to_lexical_within_budget(
    env, cli, monkeypatch, mode
):
    ids = _kb(env)
    monkeypatch.setenv("REFLECT_SEARCH_WORKER_SEC", "1")
    stub = _Stub(env.home / "run" / "model.sock", mode)
    try:
        results, _, stderr = cli("getUserName", "--mode", "hybrid")
    finally:
        stub.close()
    assert stub.served == 1, "the CLI asked the worker"
    assert _ids(results)[:1] == [ids["camel"]]
    assert "lexical results only" in stderr
    if mode == "never":
        assert "did not answer within 1 s" in stderr
    log = (env.home / "drain.log").read_text()
    assert "search_worker_failed" in log and "lexical_fallback" in log


def _two_checkouts(env, tmp_path):  # type: ignore[no-untyped-def]
    """Two repositories with a learning each that answers "webpack cache" about as well, and
    a global one; returns ``{name: (checkout, note id)}``."""
    out = {}
    for name, title, rule in (
        ("shop", "Clear the webpack cache after switching branches", "Stale .cache output."),
        ("admin", "Clear the webpack cache before a release build", "Release reads .cache."),
    ):
        checkout = make_repo(tmp_path / name, f"https://github.com/acme/{name}.git")
        note = add_note(env.kb, learning(title, rule, repo=f"github.com/acme/{name}"))
        out[name] = (checkout, note.id)
    out["global"] = (
        None,
        add_note(
            env.kb,
            learning("Webpack cache lives in .cache", "Delete it to start over.", scope="global"),
        ).id,
    )
    reindex(env.kb)
    return out


def test_asked_from_inside_a_checkout_its_own_learnings_come_first(env, cli, tmp_path, monkeypatch):
    """Unscoped, run inside a repository: every repository's learnings still answer, the
    checkout's own first at equal relevance (issue 25); --repo and --global still filter."""
    made = _two_checkouts(env, tmp_path)
    ids = {name: note for name, (_, note) in made.items()}
    for mode in ("lexical", "hybrid"):
        for here, other in (("shop", "admin"), ("admin", "shop")):
            monkeypatch.chdir(made[here][0] / ".git")  # anywhere inside the checkout
            got = _ids(cli("webpack cache", "--mode", mode)[0])
            assert got[0] == ids[here], (mode, here, got)
            assert {ids[other], ids["global"]} <= set(got), "nothing is filtered out"
        monkeypatch.chdir(tmp_path)  # outside any checkout: no preference, all three
        assert set(_ids(cli("webpack cache", "--mode", mode)[0])) == set(ids.values())
    monkeypatch.chdir(made["shop"][0])
    assert _ids(cli("webpack cache", "--global")[0]) == [ids["global"]]
    scoped = _ids(cli("webpack cache", "--repo", str(made["admin"][0]))[0])
    assert scoped[0] == ids["admin"] and ids["shop"] not in scoped
