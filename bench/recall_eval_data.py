"""The labelled recall benchmark's data, loaded and expanded deterministically (stdlib only).

Files (``bench/data/recall_eval/``, provenance in ``SOURCES.md`` there):

* ``repos.json`` — every repository: the ten *labelled* public projects (their instruction
  file, licence, stack, manifest files and top extensions), the fictional *distractor*
  repositories (their stack, which fact banks fill them, how many learnings, component
  names) and the six fictional repositories of ``bench/data/recall_repos.json``; plus the
  language/framework vocabulary and ``applies_to`` for every note of ``bench/data/notes.jsonl``.
* ``learnings.jsonl`` — the labelled learnings: repository learnings paraphrased from the
  labelled projects, global ones written for the benchmark, and references (``ref``) to
  global notes of ``bench/data/notes.jsonl``.
* ``situations.jsonl`` — a session in a labelled repository: the first prompt, a search
  query, the expected learning ids (``[]`` for the prompts that need nothing).
* ``branches.json`` — the git branch each situation's session starts on (written from the
  repository and the prompt only: a default branch, an opaque or a descriptive name).
* ``facts.tsv`` — short per-stack facts. Each becomes one global distractor and is recorded
  again, prefixed with a component name, in several distractor repositories (the same
  lesson learned in many projects, as an un-deduplicated KB accumulates it).

* ``heldout_repos.json``, ``heldout_learnings.jsonl``, ``heldout_situations.jsonl`` — the
  held-out set (four more public projects, written later and never used to tune): its
  repositories and learnings are always part of the KB, so one KB serves every split; its
  situations form the ``heldout`` split instead of the hash split.

Everything here is a pure function of those files: ids, proof counts, confidences, ages and
the dev/test split come from sha256 of ids, so every run builds the same KB.
"""

from __future__ import annotations

import csv
import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "bench" / "data" / "recall_eval"
NOTES = ROOT / "bench" / "data" / "notes.jsonl"
NOTE_REPOS = ROOT / "bench" / "data" / "recall_repos.json"
#: Projects kept out of the benchmark for an independent check (issue #25).
EXCLUDED = (
    "openai/codex",
    "microsoft/typescript",
    "huggingface/transformers",
    "getsentry/sentry",
    "apache/airflow",
    "n8n-io/n8n",
    "pydantic/pydantic-ai",
    "microsoft/vscode",
    "oven-sh/bun",
    "posthog/posthog",
    "langchain",
    "astral-sh/ruff",
    "zed",
    "playwright",
    "grafana",
)
#: How many distractors the small scale adds to the labelled learnings.
SMALL_DISTRACTORS = 16
PROOF = (1, 1, 1, 1, 1, 2, 2, 3, 4, 6)


def _h(text: str) -> int:
    return int(hashlib.sha256(text.encode("utf-8")).hexdigest()[:12], 16)


def split_of(situation_id: str) -> str:
    """``dev`` or ``test``, by the parity of sha256(id) (stable across runs and machines)."""
    return "test" if _h(situation_id) % 2 else "dev"


def strength_of(learning_id: str) -> tuple[int, float, int]:
    """(proof count, confidence, age in days) of a learning, from sha256 of its id.

    Fixed before any measurement and the same for labelled and distractor learnings, so
    neither is favoured: proof 1–6 (half of them 1), confidence 0.5–0.9, age 0–299 days.
    """
    h = _h("strength:" + learning_id)
    return PROOF[h % 10], round(0.5 + (h // 10 % 5) * 0.1, 1), (h // 50) % 300


@dataclass
class Learning:
    """One learning as the benchmark writes it (``id`` is the benchmark's, not the note's)."""

    id: str
    scope: str
    repo: str | None
    title: str
    rule: str
    key_insight: str
    tags: list[str]
    applies_to: list[str]
    source: str
    labelled: bool
    extra: dict = field(default_factory=dict)

    def as_learning(self) -> dict:
        """The dict ``kb.write_learning`` takes (the writer's CREATE shape)."""
        tags = list(dict.fromkeys([*self.tags, *self.applies_to]))
        out = {
            "title": self.title,
            "rule": self.rule,
            "key_insight": self.key_insight,
            "tags": tags,
            "scope": self.scope,
            "category": self.extra.get("category", "Conventions"),
            "learning_type": self.extra.get("learning_type", "best-practice"),
        }
        for key in ("problem", "root_cause", "fix", "entities", "causal_relations", "applies_when"):
            if self.extra.get(key):
                out[key] = self.extra[key]
        if self.scope == "repo":
            out["repo"] = self.repo
        return out


@dataclass
class Dataset:
    """Repositories, learnings (labelled and distractor) and situations."""

    repos: dict[str, dict]
    languages: list[str]
    frameworks: list[str]
    labelled: dict[str, Learning]
    distractors: list[Learning]
    situations: list[dict]

    def learnings(self, scale: str) -> list[Learning]:
        """The KB of one scale: ``200`` (labelled + a few distractors) or ``2000`` (all)."""
        if scale == "200":
            ranked = sorted(self.distractors, key=lambda x: _h("small:" + x.id))
            return [*self.labelled.values(), *ranked[:SMALL_DISTRACTORS]]
        return [*self.labelled.values(), *self.distractors]

    def by_id(self) -> dict[str, Learning]:
        return {x.id: x for x in [*self.labelled.values(), *self.distractors]}


def _jsonl(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines() if x.strip()]


#: Each learning's ``applies_when`` phrases (the extract writer's field; SOURCES.md says
#: who wrote them, and from what).
APPLIES_WHEN = DATA / "applies_when.jsonl"
#: The held-out files: the situations' split is always ``heldout``, never the hash split.
HELDOUT_REPOS = DATA / "heldout_repos.json"
HELDOUT_LEARNINGS = DATA / "heldout_learnings.jsonl"
HELDOUT_SITUATIONS = DATA / "heldout_situations.jsonl"


def load() -> Dataset:
    """Read the files and expand the distractors (deterministic)."""
    spec = json.loads((DATA / "repos.json").read_text(encoding="utf-8"))
    repos: dict[str, dict] = spec["repos"]
    heldout_repos = json.loads(HELDOUT_REPOS.read_text(encoding="utf-8"))["repos"]
    assert not set(heldout_repos) & set(repos), "a held-out repository is also in repos.json"
    notes = {n["slug"]: n for n in _jsonl(NOTES)}
    labelled: dict[str, Learning] = {}
    for row in [*_jsonl(DATA / "learnings.jsonl"), *_jsonl(HELDOUT_LEARNINGS)]:
        assert row["id"] not in labelled, f"duplicate learning id {row['id']}"
        if row.get("ref"):
            note = notes[row["id"]]
            extra = {k: note[k] for k in note if k not in ("slug", "title", "rule", "key_insight")}
            labelled[row["id"]] = Learning(
                row["id"],
                "global",
                None,
                note["title"],
                note.get("rule", ""),
                note.get("key_insight", ""),
                list(note.get("tags", [])),
                row["applies_to"],
                row["source"],
                True,
                extra,
            )
            continue
        labelled[row["id"]] = Learning(
            row["id"],
            row["scope"],
            row.get("repo"),
            row["title"],
            row["rule"],
            row["key_insight"],
            row["tags"],
            row["applies_to"],
            row["source"],
            True,
        )
    distractors = _note_distractors(notes, spec["notes_applies_to"], set(labelled))
    distractors += _fact_distractors(spec)
    when = {r["id"]: r["applies_when"] for r in _jsonl(APPLIES_WHEN)}
    for learning in [*labelled.values(), *distractors]:
        # A fact's copies in the distractor repositories share its phrases (``id@repo``).
        phrases = when.get(learning.id.split("@", 1)[0])
        if phrases:
            learning.extra = {**learning.extra, "applies_when": phrases}
    situations = _jsonl(DATA / "situations.jsonl")
    branches_file = DATA / "branches.json"
    branches = (
        json.loads(branches_file.read_text(encoding="utf-8")) if branches_file.exists() else {}
    )
    for s in situations:
        s["split"] = split_of(s["id"])
        s["branch"] = branches.get(s["id"], "main")  # the branch the session starts on
    for s in _jsonl(HELDOUT_SITUATIONS):
        # Held-out branches come from branches.json too (written later, see SOURCES.md).
        situations.append({**s, "split": "heldout", "branch": branches.get(s["id"], "main")})
    repos = {**repos, **heldout_repos}
    return Dataset(repos, spec["languages"], spec["frameworks"], labelled, distractors, situations)


def _note_distractors(notes: dict[str, dict], applies: dict, labelled: set[str]) -> list[Learning]:
    """The notes of ``bench/data/notes.jsonl`` not used as labelled globals.

    Those that ``recall_repos.json`` places in one of its six fictional repositories are
    scoped there; the rest are global.
    """
    where = {
        slug: key
        for key, r in json.loads(NOTE_REPOS.read_text(encoding="utf-8"))["repos"].items()
        for slug in r["notes"]
    }
    out = []
    for slug, note in notes.items():
        if slug in labelled:
            continue
        extra = {k: note[k] for k in note if k not in ("slug", "title", "rule", "key_insight")}
        repo = where.get(slug)
        out.append(
            Learning(
                slug,
                "repo" if repo else "global",
                repo,
                note["title"],
                note.get("rule", ""),
                note.get("key_insight", ""),
                list(note.get("tags", [])),
                applies[slug],
                "bench/data/notes.jsonl",
                False,
                extra,
            )
        )
    return out


def read_facts() -> list[dict]:
    """``facts.tsv`` rows with an id ``fact-<bank>-<n>`` (n counts within the bank)."""
    with (DATA / "facts.tsv").open(encoding="utf-8", newline="") as fh:
        rows = list(csv.DictReader(fh, delimiter="\t"))
    seen: dict[str, int] = {}
    for row in rows:
        seen[row["bank"]] = seen.get(row["bank"], 0) + 1
        row["id"] = f"fact-{row['bank']}-{seen[row['bank']]:02d}"
    return rows


def _fact_distractors(spec: dict) -> list[Learning]:
    """Each fact once as a global learning, then again in the distractor repositories.

    A distractor repository takes ``size`` facts from its banks (ordered by sha256 of
    repository and fact), each titled ``<component>: <title>`` with a component of that
    repository, so the same lesson recorded in several repositories keeps distinct ids.
    """
    banks: dict[str, list[str]] = spec["banks"]
    facts = read_facts()
    out = [
        Learning(
            f["id"],
            "global",
            None,
            f["title"],
            f["rule"],
            f["key_insight"],
            [f["bank"]],
            banks[f["bank"]],
            "bench/data/recall_eval/facts.tsv",
            False,
        )
        for f in facts
    ]
    for key, repo in sorted(spec["repos"].items()):
        if repo["role"] != "distractor":
            continue
        name = key.rsplit("/", 1)[-1]
        pool = [f for f in facts if f["bank"] in repo["banks"]]
        pool.sort(key=lambda f: _h(key + "\0" + f["id"]))
        comps = repo["components"]
        for f in pool[: repo["size"]]:
            comp = comps[_h(key + "\0comp\0" + f["id"]) % len(comps)]
            out.append(
                Learning(
                    f"{f['id']}@{name}",
                    "repo",
                    key,
                    f"{comp}: {f['title']}",
                    f["rule"],
                    f["key_insight"],
                    [f["bank"], comp],
                    banks[f["bank"]],
                    "bench/data/recall_eval/facts.tsv",
                    False,
                    {"problem": f"Found while working on {comp}: {f['key_insight']}"},
                )
            )
    return out


def stack_mismatch(
    applies_to: list[str], repo: dict, languages: list[str], frameworks: list[str]
) -> bool:
    """Whether a learning made for one stack was told in a repository of another.

    A learning names the languages and frameworks it applies to (``applies_to``; tools such
    as git, docker or postgres are not judged). It does not fit a repository when it names a
    language and none of them is the repository's, or names a framework and none of them is
    the repository's. A TypeScript repository counts as JavaScript too.
    """
    langs = {x for x in applies_to if x in languages}
    fws = {x for x in applies_to if x in frameworks}
    repo_langs = set(repo.get("languages", []))
    if "typescript" in repo_langs:
        repo_langs.add("javascript")
    if langs and not langs & repo_langs:
        return True
    return bool(fws and not fws & set(repo.get("frameworks", [])))
