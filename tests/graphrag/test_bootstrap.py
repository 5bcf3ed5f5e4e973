"""Offline bootstrap (reflect_jobs.index.graphrag.bootstrap): tiktoken without network."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

from graph_notes import REPO


def test_offline_tokenizer_with_network_disabled(tmp_path):
    code = textwrap.dedent(
        """
        import socket, sys
        def _no_net(*a, **k):
            raise OSError("network disabled by test")
        socket.socket.connect = _no_net
        socket.create_connection = _no_net
        from reflect_jobs.index.graphrag import bootstrap
        bootstrap.install(); bootstrap.install()  # idempotent
        import tiktoken
        enc = tiktoken.encoding_for_model("gpt-4o")
        assert enc.name == "o200k_base", enc.name
        assert enc.decode(enc.encode("hello offline world")) == "hello offline world"
        assert tiktoken.get_encoding("cl100k_base").encode("hello world") == [15339, 1917]
        try:  # other encodings are not served from the bundle: they still try the network
            tiktoken.get_encoding("r50k_base")
        except Exception as e:
            print("OTHER-FAILED", type(e).__name__)
        else:
            print("OTHER-LOADED")
        print("OK")
        """
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("TIKTOKEN")}
    env.update(
        TIKTOKEN_CACHE_DIR=str(tmp_path / "ttcache"),
        HTTPS_PROXY="http://127.0.0.1:9",
        HTTP_PROXY="http://127.0.0.1:9",
        PYTHONPATH=str(REPO),
    )
    r = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60
    )
    assert r.returncode == 0, r.stderr
    assert "OK" in r.stdout
    assert "OTHER-FAILED" in r.stdout  # r50k_base was not answered by our patch
