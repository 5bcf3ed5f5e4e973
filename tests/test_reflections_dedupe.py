"""The Reflection Store's dedupe pass: the hostile-answer parser, the plan, and end to end.

The end-to-end tests run the real ``reflections dedupe`` / ``reflect-jobs items dedupe``
commands against the stub ``claude`` (mode ``dedupe``), real SQLite ledgers and queues.
"""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

from huey import SqliteHuey
from recall_support import make_repo

from reflect_jobs.limits import Caps
from reflect_jobs.reflections.dedupe import (
    MAX_GROUP_IDS,
    MAX_GROUPS,
    build_prompt,
    dedupe_candidates,
    parse_groups,
    plan_drops,
)
from reflect_jobs.reflections.dedupe_run import _claim, _unclaim, dedupe_caps
from reflect_jobs.reflections.fold import Item


def _item(uid: str, title: str, created: str, *, kind: str = "action", base: str = "open") -> Item:
    ts = f"2026-12-0{created}T10:00:00.000000Z"
    return Item(uid, kind, title, "", base, "person", ts, ts, id="#" + uid[:4])


A = _item("aaaa000000000001", "Fix the flaky login test", "1")
B = _item("bbbb000000000002", "fix flaky login test", "2")
C = _item("cccc000000000003", "Login test is flaky: fix it", "3")
D = _item("dddd000000000004", "Add a retry to deploy.sh", "2")
OFFERED = [A, B, C, D]


def test_a_well_formed_answer_groups_uids_and_the_oldest_of_each_group_is_kept():
    parsed = parse_groups('{"groups": [["#cccc", "bbbb", "#aaaa"]]}', OFFERED)
    assert parsed.error == "" and parsed.groups == [[C.uid, B.uid, A.uid]]
    drops = plan_drops(parsed.groups, OFFERED)
    assert [(d.item.uid, d.keep.uid) for d in drops] == [(B.uid, A.uid), (C.uid, A.uid)]
    assert drops[0].note == "duplicate of #aaaa"


def test_created_at_ties_are_broken_by_uid():
    twin = _item("0000ffff00000005", "fix flaky login test (2)", "2")
    drops = plan_drops([[B.uid, twin.uid]], [B, twin])
    assert [(d.item.uid, d.keep.uid) for d in drops] == [(B.uid, twin.uid)]


def test_a_fenced_answer_is_read():
    parsed = parse_groups('```json\n{"groups": [["#aaaa", "#bbbb"]]}\n```', OFFERED)
    assert parsed.groups == [[A.uid, B.uid]]


def test_unknown_and_malformed_ids_are_ignored_and_counted():
    answer = json.dumps({"groups": [["#aaaa", "#9999", 7, "not an id", "#bbbb", "#aaaa"]]})
    parsed = parse_groups(answer, OFFERED)
    assert parsed.groups == [[A.uid, B.uid]]
    assert parsed.unknown == 3  # not offered, a number, not hex; the repeat counts once


def test_an_id_in_two_groups_is_ignored_in_both_and_groups_of_one_are_dropped():
    answer = json.dumps({"groups": [["#aaaa", "#bbbb"], ["#bbbb", "#cccc", "#dddd"], ["#aaaa"]]})
    parsed = parse_groups(answer, OFFERED)
    # a and b are each named by two groups: ignored in all of them
    assert parsed.conflicts == 2
    assert parsed.groups == [[C.uid, D.uid]]
    assert parsed.singletons == 2


def test_answers_that_are_not_a_groups_object_group_nothing():
    for text in [
        "These items look like duplicates: #aaaa and #bbbb.",
        '["#aaaa", "#bbbb"]',
        '{"groups": "#aaaa #bbbb"}',
        '{"duplicates": [["#aaaa", "#bbbb"]]}',
        None,
    ]:
        parsed = parse_groups(text, OFFERED)
        assert parsed.groups == [] and parsed.error, text
    parsed = parse_groups('{"groups": ["#aaaa", {"ids": ["#bbbb"]}]}', OFFERED)
    assert parsed.groups == [] and parsed.malformed == 2 and parsed.error == ""


def test_an_ambiguous_prefix_names_no_item():
    twin = _item("aaaa000000000009", "another", "4")
    parsed = parse_groups('{"groups": [["#aaaa", "#bbbb", "#cccc"]]}', [*OFFERED, twin])
    assert parsed.unknown == 1 and parsed.groups == [[B.uid, C.uid]]


def test_caps_on_groups_and_ids():
    many = [_item(f"{n:04x}00000000{n:04x}", f"item {n}", "1") for n in range(1, 80)]
    groups = [[many[2 * n].id, many[2 * n + 1].id] for n in range(MAX_GROUPS + 5)]
    parsed = parse_groups(json.dumps({"groups": groups}), many)
    assert len(parsed.groups) == MAX_GROUPS and parsed.over_cap == 5
    big = [i.id for i in many[: MAX_GROUP_IDS + 3]]
    parsed = parse_groups(json.dumps({"groups": [big]}), many)
    assert len(parsed.groups[0]) == MAX_GROUP_IDS and parsed.over_cap == 3


def test_items_closed_since_the_answer_leave_their_group():
    closed = _item(A.uid, A.title, "1", base="done")
    drops = plan_drops([[A.uid, B.uid, C.uid]], [closed, B, C])
    assert [(d.item.uid, d.keep.uid) for d in drops] == [(C.uid, B.uid)]
    assert plan_drops([[A.uid, B.uid]], [closed, B]) == []


def test_the_prompt_offers_only_open_items_redacted_and_bounded():
    note = _item("eeee000000000005", "Redis runs on 6379", "1", kind="learning", base="note")
    done = _item("ffff000000000006", "Old task", "1", base="done")
    secret = _item("1234000000000007", "Rotate key sk-ant-api03-" + "x" * 40, "3")
    secret.body = "token ghp_" + "a" * 36 + " " + "long " * 200
    chosen = dedupe_candidates([A, note, done, secret, B])
    assert [i.uid for i in chosen] == [secret.uid, B.uid, A.uid]  # newest first, open only
    prompt, offered = build_prompt(chosen)
    assert offered == chosen and "#eeee" not in prompt and "#ffff" not in prompt
    assert "sk-ant-api03-x" not in prompt and "ghp_aaaa" not in prompt
    assert '{"groups":' in prompt and "ONLY" in prompt
    listing = json.loads(prompt.split("Items:\n", 1)[1])
    assert listing[0]["id"] == "#1234" and len(listing[0]["body"]) <= 201
    huge = [_item(f"{n:04x}{n:012x}", "t " * 140, "1") for n in range(1, 200)]
    prompt, offered = build_prompt(dedupe_candidates(huge, limit=500))
    assert 0 < len(offered) < 199 and len(prompt) < 14_000


def test_the_dedupe_units_are_counted_apart_from_the_writers(tmp_path):
    storage = SqliteHuey("t", filename=str(tmp_path / "q.db")).storage
    writer = Caps(storage, daily_max=20, run_max=3, window_sec=600)

    class S:
        dedupe_daily_max = 2

    units = dedupe_caps(S(), storage)  # type: ignore[arg-type]
    assert not isinstance(units.reserve(), type(None))
    assert units.usage()["daily_used"] == 1 and writer.usage()["daily_used"] == 0
    units.reserve()
    refused = units.reserve()
    assert "daily cap 2" in getattr(refused, "reason", "")
    assert writer.usage()["daily_used"] == 0 and units.usage()["daily_used"] == 2


def test_the_last_pass_flag_is_claimed_once_and_put_back(tmp_path):
    from datetime import UTC

    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    now = datetime.now(UTC)
    first = _claim(url, "github.com-a-b-12345678", now, 86_400, False)
    assert first == ""  # claimed; nothing was there before
    assert _claim(url, "github.com-a-b-12345678", now, 86_400, False) is False  # not due
    _unclaim(url, "github.com-a-b-12345678", now, first)
    assert _claim(url, "github.com-a-b-12345678", now, 86_400, False) == ""


# --- end to end through the real CLI and the stub claude -------------------------------


def _add(env, repo: Path, title: str, kind: str = "action", by: str = "reflector") -> str:  # type: ignore[no-untyped-def]
    # the reflector's items by default: the pass never drops a person's item (it holds it)
    out = env.run(
        "reflections", "add", "--kind", kind, "--title", title, "--repo", str(repo), "--by", by
    )
    return out.stdout.strip()


def _items(env, repo: Path) -> dict[str, dict]:  # type: ignore[no-untyped-def]
    out = env.run("reflections", "list", "--status", "all", "--repo", str(repo), "--json")
    return {i["id"]: i for i in json.loads(out.stdout)}


def _calls(env) -> int:  # type: ignore[no-untyped-def]
    log = Path(env["STUB_CLAUDE_LOG"])
    return len(log.read_text().splitlines()) if log.exists() else 0


def _dedupe(env, *args: str, check: bool = True) -> dict | list:  # type: ignore[no-untyped-def]
    out = env.run("reflections", "dedupe", *args, "--json", check=check)
    return json.loads(out.stdout)


def test_dedupe_end_to_end_drops_the_younger_twins_reopens_and_respects_interval_and_units(
    env, tmp_path
):
    repo = make_repo(tmp_path / "shop", "git@github.com:acme/shop.git")
    lonely = make_repo(tmp_path / "lonely", "git@github.com:acme/lonely.git")
    other = make_repo(tmp_path / "other", "git@github.com:acme/other.git")
    oldest = _add(env, repo, "Fix the flaky login test")
    twin1 = _add(env, repo, "fix flaky login test before release")
    distinct = _add(env, repo, "Add a retry to deploy.sh")
    twin2 = _add(env, repo, "The login test is flaky, fix it")
    fact = _add(env, repo, "Login uses port 6379 for sessions", kind="learning")
    mine = _add(env, repo, "Make the login test stop flaking", by="person")
    _add(env, lonely, "Only one open item here")
    _add(env, other, "Write the login docs")
    _add(env, other, "Document the login flow")
    prompts = tmp_path / "prompts"
    env.update(
        STUB_CLAUDE_MODE="dedupe",
        STUB_CLAUDE_GROUP_WORD="login",
        STUB_CLAUDE_PROMPTS=str(prompts),
        REFLECT_DEDUPE_DAILY_MAX="2",
        REFLECT_DEDUPE_MODEL="haiku-for-dedupe",
    )

    # Fewer than two open items: no call, no unit.
    assert _dedupe(env, "--repo", str(lonely))["status"] == "too_few" and _calls(env) == 0

    # A dry run asks (paid) and reports, but writes nothing.
    dry = _dedupe(env, "--repo", str(repo), "--dry-run")
    assert dry["status"] == "dry_run" and dry["dropped"] == 0 and _calls(env) == 1
    assert {d["id"] for d in dry["groups"][0]["drop"]} == {twin1, twin2}
    assert all(i["status"] in ("open", "note") for i in _items(env, repo).values())

    env.update(REFLECT_DEDUPE_DAILY_MAX="3")
    report = _dedupe(env, "--repo", str(repo))
    assert report["status"] == "done" and report["dropped"] == 2 and _calls(env) == 2
    assert report["groups"][0]["keep"]["id"] == oldest
    # a person's item is held for a person to drop, never dropped by the pass
    assert [(h["id"], h["keep"]) for h in report["held"]] == [(mine, oldest)]
    sent = (prompts / "2.txt").read_text()
    assert all(i in sent for i in (oldest, twin1, twin2, distinct)) and fact not in sent
    call = json.loads(Path(env["STUB_CLAUDE_LOG"]).read_text().splitlines()[-1])
    assert call["argv"][call["argv"].index("--model") + 1] == "haiku-for-dedupe"
    items = _items(env, repo)
    for twin in (twin1, twin2):
        assert items[twin]["status"] == "dropped"
        assert items[twin]["notes"][-1] == {
            **items[twin]["notes"][-1],
            "op": "drop",
            "by": "reflector",
            "text": f"duplicate of {oldest}",
        }
    assert items[oldest]["status"] == "open" and items[distinct]["status"] == "open"
    assert items[mine]["status"] == "open"
    assert items[fact]["status"] == "note"
    context = env.run("reflections", "context", "--repo", str(repo)).stdout
    assert oldest in context and twin1 not in context and twin2 not in context

    # reopen undoes a drop.
    env.run("reflections", "reopen", twin1, "--repo", str(repo))
    assert _items(env, repo)[twin1]["status"] == "open"

    # The periodic path: the deduplicated repository is not due again today; the other
    # one (never deduplicated) is, and takes the last unit.
    out = env.invoke("items", "dedupe", "--due", "--json")
    by_repo = {r["repo"]: r for r in json.loads(out.stdout)}
    statuses = sorted(r["status"] for r in by_repo.values())
    assert statuses == ["done", "not_due", "too_few"] and _calls(env) == 3
    assert _items(env, repo)[twin1]["status"] == "open"  # not dropped again

    # The units are spent (3 of 3): a person's run now is deferred, without a call.
    deferred = _dedupe(env, "--repo", str(repo))
    assert deferred["status"] == "deferred" and "daily cap 3" in deferred["detail"]
    assert _calls(env) == 3

    # The spend is in the ledger, apart from the writer's budget entries.
    cost = json.loads(env.invoke("cost", "--by", "outcome", "--json").stdout)
    assert cost["rows"]["dedupe_ok"]["runs"] == 2 and cost["rows"]["dedupe_dry_run"]["runs"] == 1
    assert cost["rows"]["dedupe_ok"]["cost_usd"] > 0 and cost["total"]["entries"] == 0
    by_label = json.loads(env.invoke("cost", "--by", "transcript", "--json").stdout)["rows"]
    assert "dedupe:github.com/acme/shop" in by_label, "labelled by the one repository key"


def test_a_failed_call_drops_nothing_refunds_a_free_attempt_and_stays_due(env, tmp_path):
    repo = make_repo(tmp_path / "shop", "git@github.com:acme/shop.git")
    first = _add(env, repo, "Fix the flaky login test")
    second = _add(env, repo, "fix flaky login test again")
    # A free failure (the CLI answered zero turns: an install fault) gives its unit back…
    env.update(STUB_CLAUDE_MODE="zero_turns", REFLECT_DEDUPE_DAILY_MAX="1")
    failed = _dedupe(env, "--repo", str(repo), check=False)
    assert failed["status"] == "failed" and failed["outcome"] == "dedupe_fail_unknown_command"
    assert _calls(env) == 1
    # …so the one unit of the day is still there for a paid failure (prose, not JSON).
    env.update(STUB_CLAUDE_MODE="prose")
    failed = _dedupe(env, "--repo", str(repo), check=False)
    assert failed["status"] == "failed" and failed["outcome"] == "dedupe_unparseable"
    assert failed["dropped"] == 0 and _calls(env) == 2
    assert {i["status"] for i in _items(env, repo).values()} == {"open"}

    # A paid failure keeps its unit (1 of 1): the periodic run defers without a call.
    env.update(STUB_CLAUDE_MODE="dedupe", STUB_CLAUDE_GROUP_WORD="login")
    (report,) = json.loads(env.invoke("items", "dedupe", "--due", "--json").stdout)
    assert report["status"] == "deferred" and _calls(env) == 2

    # With a unit to spend the repository is still due (the failure did not count as a pass).
    env.update(REFLECT_DEDUPE_DAILY_MAX="2")
    (report,) = json.loads(env.invoke("items", "dedupe", "--due", "--json").stdout)
    assert report["status"] == "done" and report["dropped"] == 1 and _calls(env) == 3
    assert _items(env, repo)[second]["notes"][-1]["text"] == f"duplicate of {first}"

    # The heuristic writer has no model to ask: nothing happens.
    env.update(REFLECT_WRITER_BACKEND="heuristic")
    assert _dedupe(env, "--repo", str(repo))["status"] == "too_few"  # one open left
    _add(env, repo, "fix the flaky login test once more")
    assert _dedupe(env, "--repo", str(repo))["status"] == "heuristic" and _calls(env) == 3


def test_the_hourly_huey_task_runs_the_due_repositories_once(env, tmp_path, monkeypatch):
    repo = make_repo(tmp_path / "shop", "git@github.com:acme/shop.git")
    first = _add(env, repo, "Fix the flaky login test")
    second = _add(env, repo, "fix flaky login test again")
    env.update(STUB_CLAUDE_MODE="dedupe", STUB_CLAUDE_GROUP_WORD="login")
    # configure_logging (run by the task's runtime) sets these defaults; monkeypatch restores
    env.update(HF_HUB_DISABLE_PROGRESS_BARS="1", TRANSFORMERS_VERBOSITY="error", TQDM_DISABLE="1")
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    from reflect_jobs import tasks

    def due_at(hour: int, minute: int) -> set[str]:
        when = datetime(2026, 12, 2, hour, minute)
        return {t.name.rsplit(".", 1)[-1] for t in tasks.huey.read_periodic(when)}

    assert "dedupe_reflections" in due_at(3, 17) and "dedupe_reflections" in due_at(4, 17)
    assert "dedupe_reflections" not in due_at(3, 18)  # hourly
    (ran,) = tasks.dedupe_reflections.call_local()
    assert ran["status"] == "done" and ran["dropped"] == 1 and _calls(env) == 1
    assert _items(env, repo)[second]["notes"][-1]["text"] == f"duplicate of {first}"
    env.run("reflections", "reopen", second, "--repo", str(repo))
    assert tasks.dedupe_reflections.call_local() == [] and _calls(env) == 1  # not due


def test_a_pass_waits_for_a_write_slot_and_defers_when_every_slot_is_taken(env, tmp_path):
    from reflect_jobs.write_lease import make_write_lease

    repo = make_repo(tmp_path / "shop", "git@github.com:acme/shop.git")
    _add(env, repo, "Fix the flaky login test")
    _add(env, repo, "fix flaky login test again")
    env.update(STUB_CLAUDE_MODE="dedupe", STUB_CLAUDE_GROUP_WORD="login")
    settings = env.settings()
    from reflect_jobs.queue import make_huey

    held = make_write_lease(settings, make_huey(settings).storage).acquire(0)
    assert held is not None  # the one slot (REFLECT_WRITE_CONCURRENCY=1) is a writer's now
    try:
        report = _dedupe(env, "--repo", str(repo))
        assert report["status"] == "deferred" and "write lease" in report["detail"]
        assert _calls(env) == 0
    finally:
        held.release()
    assert _dedupe(env, "--repo", str(repo))["status"] == "done" and _calls(env) == 1
