#!/usr/bin/env python3
"""A cache server speaking only bazel-remote's HTTP layout: GET and PUT of
/ac/<hex> and /cas/<hex> under a directory; every other method or path is
refused (405/400). Each request is logged as "METHOD PATH STATUS" to the
log file, so a test can check what the client asked for.

usage: http-cache.py DIR LOGFILE  (prints the port it listens on)"""
import http.server
import os
import re
import sys

ROOT, LOG = sys.argv[1], sys.argv[2]
PATH = re.compile(r"^/(ac|cas)/[0-9a-f]{1,128}$")


class Handler(http.server.BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def record(self, status):
        with open(LOG, "a") as log:
            log.write(f"{self.command} {self.path} {status}\n")

    def answer(self, status, body=b""):
        self.record(status)
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if body and self.command != "HEAD":
            self.wfile.write(body)

    def do_GET(self):
        if not PATH.match(self.path):
            return self.answer(400)
        try:
            with open(os.path.join(ROOT, self.path[1:]), "rb") as f:
                return self.answer(200, f.read())
        except FileNotFoundError:
            return self.answer(404)

    def do_PUT(self):
        length = int(self.headers.get("Content-Length", "0"))
        body = self.rfile.read(length)
        if not PATH.match(self.path):
            return self.answer(400)
        target = os.path.join(ROOT, self.path[1:])
        os.makedirs(os.path.dirname(target), exist_ok=True)
        with open(target + ".tmp", "wb") as f:
            f.write(body)
        os.replace(target + ".tmp", target)
        return self.answer(201)

    def refuse(self):
        return self.answer(405)

    do_HEAD = do_POST = do_DELETE = do_MKCOL = do_PROPFIND = do_MOVE = do_COPY = refuse


server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
print(server.server_address[1], flush=True)
server.serve_forever()
