"""TLS: a certificate from ``pircd init``, a TLS listener on port 0, registration over TLS, WHOIS 671."""

from __future__ import annotations

import ssl

from click.testing import CliRunner

from ircd.cli import main
from ircd.config import load


def _client_context(cafile: str) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=cafile)
    ctx.check_hostname = True
    return ctx


def test_init_writes_config_and_certificate(tmp_path):
    """`pircd init DIR` writes a commented config and a self-signed certificate (TLS in one step)."""
    result = CliRunner().invoke(main, ["init", str(tmp_path / "srv"), "--name", "irc.example.test"])
    assert result.exit_code == 0, result.output
    config = load(tmp_path / "srv" / "pircd.toml")
    assert config.server.name == "irc.example.test"
    assert config.server.tls_listen == ["127.0.0.1:6697"]
    assert config.server.tls_cert == str((tmp_path / "srv" / "tls" / "cert.pem").resolve())
    assert (tmp_path / "srv" / "tls" / "key.pem").stat().st_mode & 0o777 == 0o600
    # refuses to overwrite without --force
    again = CliRunner().invoke(main, ["init", str(tmp_path / "srv")])
    assert again.exit_code == 1


def test_register_over_tls_and_whois_shows_secure(tmp_path, live, client_factory):
    """Modern IRC RPL_WHOISSECURE (671): "<client> <nick> :is using a secure connection\"."""
    result = CliRunner().invoke(main, ["init", str(tmp_path), "--name", "irc.test"])
    assert result.exit_code == 0, result.output
    cfg = load(tmp_path / "pircd.toml")
    srv = live(server={
        "tls_listen": ["127.0.0.1:0"],
        "tls_cert": cfg.server.tls_cert,
        "tls_key": cfg.server.tls_key,
    })
    plain_port, tls_port = srv.addresses[0][1], srv.addresses[1][1]
    ctx = _client_context(cfg.server.tls_cert)
    # the client verifies the self-signed certificate for the server name
    secure = client_factory(tls_port, tls=ctx, server_hostname="irc.test")
    welcome = secure.register("alice")
    assert welcome[0].command == "001"
    assert secure.sock.version() in ("TLSv1.2", "TLSv1.3")
    plain = client_factory(plain_port)
    plain.register("bob")
    plain.send("WHOIS alice")
    replies = plain.sync()
    assert [m.command for m in replies] == ["311", "312", "671", "317", "318"]
    assert replies[2].params == ["bob", "alice", "is using a secure connection"]
    secure.send("WHOIS bob")
    assert "671" not in [m.command for m in secure.sync()]
    # a message crosses from TLS to plain
    secure.send("PRIVMSG bob :over tls")
    secure.sync()
    assert [(m.command, m.params) for m in plain.sync()] == [("PRIVMSG", ["bob", "over tls"])]


def test_plaintext_on_tls_port_does_not_hurt_the_server(tmp_path, live, client_factory):
    """A client speaking plain IRC to the TLS port fails its handshake; the server keeps serving."""
    from ircd.tlsgen import write_self_signed

    cert, key = tmp_path / "c.pem", tmp_path / "k.pem"
    write_self_signed(cert, key, "irc.test")
    srv = live(server={"tls_listen": ["127.0.0.1:0"], "tls_cert": str(cert), "tls_key": str(key)})
    wrong = client_factory(srv.addresses[1][1], timeout=5)
    wrong.send("NICK x")
    wrong.send("USER x 0 * :x")
    assert wrong.read_all_until_close() == []
    ok = client_factory(srv.addresses[0][1])
    assert ok.register("alice")[0].command == "001"
