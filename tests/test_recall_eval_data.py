"""The recall benchmark's labelled data is well-formed (bench/data/recall_eval/, issue #25 item 4).

The benchmark is only as good as its labels: every expected learning must exist and fit the
situation, the split must not move between runs, and the set must keep the sizes the issue
asks for — and none of it may come from the projects kept for an independent check.
"""

from __future__ import annotations

import json
import re
import sys
from collections import Counter
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

import recall_eval_data as data  # noqa: E402

DATA = ROOT / "bench" / "data" / "recall_eval"


@pytest.fixture(scope="module")
def ds() -> data.Dataset:
    return data.load()


def test_every_file_parses() -> None:
    json.loads((DATA / "repos.json").read_text(encoding="utf-8"))
    json.loads((DATA / "heldout_repos.json").read_text(encoding="utf-8"))
    for name in (
        "learnings.jsonl",
        "situations.jsonl",
        "heldout_learnings.jsonl",
        "heldout_situations.jsonl",
    ):
        for n, line in enumerate((DATA / name).read_text(encoding="utf-8").splitlines(), 1):
            assert isinstance(json.loads(line), dict), f"{name}:{n}"
    facts = data.read_facts()
    assert all(f["title"] and f["rule"] and f["key_insight"] for f in facts)


def test_ids_are_unique_and_give_distinct_notes(ds: data.Dataset) -> None:
    from reflect_jobs.kb.ids import learning_id

    learnings = ds.learnings("2000")
    ids = [x.id for x in learnings]
    assert len(ids) == len(set(ids))
    # Two learnings with one title and rule would overwrite each other's note.
    note_ids = [learning_id(x.title, x.rule) for x in learnings]
    assert len(note_ids) == len(set(note_ids))
    situations = [s["id"] for s in ds.situations]
    assert len(situations) == len(set(situations))


def test_every_expected_id_exists_and_fits_its_situation(ds: data.Dataset) -> None:
    for s in ds.situations:
        assert s["repo"] in ds.repos and ds.repos[s["repo"]]["role"] == "labelled", s["id"]
        assert s["prompt"].strip() and s["query"].strip(), s["id"]
        assert (s["kind"] == "none") == (not s["expected"]), s["id"]
        for e in s["expected"]:
            learning = ds.labelled.get(e)
            assert learning is not None, f"{s['id']}: unknown learning {e}"
            if learning.scope == "repo":
                assert learning.repo == s["repo"], f"{s['id']}: {e} is another repository's"
            else:
                # A global learning a situation needs must fit the repository's stack, or the
                # "nothing from another stack" target would contradict the labels.
                assert not data.stack_mismatch(
                    learning.applies_to, ds.repos[s["repo"]], ds.languages, ds.frameworks
                ), f"{s['id']}: {e} does not fit {s['repo']}"


def test_the_split_is_stable_and_both_halves_are_used(ds: data.Dataset) -> None:
    # Pinned values: a change of the hash or its use would silently reshuffle dev and test.
    # (The held-out situations are the ``heldout`` split whatever their hash says.)
    pinned = {s["id"]: s["split"] for s in ds.situations if s["split"] != "heldout"}
    again = data.load().situations
    assert pinned == {s["id"]: data.split_of(s["id"]) for s in again if s["split"] != "heldout"}
    assert len(pinned) == 196  # 156, then 40 in-domain tasks that need nothing (SOURCES.md)
    assert [data.split_of(x) for x in ("nx-s01", "nx-s02", "ha-s01", "no-s01", "nd-s01")] == [
        "dev",
        "test",
        "dev",
        "dev",
        "test",
    ]
    counts = Counter((s["split"], s["kind"] == "none") for s in ds.situations)
    for split in ("dev", "test"):
        assert counts[(split, False)] >= 30 and counts[(split, True)] >= 5, counts


def test_sizes_the_issue_asks_for(ds: data.Dataset) -> None:
    relevant = [s for s in ds.situations if s["expected"]]
    assert len(relevant) >= 100
    assert len({s["repo"] for s in relevant}) >= 8
    assert sum(1 for s in ds.situations if not s["expected"]) >= 20
    assert sum(1 for s in relevant if s["kind"] == "global") >= 20
    assert len(ds.distractors) >= 2000
    per_repo = Counter(x.repo for x in ds.learnings("2000") if x.scope == "repo")
    distractor_repos = {x.repo for x in ds.distractors if x.scope == "repo"}
    assert len(distractor_repos) >= 20
    assert any(x.scope == "global" for x in ds.distractors)
    assert sum(1 for n in per_repo.values() if n >= 40) >= 1
    # Labelled repositories with 40+ learnings, so the block's cap is exercised by labels.
    assert sum(1 for k, n in per_repo.items() if ds.repos[k]["role"] == "labelled" and n >= 40) >= 1
    assert 150 <= len(ds.learnings("200")) <= 300


def test_no_source_from_the_excluded_projects(ds: data.Dataset) -> None:
    text = " ".join(
        [x.source for x in ds.learnings("2000")]
        + [r.get("source", "") for r in ds.repos.values()]
        + list(ds.repos)
    ).lower()
    for name in data.EXCLUDED:
        assert name not in text, name
    sources = (DATA / "SOURCES.md").read_text(encoding="utf-8")
    for key, repo in ds.repos.items():
        if repo["role"] == "labelled":
            assert repo["licence"] and key in sources, key


def test_every_repository_has_a_profile(ds: data.Dataset) -> None:
    for key, repo in ds.repos.items():
        assert key.count("/") == 2, key
        assert set(repo["languages"]) <= set(ds.languages), key
        if repo["role"] != "notes":
            assert repo["manifests"] and repo["extensions"], key
    for learning in ds.learnings("2000"):
        assert learning.scope in ("repo", "global")
        assert (learning.scope == "repo") == bool(learning.repo), learning.id
        if learning.repo:
            assert learning.repo in ds.repos, learning.id


def _rows(name: str) -> list[dict]:
    return [json.loads(x) for x in (DATA / name).read_text(encoding="utf-8").splitlines() if x]


def test_heldout_ids_are_new_and_its_labels_exist(ds: data.Dataset) -> None:
    situations = _rows("heldout_situations.jsonl")
    learnings = _rows("heldout_learnings.jsonl")
    ids = [s["id"] for s in situations]
    assert len(ids) == len(set(ids))
    earlier = {s["id"] for s in _rows("situations.jsonl")}
    assert not set(ids) & earlier
    earlier_learnings = {x["id"] for x in _rows("learnings.jsonl")}
    distractors = {x.id for x in ds.distractors}
    for x in learnings:
        assert x["id"] not in earlier_learnings and x["id"] not in distractors, x["id"]
        assert x["id"] in ds.labelled and ds.labelled[x["id"]].labelled, x["id"]
    heldout_repos = json.loads((DATA / "heldout_repos.json").read_text(encoding="utf-8"))["repos"]
    assert not set(heldout_repos) & set(json.loads((DATA / "repos.json").read_text())["repos"])
    for s in situations:
        for e in s["expected"]:
            assert e in ds.labelled, f"{s['id']}: unknown learning {e}"
    # Held-out situations are about the held-out repositories only.
    assert {s["repo"] for s in situations} == set(heldout_repos)
    assert {x["repo"] for x in learnings if x["scope"] == "repo"} == set(heldout_repos)


def test_heldout_situations_never_enter_dev_or_test(ds: data.Dataset) -> None:
    heldout = {s["id"] for s in _rows("heldout_situations.jsonl")}
    by_split = {s["id"]: s["split"] for s in ds.situations}
    assert all(by_split[x] == "heldout" for x in heldout)
    assert {k for k, v in by_split.items() if v == "heldout"} == heldout
    # The KB is one for every split: the held-out learnings are in both scales.
    for scale in ("200", "2000"):
        in_kb = {x.id for x in ds.learnings(scale)}
        assert {x["id"] for x in _rows("heldout_learnings.jsonl")} <= in_kb


def test_heldout_sizes() -> None:
    situations = _rows("heldout_situations.jsonl")
    kinds = Counter(s["kind"] for s in situations)
    assert len(situations) >= 50
    assert len({s["repo"] for s in situations}) >= 4
    assert kinds["repo"] >= 25 and kinds["global"] >= 8 and kinds["mixed"] >= 3
    assert kinds["none"] >= 8 and all(not s["expected"] for s in situations if s["kind"] == "none")
    learnings = _rows("heldout_learnings.jsonl")
    per_repo = Counter(x["repo"] for x in learnings if x["scope"] == "repo")
    assert len(per_repo) >= 4 and all(8 <= n <= 12 for n in per_repo.values()), per_repo
    assert 6 <= sum(1 for x in learnings if x["scope"] == "global") <= 10


def test_heldout_names_no_excluded_project() -> None:
    # Whole words anywhere in the held-out rows (sources, repositories, text), not only sources.
    text = " ".join(
        json.dumps(r).lower()
        for name in ("heldout_learnings.jsonl", "heldout_situations.jsonl")
        for r in _rows(name)
    )
    text += (DATA / "heldout_repos.json").read_text(encoding="utf-8").lower()
    for name in data.EXCLUDED:
        assert not re.search(r"(?<![\w-])" + re.escape(name) + r"(?![\w-])", text), name


def _valid_ref_name(name: str) -> bool:
    """The rules of git check-ref-format that a branch name can break."""
    if not name or name != name.strip() or name in ("@", "HEAD"):
        return False
    if any(c.isspace() or ord(c) < 32 or ord(c) == 127 for c in name):
        return False
    if any(c in name for c in "~^:?*[\\") or ".." in name or "@{" in name or "//" in name:
        return False
    if name.startswith(("/", "-")) or name.endswith(("/", ".", ".lock")):
        return False
    return all(
        part and not part.startswith(".") and not part.endswith(".lock") for part in name.split("/")
    )


def test_every_situation_has_a_valid_branch(ds: data.Dataset) -> None:
    branches = json.loads((DATA / "branches.json").read_text(encoding="utf-8"))
    assert isinstance(branches, dict)
    # Every situation, dev, test and held-out alike, has exactly one entry, and the loader
    # attaches that entry (not a fallback) as the branch the session starts on.
    ids = {s["id"] for s in ds.situations}
    assert {s["split"] for s in ds.situations} >= {"dev", "test", "heldout"}
    assert not set(branches) - ids, sorted(set(branches) - ids)
    assert not ids - set(branches), sorted(ids - set(branches))
    for s in ds.situations:
        assert s["branch"] == branches[s["id"]], (s["id"], s["branch"])
    for key, branch in branches.items():
        assert isinstance(branch, str) and _valid_ref_name(branch), (key, branch)
    for bad in ("a b", "a..b", "x~1", "x^", "a:b", "a?", "a*", "a[b", "a\\b", "x.lock", "x/"):
        assert not _valid_ref_name(bad), bad
