#!/usr/bin/env python3
"""A scripted HTTP server on 127.0.0.1 that speaks whatever wire format its script holds.

The API writers' tests point the real ``openai`` / ``anthropic`` SDK clients at it. Stdlib only,
run as a subprocess (see README.md next to this file)::

    api_server.py --script SCRIPT.json --log REQUESTS.jsonl --port-file PORT

``SCRIPT.json``: ``{"routes": {"POST /v1/chat/completions": [RESPONSE, ...], ...}}``. The
n-th request to a route gets its n-th RESPONSE (the last one repeats); an unscripted route
gets a 404 in the OpenAI error shape. RESPONSE: ``{"status": 200, "headers": {...},
"body": <JSON value or string>, "sleep": seconds}``. Every request is appended to the log as
one JSON line ``{"method", "path", "headers" (lower-cased), "body" (decoded JSON or text),
"n"}`` BEFORE it is answered. The chosen port is written to the port file (atomically) once
the socket listens.
"""

import argparse
import json
import os
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

LOCK = threading.Lock()
COUNTS = {}


def load(path):
    with open(path, encoding="utf-8") as fh:
        return json.load(fh)


class Handler(BaseHTTPRequestHandler):
    script = {}
    log_path = ""
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):  # quiet
        pass

    def _route(self):
        path = urlsplit(self.path).path
        return f"{self.command} {path}", path

    def _handle(self):
        key, path = self._route()
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = raw.decode("utf-8", "replace")
        with LOCK:
            n = COUNTS.get(key, 0)
            COUNTS[key] = n + 1
            record = {
                "method": self.command,
                "path": path,
                "headers": {k.lower(): v for k, v in self.headers.items()},
                "body": body,
                "n": n + 1,
            }
            with open(self.log_path, "a", encoding="utf-8") as fh:
                fh.write(json.dumps(record) + "\n")
        answers = self.script.get("routes", {}).get(key)
        if not answers:
            answer = {
                "status": 404,
                "body": {"error": {"message": f"no route {key}", "type": "not_found"}},
            }
        else:
            answer = answers[min(n, len(answers) - 1)]
        if answer.get("sleep"):
            time.sleep(float(answer["sleep"]))
        payload = answer.get("body", "")
        data = (payload if isinstance(payload, str) else json.dumps(payload)).encode("utf-8")
        try:
            self.send_response(int(answer.get("status", 200)))
            headers = {"content-type": "application/json", **answer.get("headers", {})}
            for name, value in headers.items():
                self.send_header(name, str(value))
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):  # the client timed out and left
            pass

    do_GET = _handle
    do_POST = _handle


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--script", required=True)
    parser.add_argument("--log", required=True)
    parser.add_argument("--port-file", required=True)
    args = parser.parse_args()
    Handler.script = load(args.script)
    Handler.log_path = args.log
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    tmp = args.port_file + ".tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.write(str(server.server_address[1]))
    os.replace(tmp, args.port_file)
    server.serve_forever()


if __name__ == "__main__":
    main()
