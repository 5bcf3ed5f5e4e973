"""The dashboard's open items per repository, from the real reflection store (escaped)."""

from __future__ import annotations

import pytest
from recall_support import make_repo

pytest.importorskip("starlette")
pytest.importorskip("httpx")

from starlette.testclient import TestClient  # noqa: E402

from reflect_jobs.dashboard.app import create_app  # noqa: E402
from reflect_jobs.reflections.store import open_store  # noqa: E402

HOSTILE = "<script>alert('item')</script>"


def test_open_items_per_repository_are_real_counted_and_escaped(env, tmp_path):
    shop = make_repo(tmp_path / "shop", "https://github.com/acme/shop.git")
    web = make_repo(tmp_path / "web", "git@github.com:acme/web.git")
    ids = {}
    for repo, titles in ((shop, ["Finish port", HOSTILE, "Closed one"]), (web, ["Ask CI"])):
        st = open_store(str(repo), repo, dict(env))
        try:
            for t in titles:
                kind = "handoff" if t == HOSTILE else "action"
                ids[t] = st.add(kind, t)[0].id
            if repo == shop:
                st.change("done", ids["Closed one"], note="shipped")
            key = st.repo.key
            ids[repo.name] = key
        finally:
            st.close()
    app = create_app(env.settings(), token="t", schedule=lambda stage, job: None)
    client = TestClient(app, base_url="http://127.0.0.1:8377", client=("127.0.0.1", 50000))
    body = client.get("/api/open-items").json()
    assert body["available"] is True
    repos = body["repositories"]
    assert [(r["repository"], r["open"]) for r in repos] == [(ids["shop"], 2), (ids["web"], 1)]
    assert [i["id"] for i in repos[0]["items"]] == [ids[HOSTILE], ids["Finish port"]]
    page = client.get("/").text
    assert HOSTILE not in page and "&lt;script&gt;alert(&#x27;item&#x27;)&lt;/script&gt;" in page
    assert ids["Finish port"] in page and "Closed one" not in page
