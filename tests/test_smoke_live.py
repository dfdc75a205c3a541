from __future__ import annotations


def test_register_join_and_talk(live, client_factory):
    srv = live()
    alice = client_factory(srv.port)
    bob = client_factory(srv.port)
    alice.register("alice")
    bob.register("bob")
    alice.send("JOIN #room")
    alice.sync()
    bob.send("JOIN #room")
    bob.sync()
    assert [m.command for m in alice.sync()] == ["JOIN"]
    bob.send("PRIVMSG #room :hello")
    bob.sync()
    got = alice.sync()
    assert [(m.source, m.command, m.params) for m in got] == [
        ("bob!bob@127.0.0.1", "PRIVMSG", ["#room", "hello"])
    ]
