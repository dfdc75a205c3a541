"""SASL EXTERNAL over TLS with a client certificate from the server's client CA."""

from __future__ import annotations

import ssl

from tests.harness import config
from tests.live import IRCClient, LiveServer
from tests.proc import cli, write_config


def test_sasl_external_with_issued_certificate(tmp_path):
    init = cli("init", str(tmp_path / "srv"), "--name", "irc.test")
    assert init.returncode == 0, init.stderr
    tls = tmp_path / "srv" / "tls"
    cfg_file = write_config(
        tmp_path,
        server={
            "tls_client_ca": str(tls / "client-ca.pem"),
            "tls_client_ca_key": str(tls / "client-ca.key"),
        },
        storage={"durability": "off"},
    )
    assert cli("account", "add", "carol", "--password-stdin", "--config", str(cfg_file), stdin="sesame123\n").returncode == 0
    issued = cli("account", "issue-cert", "carol", "--out", str(tmp_path), "--config", str(cfg_file))
    assert issued.returncode == 0, issued.stderr
    fingerprint = issued.stdout.split("fingerprint ")[1].split()[0]

    server = LiveServer(
        config(
            server={
                "listen": [],
                "tls_listen": ["127.0.0.1:0"],
                "tls_cert": str(tls / "cert.pem"),
                "tls_key": str(tls / "key.pem"),
                "tls_client_ca": str(tls / "client-ca.pem"),
            },
            storage={"durability": "off"},
        ),
        db=str(tmp_path / "pircd.db"),
    ).start()
    try:
        ctx = ssl.create_default_context()
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        ctx.load_cert_chain(str(tmp_path / "carol.pem"), str(tmp_path / "carol.key"))
        c = IRCClient(server.port, tls=ctx)
        c.send("CAP LS 302")
        # CAP LS 302 may take several lines: all but the last carry "*"
        lines = c.read_until(lambda m: m.command == "CAP" and m.params[2] != "*")
        offered = [tok for m in lines if m.command == "CAP" for tok in m.params[-1].split()]
        assert "sasl=PLAIN,SCRAM-SHA-256,EXTERNAL" in offered
        c.send("CAP REQ :sasl")
        c.send("NICK someone")
        c.send("USER c 0 * :C")
        c.send("AUTHENTICATE EXTERNAL")
        c.read_until(lambda m: m.command == "AUTHENTICATE")
        c.send("AUTHENTICATE +")
        got = c.read_until(lambda m: m.command in ("903", "904"))
        assert [(m.command, m.params[1:]) for m in got[-2:]] == [
            ("900", ["someone!c@127.0.0.1", "carol", "You are now logged in as carol"]),
            ("903", ["SASL authentication successful"]),
        ]
        c.send("CAP END")
        c.read_until(lambda m: m.command in ("376", "422"))
        c.send("WHOIS someone")
        whois = c.sync()
        assert ("276", ["someone", "someone", f"has client certificate fingerprint {fingerprint}"]) in [
            (m.command, m.params) for m in whois
        ]
        c.close()
        # without a certificate, EXTERNAL is refused and PLAIN still works on the same listener
        plain = ssl.create_default_context()
        plain.check_hostname = False
        plain.verify_mode = ssl.CERT_NONE
        d = IRCClient(server.port, tls=plain)
        d.send("CAP REQ :sasl")
        d.send("AUTHENTICATE EXTERNAL")
        assert [(m.command, m.params[1:]) for m in d.read_until(lambda m: m.command == "904")] == [
            ("CAP", ["ACK", "sasl"]),
            ("904", ["SASL EXTERNAL needs a TLS client certificate"]),
        ]
        d.close()
    finally:
        server.stop()
