"""A real HTTP receiver for webhook tests: a stdlib HTTP server on 127.0.0.1 port 0 in a thread.

It records every request (method, path, headers, body) and answers with the next scripted status
(200 once the script is used up). ``hang()`` makes it hold requests without answering until
``release()``; ``gate(path)`` holds the requests to one path until ``let_through(path)`` lets one
answer; tests wait for arrivals with ``wait_for(n)`` or ``wait_until(condition)`` (conditions, not sleeps).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Received:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes


class Receiver:
    def __init__(self, host: str = "127.0.0.1") -> None:
        self.requests: list[Received] = []
        self.script: list[int] = []
        self.default = 200
        self.extra_body = b""  # sent after a scripted status's short body (response-size tests)
        self.content_length: int | None = None
        self._cond = threading.Condition()
        self._hold = threading.Event()
        self._hold.set()
        self._gates: dict[str, threading.Semaphore] = {}
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                body = self.rfile.read(length)
                with receiver._cond:
                    receiver.requests.append(Received("POST", self.path, {k.lower(): v for k, v in self.headers.items()},
                                                      body))
                    status = receiver.script.pop(0) if receiver.script else receiver.default
                    receiver._cond.notify_all()
                receiver._hold.wait(60)
                gate = receiver._gates.get(self.path)
                if gate is not None:
                    gate.acquire(timeout=60)
                try:
                    self.send_response(status)
                    payload = b"ok"
                    if receiver.extra_body:
                        self.send_header("content-length", str(receiver.content_length or len(receiver.extra_body)))
                        self.end_headers()
                        self.wfile.write(receiver.extra_body)
                        self.wfile.flush()
                        receiver._hold.clear()  # then hold the connection open (the body never ends)
                        receiver._hold.wait(60)
                        return
                    if status in (301, 302):
                        self.send_header("location", "http://127.0.0.1:9/elsewhere")
                    self.send_header("content-length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload)
                except OSError:  # the server gave up on this request (timeout, kill -9)
                    pass

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer((host, 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.url = f"http://{host}:{self.port}/hook"
        self._thread = threading.Thread(target=self.server.serve_forever, args=(0.02,), daemon=True)
        self._thread.start()

    def hang(self) -> None:
        self._hold.clear()

    def release(self) -> None:
        self._hold.set()

    def gate(self, path: str) -> None:
        self._gates[path] = threading.Semaphore(0)

    def let_through(self, path: str, count: int = 1) -> None:
        self._gates[path].release(count)

    def wait_until(self, condition: Any, timeout: float = 30.0) -> list[Received]:
        """Wait until ``condition(requests)`` holds; the requests then."""
        with self._cond:
            if not self._cond.wait_for(lambda: condition(self.requests), timeout):
                raise AssertionError(f"not met after {len(self.requests)} requests")
            return list(self.requests)

    def wait_for(self, count: int, timeout: float = 30.0) -> list[Received]:
        with self._cond:
            if not self._cond.wait_for(lambda: len(self.requests) >= count, timeout):
                raise AssertionError(f"{len(self.requests)} requests arrived, not {count}")
            return list(self.requests)

    def close(self) -> None:
        self._hold.set()
        for gate in self._gates.values():
            gate.release(1000)
        self.server.shutdown()
        self.server.server_close()
