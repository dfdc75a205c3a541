"""Running pircd for real: the JSON log format."""

from __future__ import annotations

import json
import re

from ircd.log import fields_of
from tests.live import IRCClient
from tests.proc import ServerProcess, write_config

# JSON logs -------------------------------------------------------------------------------------


def test_the_key_value_pairs_of_a_message_become_fields():
    assert fields_of("connect id=1 ip=127.0.0.1 tls=False") == {"id": 1, "ip": "127.0.0.1", "tls": False}
    assert fields_of("kill by=root target=victim reason='Killed (root (spamming))'") == {
        "by": "root", "target": "victim", "reason": "Killed (root (spamming))"}
    assert fields_of("handler error id=3 line=b'PRIVMSG #a :hi there'") == {"id": 3, "line": "PRIVMSG #a :hi there"}
    assert fields_of("webhook of deleted account x removed url=https://h.example/a?b=c") == {
        "url": "https://h.example/a?b=c"}  # the b=c inside a value is not a pair
    assert fields_of("listening on 127.0.0.1:6667 (HTTP)") == {}
    assert fields_of("odd msg=x level=y time=z n=-4") == {"n": -4}  # the object's own keys stay its own


def test_serve_log_format_json_writes_one_object_per_line_with_the_fields(tmp_path):
    server = ServerProcess(write_config(tmp_path), "--log-format", "json")
    try:
        client = IRCClient(server.port)
        client.register("alice")
        client.send("QUIT :bye now")
        client.read_all_until_close()
        client.close()
        server.wait_for_log("disconnect id=1")
    finally:
        assert server.terminate() == 0
    records = [json.loads(line) for line in server.log]  # every line is one JSON object
    assert all(list(r)[:4] == ["time", "level", "logger", "msg"] for r in records)
    assert all(re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", r["time"]) for r in records)
    connect = next(r for r in records if r["msg"].startswith("connect "))
    assert {k: v for k, v in connect.items() if k != "time"} == {
        "level": "info", "logger": "pircd", "msg": "connect id=1 ip=127.0.0.1 tls=False",
        "id": 1, "ip": "127.0.0.1", "tls": False}
    gone = next(r for r in records if r["msg"].startswith("disconnect "))
    assert (gone["id"], gone["nick"], gone["reason"]) == (1, "alice", "Quit: bye now")
    assert records[-1]["msg"] == "stopped"
