"""Sidecars -> nano-graphrag records, and the passthrough LLM that hands them out."""

from __future__ import annotations

import asyncio

from graph_notes import IndexDoc, node_docs

from reflect_jobs.index.graphrag.passthrough import PassthroughLLM
from reflect_jobs.index.graphrag.sidecars import sidecar_contribution


def test_each_doc_gets_its_own_sidecar_entities_b13(fresh):
    a = IndexDoc(
        "A",
        "Note A is about the alpha subsystem and its alpha cache.",
        {"entities": [{"name": "AlphaCache", "type": "component", "description": "a"}]},
    )
    b = IndexDoc(
        "B",
        "Note B is about the beta queue.",
        {"entities": [{"name": "BetaQueue", "type": "component", "description": "b"}]},
    )
    c = IndexDoc(
        "C",
        "Note C is about the gamma scheduler. " * 60,  # several chunks
        {
            "entities": [
                {"name": "GammaScheduler", "type": "component", "description": "c"},
                {"name": "BetaQueue", "type": "component", "description": "c-uses"},
            ],
            "relationships": [
                {
                    "source": "GammaScheduler",
                    "target": "BetaQueue",
                    "description": "feeds",
                    "strength": 3,
                }
            ],
        },
    )
    fresh.upsert([a])
    fresh.upsert([c, b])  # second batch, not in corpus order
    g = fresh.rag.chunk_entity_relation_graph.graph
    assert node_docs(fresh, '"ALPHACACHE"') == {"A"}
    assert node_docs(fresh, '"BETAQUEUE"') == {"B", "C"}
    assert node_docs(fresh, '"GAMMASCHEDULER"') == {"C"}
    # C has several chunks: each carries its entities, the relationship only once
    assert len(fresh.docs["C"]["chunks"]) > 1
    assert len(node_docs(fresh, '"GAMMASCHEDULER"')) == 1
    assert g.edges['"BETAQUEUE"', '"GAMMASCHEDULER"']["weight"] == 3
    # A's node never received anything from the second batch
    assert g.nodes['"ALPHACACHE"']["description"] == '"a"'
    assert set(g.nodes) == {'"ALPHACACHE"', '"BETAQUEUE"', '"GAMMASCHEDULER"'}


def test_passthrough_never_hands_out_a_queued_sidecar():
    from nano_graphrag.prompt import PROMPTS

    llm = PassthroughLLM()
    llm.records = {"chunk-" + "0" * 32: '("entity"<|>"SOMEONE ELSE"<|>"X"<|>"y")'}
    prompt = PROMPTS["entity_extraction"].format(
        tuple_delimiter="<|>",
        record_delimiter="##",
        completion_delimiter="<|COMPLETE|>",
        entity_types="a,b",
        input_text="some unrelated text",
    )
    out = asyncio.run(llm(prompt))
    assert "SOMEONE ELSE" not in out and "unattributed" in out
    # community report / map / summary prompts get well-formed answers
    import json

    rep = PROMPTS["community_report"].format(
        input_text="-----Entities-----\n```csv\n"
        '"id",\t"entity",\t"type",\t"description",\t"degree"\n'
        '"0",\t"REDIS",\t"TOOL",\t"kv store",\t"1"\n```'
    )
    data = json.loads(asyncio.run(llm(rep)))
    assert data["title"] == "REDIS" and data["findings"]
    assert json.loads(asyncio.run(llm("q", system_prompt=PROMPTS["global_map_rag_points"]))) == {
        "points": []
    }
    summ = PROMPTS["summarize_entity_descriptions"].format(
        entity_name="X", description_list=["one", "two", "one"]
    )
    assert asyncio.run(llm(summ)) == "one; two"


def test_sidecar_values_are_escaped():
    doc = IndexDoc(
        "q",
        "text",
        {
            "entities": [
                {
                    "name": 'He said "hi"<|>##x\nnext',
                    "type": 'quo"te',
                    "description": "a<|COMPLETE|>b",
                }
            ],
            "relationships": [],
        },
    )
    con = sidecar_contribution(doc)
    assert con.entities == [['"HE SAID HI X NEXT"', '"QUO TE"', '"a b"']]
    assert con.entity_records.count("<|>") == 3 and "##" not in con.entity_records


def test_doc_without_entities_gets_placeholder(fresh):
    fresh.upsert([IndexDoc("bare-note", "# Bare\n\nA note with no sidecar at all.", {})])
    assert node_docs(fresh, '"NOTE BARE-NOTE"') == {"bare-note"}
    assert fresh.query("a note with no sidecar", mode="naive", k=1)[0][0] == "bare-note"
    assert fresh.query("a note with no sidecar", mode="local", k=1)[0][0] == "bare-note"
