"""Running pircd for real: the JSON log format, the systemd units and the container recipe in conf/.

No service manager or container engine runs here, so the files are checked for what they promise:
the units parse (``systemd-analyze verify`` where it is installed, and a key-by-key reading
everywhere) and name the paths and signal pircd uses; the Containerfile copies files that exist,
runs as a user of its own, keeps the database on a volume and exposes the configuration's ports;
its health check command, run as written, passes against a live server and fails without one.
"""

from __future__ import annotations

import json
import logging
import re
import shutil
import subprocess
import sys
from pathlib import Path

from ircd.config import load, parse_hostport
from ircd.log import PlainFormatter, fields_of, setup_logging
from tests.harness import config
from tests.live import IRCClient, LiveServer
from tests.proc import ServerProcess, write_config

ROOT = Path(__file__).resolve().parent.parent
CONF = ROOT / "conf"


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


def test_a_plain_line_stamps_each_record_with_its_own_second_and_milliseconds():
    formatter = PlainFormatter()

    def line(second: int, msecs: int) -> str:
        record = logging.LogRecord("pircd", logging.INFO, __file__, 1, "connect id=%d", (7,), None)
        record.created, record.msecs = second + msecs / 1000, msecs
        return formatter.format(record)

    # 2026-12-06T19:41:27Z, twice within its second, then the next second and an earlier one
    assert line(1796586087, 123) == "2026-12-06T19:41:27.123Z INFO    pircd: connect id=7"
    assert line(1796586087, 999) == "2026-12-06T19:41:27.999Z INFO    pircd: connect id=7"
    assert line(1796586088, 0) == "2026-12-06T19:41:28.000Z INFO    pircd: connect id=7"
    assert line(1796586000, 500) == "2026-12-06T19:40:00.500Z INFO    pircd: connect id=7"


def test_setup_logging_makes_records_without_the_callers_line_or_the_threads_name(monkeypatch):
    for name in ("_srcfile", "logThreads", "logProcesses", "logMultiprocessing"):
        monkeypatch.setattr(logging, name, getattr(logging, name))  # restored after the test
    root = logging.getLogger("pircd")
    monkeypatch.setattr(root, "handlers", [])
    monkeypatch.setattr(root, "propagate", root.propagate)
    level = root.level
    records: list[logging.LogRecord] = []
    try:
        setup_logging("plain", "info")
        seen = logging.Handler()
        seen.emit = records.append  # type: ignore[method-assign]
        root.addHandler(seen)
        logging.getLogger("pircd.test").info("connect id=%d", 1)
    finally:
        root.setLevel(level)  # and the loggers' cached levels with it
    (record,) = records
    # what the formatters print is there; what the logging module looks up per record only for
    # formats that print it is not (the caller's file and line are a walk of the stack)
    assert (record.name, record.getMessage()) == ("pircd.test", "connect id=1")
    assert (record.lineno, record.funcName) == (0, "(unknown function)")
    assert (record.threadName, record.processName) == (None, None)


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


# the systemd units -----------------------------------------------------------------------------


def _unit(path: Path) -> dict[str, dict[str, list[str]]]:
    """Sections -> key -> values (a key may repeat), as systemd reads a unit file."""
    sections: dict[str, dict[str, list[str]]] = {}
    current: dict[str, list[str]] | None = None
    for raw in path.read_text().splitlines():
        line = raw.strip()
        if not line or line[0] in "#;":
            continue
        if line.startswith("["):
            current = sections.setdefault(line.strip("[]"), {})
            continue
        key, sep, val = line.partition("=")
        assert sep and current is not None, f"{path.name}: {raw!r} is not KEY=VALUE inside a section"
        current.setdefault(key.strip(), []).append(val.strip())
    return sections


def test_the_service_runs_pircd_as_its_own_user_and_stops_it_with_sigterm():
    unit = _unit(CONF / "pircd.service")
    service = unit["Service"]
    one = {key: values[-1] for key, values in service.items()}
    assert (one["User"], one["Group"], one["Type"]) == ("pircd", "pircd", "exec")
    assert one["KillSignal"] == "SIGTERM"  # pircd's clean shutdown (ircd/net/runner.py), exit status 0
    assert one["Restart"] == "on-failure"
    assert one["ExecReload"] == "/bin/kill -HUP $MAINPID"  # SIGHUP: REHASH
    exec_start = one["ExecStart"].split()
    assert exec_start[1:3] == ["serve", "--config"]
    assert one["Environment"] == f"PIRCD_CONFIG={exec_start[3]}"  # the CLI finds the server's file
    assert one["StateDirectory"] == "pircd" and one["WorkingDirectory"] == "/var/lib/pircd"
    assert one["ReadWritePaths"] == "/var/lib/pircd"
    assert (one["NoNewPrivileges"], one["ProtectSystem"], one["ProtectHome"]) == ("yes", "strict", "yes")
    assert one["CapabilityBoundingSet"] == "" and int(one["LimitNOFILE"]) >= 65536
    assert unit["Install"]["WantedBy"] == ["multi-user.target"]
    backup = {key: values[-1] for key, values in _unit(CONF / "pircd-backup.service")["Service"].items()}
    assert backup["User"] == "pircd" and " backup " in backup["ExecStart"]
    assert backup["ReadWritePaths"].split() == ["/var/lib/pircd", "/var/backups/pircd"]
    timer = _unit(CONF / "pircd-backup.timer")
    assert timer["Timer"]["Persistent"] == ["true"] and timer["Install"]["WantedBy"] == ["timers.target"]


def test_systemd_accepts_every_key_of_the_units(tmp_path):
    """``systemd-analyze verify`` also reads each key (an unknown one is reported, not fatal: the
    output must be empty). The units name /opt/pircd/bin/pircd, which verify wants to exist: the
    copies checked here name this machine's pircd instead."""
    pircd = shutil.which("pircd") or sys.executable
    names = ["pircd.service", "pircd-backup.service", "pircd-backup.timer"]
    for name in names:
        (tmp_path / name).write_text((CONF / name).read_text().replace("/opt/pircd/bin/pircd", pircd))
    analyze = shutil.which("systemd-analyze")
    if analyze is None:  # not installed: the key-by-key reading above is the check
        for name in names:
            assert _unit(tmp_path / name)
        return
    result = subprocess.run([analyze, "verify", "--man=no", *(str(tmp_path / n) for n in names)],
                            capture_output=True, text=True, timeout=60)
    assert (result.returncode, result.stdout + result.stderr) == (0, "")


# the container image ---------------------------------------------------------------------------


def _instructions(path: Path) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) of a Containerfile, continuation lines joined."""
    out: list[tuple[str, str]] = []
    pending = ""
    for raw in path.read_text().splitlines():
        if not pending and (not raw.strip() or raw.lstrip().startswith("#")):
            continue
        if raw.endswith("\\"):
            pending += raw[:-1] + " "
            continue
        word, _, rest = (pending + raw).strip().partition(" ")
        out.append((word.upper(), rest.strip()))
        pending = ""
    return out


def _healthcheck_command() -> list[str]:
    (args,) = [a for word, a in _instructions(CONF / "Containerfile") if word == "HEALTHCHECK"]
    return json.loads(args[args.index("CMD ") + 4:])


def test_the_container_runs_as_a_user_with_the_database_on_a_volume():
    steps = _instructions(CONF / "Containerfile")
    words = [word for word, _ in steps]
    assert steps[0][0] == "FROM" and re.fullmatch(r"python:3\.\d+-slim", steps[0][1])
    for word, args in steps:
        if word == "COPY":  # every source it copies exists in the tree
            for source in args.split()[:-1]:
                assert (ROOT / source).exists(), source
    assert ("RUN", "pip install . && rm -rf /src") in steps
    user = [args for word, args in steps if word == "USER"]
    assert user == ["pircd"] and words.index("USER") > words.index("RUN")  # root only to install
    config_at = next(args.split()[-1] for word, args in steps if word == "COPY" and "container.toml" in args)
    assert ("ENV", f"PIRCD_CONFIG={config_at}") in steps
    cfg = load(CONF / "container.toml")
    (volume,) = [json.loads(args) for word, args in steps if word == "VOLUME"]
    assert volume == [str(Path(cfg.server.db).parent)]
    assert all(parse_hostport(a)[0] == "0.0.0.0" for a in cfg.server.listen + cfg.http.listen)
    (exposed,) = [args.split() for word, args in steps if word == "EXPOSE"]
    ports = {str(parse_hostport(a)[1]) for a in cfg.server.listen + cfg.http.listen}
    assert ports <= set(exposed) and "6697" in exposed
    assert f":{parse_hostport(cfg.http.listen[0])[1]}/healthz" in " ".join(_healthcheck_command())
    assert ("STOPSIGNAL", "SIGTERM") in steps and steps[-1] == ("CMD", '["pircd", "serve"]')


def test_the_health_check_passes_against_a_live_server_and_fails_without_one():
    command = _healthcheck_command()
    assert command[0] == "python"
    server = LiveServer(config(server={"listen": ["127.0.0.1:0"]})).start()
    port = str(server.server.http.addresses[0][1])
    try:
        run = [sys.executable, *(part.replace("6680", port) for part in command[1:])]
        assert subprocess.run(run, capture_output=True, timeout=30).returncode == 0
    finally:
        server.stop()
    assert subprocess.run(run, capture_output=True, timeout=30).returncode != 0


def test_serve_leaves_what_start_up_made_out_of_the_full_garbage_collections():
    """``serve`` freezes the objects alive once the server is ready (gc.freeze): a full collection
    then walks only what was made since, and a storm of registrations does not wait behind one
    over the whole start-up heap. Run in a process of its own: the freeze is process-wide."""
    script = """
import asyncio, gc, os, signal
from ircd.net.runner import serve
from ircd.server import Server
from tests.harness import config

before = gc.get_freeze_count()
server = Server(config(server={"listen": ["127.0.0.1:0"]}, http={"enabled": False}))

def ready():  # runs on the loop right after the server said it is ready
    print(before, gc.get_freeze_count(), flush=True)
    os.kill(os.getpid(), signal.SIGTERM)

server.on_ready.append(lambda: asyncio.get_running_loop().call_soon(ready))
serve(server, use_uvloop=False)
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60,
                          cwd=ROOT)
    assert done.returncode == 0, done.stderr[-2000:]
    before, after = map(int, done.stdout.split())
    assert before == 0 and after > 10_000
