"""The passthrough "LLM" nano-graphrag talks to: no prompt ever leaves the process.

nano-graphrag's pipeline calls a model to extract entities from a chunk, to summarise merged
entity descriptions and to write community reports.  We keep its parsers and mergers but
answer every prompt here, recognising the prompt by the fixed prefix of nano-graphrag's
template:

* entity extraction: the chunk text we hand to ``extract_entities`` is a marker naming the
  chunk key (:data:`MARKER`, e.g. ``<<reflect-chunk:chunk-...>>``); the answer is the records
  registered for exactly that chunk in :attr:`PassthroughLLM.records`.  It never guesses: a
  prompt for a chunk we were not told about gets a placeholder entity unique to its text,
  never another note's sidecar.
* community reports: a JSON report built from the community's entity table.
* entity summaries: :func:`~.sidecars.summarize_descriptions` of the description list.
* global-map / gleaning prompts: empty answers.
"""

from __future__ import annotations

import ast
import hashlib
import json
import logging
import re
from collections import Counter
from typing import Any

from nano_graphrag.prompt import GRAPH_FIELD_SEP, PROMPTS

from .sidecars import COMPLETION_DELIMITER, TUPLE_DELIMITER, summarize_descriptions

log = logging.getLogger(__name__)

MARKER = "<<reflect-chunk:{}>>"
_MARKER_RE = re.compile(r"<<reflect-chunk:(chunk-[0-9a-f]{32})>>")
_TD, _CD = TUPLE_DELIMITER, COMPLETION_DELIMITER


def _prefix(template: str) -> str:
    return template.split("{", 1)[0]


_P_EXTRACT = _prefix(PROMPTS["entity_extraction"])
_P_REPORT = _prefix(PROMPTS["community_report"])
_P_SUMMARY = _prefix(PROMPTS["summarize_entity_descriptions"])
_P_GLOBAL_MAP = _prefix(PROMPTS["global_map_rag_points"])
_P_CONTINUE = PROMPTS["entiti_continue_extraction"]
_P_IFLOOP = PROMPTS["entiti_if_loop_extraction"]


class PassthroughLLM:
    """The fake model nano-graphrag talks to (``best_model_func`` and ``cheap_model_func``).

    Attributes:
        records: chunk key -> extraction records, set by the index for one batch.
        calls: How many prompts of each kind were answered (``extract``, ``report``, ...).
    """

    def __init__(self) -> None:
        self.records: dict[str, str] = {}  # chunk key -> records text (set per batch)
        self.calls: Counter[str] = Counter()

    async def __call__(
        self,
        prompt: str,
        system_prompt: str | None = None,
        history_messages: list | None = None,
        **kwargs: Any,
    ) -> str:
        """nano-graphrag's LLM call signature, answered by :meth:`answer`.

        Args:
            prompt: The prompt nano-graphrag built.
            system_prompt: Its system prompt, if any.
            history_messages: Ignored (each prompt stands alone).
            **kwargs: Ignored (model options nano-graphrag passes).

        Returns:
            The answer nano-graphrag expects for that kind of prompt.
        """
        return self.answer(prompt, system_prompt)

    def answer(self, prompt: str, system_prompt: str | None = None) -> str:
        """Answer one prompt.

        Args:
            prompt: The user prompt nano-graphrag built.
            system_prompt: Its system prompt (only the global-map prompt uses one).

        Returns:
            The answer text in the format nano-graphrag parses for that kind of prompt.
        """
        prompt = prompt or ""
        if prompt.startswith(_P_EXTRACT):
            self.calls["extract"] += 1
            return self._extraction(prompt)
        if prompt.startswith(_P_REPORT):
            self.calls["report"] += 1
            return json.dumps(_community_report(prompt))
        if prompt.startswith(_P_SUMMARY):
            self.calls["summary"] += 1
            return _entity_summary(prompt)
        if system_prompt and system_prompt.startswith(_P_GLOBAL_MAP):
            self.calls["global_map"] += 1
            return json.dumps({"points": []})
        if prompt.startswith(_P_CONTINUE):
            self.calls["glean"] += 1
            return _CD
        if prompt.startswith(_P_IFLOOP):
            self.calls["glean"] += 1
            return "NO"
        self.calls["other"] += 1
        return "No additional information available."

    def _extraction(self, prompt: str) -> str:
        tail = prompt.rsplit("-Real Data-", 1)[-1]
        found = _MARKER_RE.findall(tail)
        if found and found[-1] in self.records:
            body = self.records[found[-1]]
            return f"{body}{_CD}" if body else _CD
        # Text we were not told about (e.g. someone calling GraphRAG.insert directly): a
        # placeholder entity unique to that text, never another note's sidecar.
        m = re.search(r"Text: (.*)\n#+\nOutput:", tail, re.S)
        text = m.group(1) if m else tail
        h = hashlib.md5(text.encode()).hexdigest()[:12]
        log.warning("extraction prompt for an unregistered chunk; placeholder entity %s", h)
        return f'("entity"{_TD}"unattributed {h}"{_TD}"note"{_TD}"text without a sidecar"){_CD}'


def _csv_section(prompt: str, header: str) -> list[list[str]]:
    m = re.search(rf"-----{header}-----\s*```csv\n(.*?)```", prompt, re.S)
    if not m:
        return []
    rows = []
    for line in m.group(1).splitlines()[1:]:
        cells = [c.strip().strip('"') for c in line.split(",\t")]
        if len(cells) >= 4:
            rows.append(cells)
    return rows


def _community_report(prompt: str) -> dict:
    body = prompt.rsplit("# Real Data", 1)[-1]
    ents = _csv_section(body, "Entities")
    names = [r[1] for r in ents if r[1]]
    title = ", ".join(names[:3]) or "Community"
    summary = summarize_descriptions([f"{r[1]}: {r[3]}" for r in ents], max_chars=1000)
    findings = [{"summary": r[1], "explanation": r[3][:300]} for r in ents[:5]]
    return {
        "title": title,
        "summary": summary or title,
        "rating": float(min(10, max(1, len(ents)))),
        "rating_explanation": "Number of entities in the community (no model at index time).",
        "findings": findings,
    }


def _entity_summary(prompt: str) -> str:
    m = re.search(r"Description List: (.*)\n#######", prompt, re.S)
    raw = m.group(1) if m else ""
    descs: list[str]
    try:
        val = ast.literal_eval(raw)
        descs = [str(x) for x in val] if isinstance(val, list | tuple) else [str(val)]
    except Exception:
        descs = raw.split(GRAPH_FIELD_SEP)
    return summarize_descriptions(descs)
