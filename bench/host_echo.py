"""A trivial hosted agent (for tests and bench/host.py): it signs in with the environment the
host gives it (PIRCAN_IRC, PIRCAN_ACCOUNT, PIRCAN_TOKEN through SASL PLAIN), says "ready", then
answers every message in its inbox with "echo: <text>" as a reply, acknowledging each after its
reply's receipt, and waits for the next one. Standard library only."""

from __future__ import annotations

import base64
import os
import socket
import sys


def main() -> None:
    host, _, port = os.environ["PIRCAN_IRC"].rpartition(":")
    account, token = os.environ["PIRCAN_ACCOUNT"], os.environ["PIRCAN_TOKEN"]
    sock = socket.create_connection((host.strip("[]"), int(port)))
    f = sock.makefile("rb")

    def send(line: str) -> None:
        sock.sendall(line.encode() + b"\r\n")

    def lines():
        for raw in f:
            line = raw.decode("utf-8", "replace").rstrip("\r\n")
            if line.startswith("PING "):
                send("PONG " + line[5:])
                continue
            yield line

    send("CAP LS 302")
    send(f"NICK {account}")
    send(f"USER {account} 0 * :{account}")
    send("CAP REQ :sasl")
    send("AUTHENTICATE PLAIN")
    plain = base64.b64encode(f"{account}\0{account}\0{token}".encode()).decode()
    incoming = lines()
    for line in incoming:
        if line.split(" ")[-2:] == ["AUTHENTICATE", "+"] or line == "AUTHENTICATE +":
            send(f"AUTHENTICATE {plain}")
        elif " 903 " in line:
            send("CAP END")
        elif " 904 " in line or line.startswith("ERROR"):
            print("login failed:", line, file=sys.stderr, flush=True)
            sys.exit(3)
        elif " 001 " in line:
            break
    print("ready", flush=True)
    send("INBOX TAKE")
    for line in incoming:
        words = line.split(" ")
        if len(words) < 4 or words[1] != "INBOX":
            continue
        kind = words[3]
        if kind == "MESSAGE":  # INBOX <me> MESSAGE <id> <from> ... then BODY lines, then END
            message_id, sender = words[4], words[5]
            body = []
        elif kind in ("BODY", "BODY+"):
            text = line.partition(" :")[2] if " :" in line else words[5]
            body.append(text if kind == "BODY" or not body else body.pop() + text)
        elif kind == "END":
            send(f"SEND {sender} {message_id} :echo: {' '.join(body)}")
            send("INBOX TAKE")
        elif kind in ("EMPTY", "TIMEOUT", "CANCELLED", "GONE", "EVENT", "NOTHING"):
            send("INBOX WAIT * 0 kinds=message")


if __name__ == "__main__":
    main()
