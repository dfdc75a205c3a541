"""Accounts and SASL through the socket-free harness (a real SQLite store in tmp_path)."""

from __future__ import annotations

import base64
import hashlib
import hmac
import os

import pytest

from tests.harness import Harness, config


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


@pytest.fixture
def ah(tmp_path):
    """A harness with a store and account registration enabled."""
    harness = Harness(
        config(storage={"durability": "off"}, accounts={"registration": True}), db=str(tmp_path / "a.db")
    )
    yield harness
    harness.close()


def create(h: Harness, name: str, password: str = "sesame123", **kw):
    return h.run(h.server.accounts.create(name, password, **kw))


def start_sasl(h: Harness, name: str, nick: str, mechanism: str = "PLAIN") -> None:
    h.connect(name)
    h.send(name, "CAP LS 302")
    h.send(name, "CAP REQ :sasl")
    h.send(name, f"NICK {nick}")
    h.send(name, f"USER {name} 0 * :R")
    h.take(name)
    h.send(name, f"AUTHENTICATE {mechanism}")


def test_sasl_plain_success(ah):
    """sasl-3.1: 'If authentication is successful, the server sends 900 RPL_LOGGEDIN and 903 RPL_SASLSUCCESS.'"""
    create(ah, "alice")
    start_sasl(ah, "a", "alice")
    assert ah.lines("a") == [":irc.test AUTHENTICATE +"]
    ah.send("a", "AUTHENTICATE " + b64(b"\0alice\0sesame123"))
    assert ah.lines("a") == [
        ":irc.test 900 alice alice!a@127.0.0.1 alice :You are now logged in as alice",
        ":irc.test 903 alice :SASL authentication successful",
    ]
    ah.send("a", "CAP END")
    assert ah.numerics("a")[0] == "001"
    assert ah.clients["a"].account == "alice"


def test_sasl_plain_wrong_password_and_unknown_account(ah):
    create(ah, "alice")
    start_sasl(ah, "a", "x1")
    ah.take("a")
    ah.send("a", "AUTHENTICATE " + b64(b"alice\0alice\0wrong"))
    assert ah.lines("a") == [":irc.test 904 x1 :SASL authentication failed: Invalid account name or password"]
    ah.send("a", "AUTHENTICATE PLAIN")
    ah.take("a")
    ah.send("a", "AUTHENTICATE " + b64(b"\0nobody\0sesame123"))
    assert ah.lines("a") == [":irc.test 904 x1 :SASL authentication failed: Invalid account name or password"]
    assert ah.clients["a"].account is None


def test_unknown_mechanism_lists_mechanisms(ah):
    start_sasl(ah, "a", "x1", mechanism="FOO")
    assert ah.lines("a") == [
        ":irc.test 908 x1 PLAIN,SCRAM-SHA-256,EXTERNAL :are available SASL mechanisms",
        ":irc.test 904 x1 :SASL authentication failed",
    ]


def test_chunked_payload_of_exactly_400_needs_plus(ah):
    """sasl-3.1: 'If the data is exactly 400 bytes long, a final AUTHENTICATE + is sent.'"""
    raw = b"\0alice\0"
    password = "x" * (300 - len(raw))
    encoded = b64(raw + password.encode())
    assert len(encoded) == 400
    create(ah, "alice", password)
    start_sasl(ah, "a", "alice")
    ah.take("a")
    ah.send("a", "AUTHENTICATE " + encoded)
    assert ah.lines("a") == []
    ah.send("a", "AUTHENTICATE +")
    assert ah.numerics("a") == ["900", "903"]


def test_too_long_chunk_and_too_long_payload(ah):
    start_sasl(ah, "a", "x1")
    ah.take("a")
    ah.send("a", "AUTHENTICATE " + "A" * 401)
    assert ah.lines("a") == [":irc.test 905 x1 :SASL message too long"]
    ah.send("a", "AUTHENTICATE PLAIN")
    ah.take("a")
    for _ in range(21):
        ah.send("a", "AUTHENTICATE " + "A" * 400)
    assert ah.lines("a") == [":irc.test 904 x1 :SASL message too long"]
    assert ah.clients["a"].sasl is None


def test_abort_and_already_authenticated(ah):
    create(ah, "alice")
    start_sasl(ah, "a", "alice")
    ah.take("a")
    ah.send("a", "AUTHENTICATE *")
    assert ah.lines("a") == [":irc.test 906 alice :SASL authentication aborted"]
    ah.send("a", "AUTHENTICATE PLAIN")
    ah.send("a", "AUTHENTICATE " + b64(b"\0alice\0sesame123"))
    ah.take("a")
    ah.send("a", "AUTHENTICATE PLAIN")
    assert ah.lines("a") == [":irc.test 907 alice :You have already authenticated using SASL"]


def test_invalid_base64(ah):
    start_sasl(ah, "a", "x1")
    ah.take("a")
    ah.send("a", "AUTHENTICATE !!!")
    assert ah.lines("a") == [":irc.test 904 x1 :SASL authentication failed: invalid base64"]


# SCRAM-SHA-256, with an independent client-side implementation ------------------


class ScramClient:
    def __init__(self, user: str, password: str) -> None:
        self.user, self.password = user, password
        self.nonce = b64(os.urandom(18))

    def first(self) -> bytes:
        self.bare = f"n={self.user},r={self.nonce}"
        return ("n,," + self.bare).encode()

    def final(self, server_first: bytes) -> bytes:
        text = server_first.decode()
        attrs = dict(part.split("=", 1) for part in text.split(","))
        assert attrs["r"].startswith(self.nonce)
        salted = hashlib.pbkdf2_hmac("sha256", self.password.encode(), base64.b64decode(attrs["s"]), int(attrs["i"]))
        client_key = hmac.new(salted, b"Client Key", hashlib.sha256).digest()
        stored = hashlib.sha256(client_key).digest()
        without_proof = f"c=biws,r={attrs['r']}"
        auth = f"{self.bare},{text},{without_proof}".encode()
        signature = hmac.new(stored, auth, hashlib.sha256).digest()
        proof = bytes(a ^ b for a, b in zip(client_key, signature))
        server_key = hmac.new(salted, b"Server Key", hashlib.sha256).digest()
        self.expected_server_signature = hmac.new(server_key, auth, hashlib.sha256).digest()
        return f"{without_proof},p={b64(proof)}".encode()


def _authenticate_payload(h: Harness, name: str) -> bytes:
    msgs = h.messages(name)
    assert [m.command for m in msgs] == ["AUTHENTICATE"], msgs
    return base64.b64decode(msgs[0].params[0])


def test_scram_sha256_success(ah):
    create(ah, "alice", "correct horse")
    start_sasl(ah, "a", "alice", "SCRAM-SHA-256")
    assert ah.lines("a") == [":irc.test AUTHENTICATE +"]
    client = ScramClient("alice", "correct horse")
    ah.send("a", "AUTHENTICATE " + b64(client.first()))
    server_first = _authenticate_payload(ah, "a")
    ah.send("a", "AUTHENTICATE " + b64(client.final(server_first)))
    server_final = _authenticate_payload(ah, "a").decode()
    assert server_final == "v=" + b64(client.expected_server_signature)
    ah.send("a", "AUTHENTICATE +")
    assert ah.numerics("a") == ["900", "903"]


def test_scram_wrong_password_and_unknown_user_look_alike(ah):
    create(ah, "alice", "correct horse")
    for user in ("alice", "nosuchuser"):
        start_sasl(ah, user, "n" + user[:5], "SCRAM-SHA-256")
        ah.take(user)
        client = ScramClient(user, "wrong")
        ah.send(user, "AUTHENTICATE " + b64(client.first()))
        server_first = _authenticate_payload(ah, user).decode()
        assert server_first.startswith(f"r={client.nonce}") and ",s=" in server_first and server_first.endswith(",i=4096")
        ah.send(user, "AUTHENTICATE " + b64(client.final(server_first.encode())))
        assert ah.numerics(user) == ["904"]


# throttling ------------------------------------------------------------------------


def test_failed_logins_are_throttled_per_account(ah):
    """After login_attempts failures in login_window, even the right password is refused until the window passes."""
    create(ah, "alice")
    ah.connect("a")
    ah.send("a", "NICK x1")
    ah.send("a", "USER a 0 * :R")
    ah.take("a")
    for _ in range(5):
        ah.send("a", "AUTHENTICATE PLAIN")
        ah.send("a", "AUTHENTICATE " + b64(b"\0alice\0wrong"))
    ah.take("a")
    ah.send("a", "AUTHENTICATE PLAIN")
    ah.send("a", "AUTHENTICATE " + b64(b"\0alice\0sesame123"))
    assert ah.lines("a") == [
        ":irc.test AUTHENTICATE +",
        ":irc.test 904 x1 :SASL authentication failed: Too many failed attempts; try again in 60 seconds",
    ]
    ah.clock.advance(61)
    ah.send("a", "AUTHENTICATE PLAIN")
    ah.send("a", "AUTHENTICATE " + b64(b"\0alice\0sesame123"))
    assert ah.numerics("a") == ["AUTHENTICATE", "900", "903"]


def test_login_throttle_forgets_old_failures(ah):
    """The failure records (per source and account, per source, per account) go once login_window has
    passed; they are swept when a later attempt starts, and a success takes its own attempt back."""
    create(ah, "alice")
    ah.register("a", "x1", ip="10.0.0.9")
    ah.send("a", "AUTHENTICATE PLAIN")
    ah.send("a", "AUTHENTICATE " + b64(b"\0alice\0wrong"))
    assert ah.numerics("a") == ["AUTHENTICATE", "904"]
    logins = ah.server.logins
    assert len(logins) == 3  # 10.0.0.9 on alice, 10.0.0.9, alice from new sources
    ah.clock.advance(61)
    ah.register("b", "x2", ip="10.0.0.10")
    ah.send("b", "AUTHENTICATE PLAIN")
    ah.send("b", "AUTHENTICATE " + b64(b"\0alice\0sesame123"))
    assert ah.numerics("b") == ["AUTHENTICATE", "900", "903"]
    assert len(logins) == 0


def test_throttle_does_not_slow_another_account(ah):
    create(ah, "alice")
    create(ah, "bob")
    ah.register("a", "x1")
    for _ in range(6):
        ah.send("a", "AUTHENTICATE PLAIN")
        ah.send("a", "AUTHENTICATE " + b64(b"\0alice\0wrong"))
    ah.register("b", "x2", ip="10.0.0.2")
    ah.send("b", "AUTHENTICATE PLAIN")
    ah.send("b", "AUTHENTICATE " + b64(b"\0bob\0sesame123"))
    assert ah.numerics("b") == ["AUTHENTICATE", "900", "903"]


# nick ownership ---------------------------------------------------------------------


def test_registered_nick_is_protected(ah):
    create(ah, "alice")
    ah.connect("a")
    ah.send("a", "NICK alice")
    ah.send("a", "USER a 0 * :R")
    assert ah.lines("a") == [":irc.test 433 * alice :Nickname is reserved by a different account"]
    assert not ah.clients["a"].registered
    ah.send("a", "NICK other")
    assert ah.numerics("a")[0] == "001"
    ah.send("a", "NICK alice")
    assert ah.lines("a") == [":irc.test 433 other alice :Nickname is reserved by a different account"]


def test_agent_nick_is_its_account_and_it_is_a_bot(ah):
    create(ah, "owner1")
    create(ah, "bot1", kind="agent", owner="owner1")
    start_sasl(ah, "b", "whatever")
    ah.send("b", "AUTHENTICATE " + b64(b"\0bot1\0sesame123"))
    ah.send("b", "CAP END")
    msgs = ah.messages("b")
    welcome = next(m for m in msgs if m.command == "001")
    assert welcome.params[0] == "bot1"
    client = ah.clients["b"]
    assert client.nick == "bot1" and "B" in client.modes
    ah.send("b", "NICK other")
    assert ah.lines("b") == [":irc.test 432 bot1 other :An agent's nick is its account name"]


def test_require_sasl(tmp_path):
    h = Harness(config(storage={"durability": "off"}, accounts={"require_sasl": True}), db=str(tmp_path / "r.db"))
    try:
        h.connect("a")
        h.send("a", "NICK x")
        h.send("a", "USER a 0 * :R")
        assert h.lines("a") == ["ERROR :Closing link: 127.0.0.1 (You must log in with SASL to use this server)"]
        assert h.conns["a"].closed
    finally:
        h.close()


# account-notify, WHOIS, extended-join, account-tag ---------------------------------------


def test_login_after_registration_notifies_peers(ah):
    create(ah, "alice")
    ah.register("w", "watcher", caps=["account-notify", "extended-join", "account-tag"])
    ah.register("a", "al")
    ah.send("w", "JOIN #c")
    ah.send("a", "JOIN #c")
    ah.take("w")
    ah.send("a", "AUTHENTICATE PLAIN")
    ah.send("a", "AUTHENTICATE " + b64(b"\0alice\0sesame123"))
    assert ah.lines("w") == ["@account=alice :al!a@127.0.0.1 ACCOUNT alice"]
    ah.send("a", "PRIVMSG #c :hi")
    assert ah.lines("w") == ["@account=alice :al!a@127.0.0.1 PRIVMSG #c hi"]
    ah.send("w", "WHOIS al")
    assert ":irc.test 330 watcher al alice :is logged in as" in ah.lines("w")
    ah.send("a", "PART #c")
    ah.send("a", "JOIN #c")
    assert ah.lines("w") == [
        "@account=alice :al!a@127.0.0.1 PART #c",
        "@account=alice :al!a@127.0.0.1 JOIN #c alice :A Realname",
    ]


# REGISTER and NickServ ------------------------------------------------------------------


def test_register_command(ah):
    ah.register("a", "newbie")
    ah.send("a", "REGISTER * * short")
    assert ah.lines("a") == [":irc.test FAIL REGISTER WEAK_PASSWORD newbie :Passwords must be at least 8 characters long"]
    ah.send("a", "REGISTER other * password123")
    assert ah.lines("a") == [
        ":irc.test FAIL REGISTER ACCOUNT_NAME_MUST_BE_NICK other :The account name must be your current nick"
    ]
    ah.send("a", "REGISTER * * password123")
    assert ah.lines("a") == [
        ":irc.test REGISTER SUCCESS newbie :Account created",
        ":irc.test 900 newbie newbie!a@127.0.0.1 newbie :You are now logged in as newbie",
    ]
    ah.send("a", "REGISTER * * password123")
    assert ah.lines("a") == [":irc.test FAIL REGISTER ALREADY_AUTHENTICATED newbie :You are already logged in"]
    ah.register("b", "taker")
    ah.send("b", "NICK newbie")
    assert ah.numerics("b") == ["433"]


def test_register_taken_name_leaves_nothing_half_written(ah):
    create(ah, "dupe")
    ah.register("a", "d2")
    before = ah.run(ah.server.store.list_accounts())
    ah.server.accounts.names.pop("dupe")  # force the race path: the store refuses the duplicate
    ah.server.state.remove_nick(ah.clients["a"])
    ah.clients["a"].nick, ah.clients["a"].nick_folded = "dupe", "dupe"
    ah.send("a", "REGISTER * * password123")
    assert ah.lines("a") == [":irc.test FAIL REGISTER ACCOUNT_EXISTS dupe :That account already exists"]
    assert ah.run(ah.server.store.list_accounts()) == before


def test_nickserv_identify_and_register(ah):
    create(ah, "alice")
    ah.register("a", "al")
    ah.send("a", "PRIVMSG NickServ :IDENTIFY alice wrong")
    assert ah.lines("a") == [":NickServ!NickServ@services.pircd NOTICE al :Invalid account name or password"]
    ah.send("a", "PRIVMSG NickServ :IDENTIFY alice sesame123")
    assert ah.lines("a") == [
        ":irc.test 900 al al!a@127.0.0.1 alice :You are now logged in as alice",
        ":NickServ!NickServ@services.pircd NOTICE al :You are now logged in as alice.",
    ]
    ah.register("b", "bobby")
    ah.send("b", "NS REGISTER password123")
    assert ah.lines("b")[-1] == ":NickServ!NickServ@services.pircd NOTICE bobby :Account bobby created; you are logged in."


def test_register_disabled_by_default(tmp_path):
    h = Harness(config(storage={"durability": "off"}), db=str(tmp_path / "d.db"))
    try:
        h.register("a", "x")
        h.send("a", "REGISTER * * password123")
        assert h.lines("a") == [":irc.test FAIL REGISTER DISABLED * :Account registration is disabled on this server"]
    finally:
        h.close()


# registered channels --------------------------------------------------------------------


def test_registered_channel_survives_restart(tmp_path):
    db = str(tmp_path / "c.db")
    cfg = config(storage={"durability": "off"})
    h = Harness(cfg, db=db)
    create(h, "alice")
    h.register("a", "al")
    h.send("a", "AUTHENTICATE PLAIN")
    h.send("a", "AUTHENTICATE " + b64(b"\0alice\0sesame123"))
    h.send("a", "JOIN #club")
    h.send("a", "TOPIC #club :Club topic")
    h.send("a", "MODE #club +ikl-t secret 7")
    h.send("a", "MODE #club +b bad!*@*")
    h.settle()
    h.close()

    h2 = Harness(cfg, db=db)
    try:
        channel = h2.server.state.find_channel("#club")
        assert channel is not None and channel.owner_account == "alice"
        assert channel.topic == "Club topic" and channel.modes == {"i", "n"}
        assert (channel.key, channel.limit) == ("secret", 7)
        assert [e.mask for e in channel.lists["b"]] == ["bad!*@*"]
        h2.register("o", "someone")
        h2.send("o", "JOIN #club")
        assert h2.lines("o") == [":irc.test 473 someone #club :Cannot join channel (+i)"]
    finally:
        h2.close()


def test_registered_channel_owner_is_never_locked_out(ah):
    create(ah, "alice")
    ah.register("a", "al")
    ah.send("a", "AUTHENTICATE PLAIN")
    ah.send("a", "AUTHENTICATE " + b64(b"\0alice\0sesame123"))
    ah.send("a", "JOIN #mine")
    ah.send("a", "MODE #mine +iklb key 1 *!*@*")
    ah.send("a", "PART #mine")
    ah.register("o", "other")
    ah.send("o", "JOIN #mine")
    assert ah.lines("o") == [":irc.test 473 other #mine :Cannot join channel (+i)"]
    ah.take("a")
    ah.send("a", "JOIN #mine")
    assert ah.lines("a")[0] == ":al!a@127.0.0.1 JOIN #mine"


# found by irctest -------------------------------------------------------------------------


def test_cap_end_during_sasl_aborts_it_and_registers(ah):
    """sasl-3.1: 'If the client completes registration (with CAP END, NICK, USER and any other
    necessary messages) while the SASL authentication is still in progress, the server SHOULD
    abort it and send a 906 numeric, then register the client without authentication.'"""
    create(ah, "alice")
    start_sasl(ah, "a", "x1")
    assert ah.lines("a") == [":irc.test AUTHENTICATE +"]
    ah.send("a", "CAP END")
    assert ah.lines("a")[:2] == [
        ":irc.test 906 x1 :SASL authentication aborted",
        ":irc.test 001 x1 :Welcome to the TestNet IRC Network x1!a@127.0.0.1",
    ]
    assert ah.clients["a"].account is None and ah.clients["a"].sasl is None


def test_authenticate_without_cap_then_registration_aborts_it(ah):
    """The same when the client never requested the sasl capability: NICK and USER complete
    registration and the half-done exchange is aborted rather than holding the client."""
    ah.connect("a")
    ah.send("a", "AUTHENTICATE PLAIN")
    assert ah.lines("a") == [":irc.test AUTHENTICATE +"]
    ah.send("a", "NICK x1")
    ah.send("a", "USER a 0 * :R")
    assert ah.lines("a")[:2] == [
        ":irc.test 906 x1 :SASL authentication aborted",
        ":irc.test 001 x1 :Welcome to the TestNet IRC Network x1!a@127.0.0.1",
    ]


def test_register_before_connect_with_a_taken_nick_is_account_exists(ah):
    """account-registration: 'FAIL REGISTER NEED_NICK * <message>: Sent by the server if the client
    sends REGISTER before sending a NICK command.' A client whose NICK was refused did send one;
    the name it asked for is not available ('ACCOUNT_EXISTS ... a nick that is not available as a
    new account's name'), and nobody can register a nick out from under the client holding it."""
    ah.register("r", "root")
    ah.connect("b")
    ah.send("b", "REGISTER * * password123")
    assert ah.lines("b") == [":irc.test FAIL REGISTER NEED_NICK * :Choose a nick first; your account is named after it"]
    ah.send("b", "NICK root")
    ah.send("b", "REGISTER * * password123")
    assert ah.lines("b") == [
        ":irc.test 433 * root :Nickname is already in use",
        ":irc.test FAIL REGISTER ACCOUNT_EXISTS root :That name is in use; choose another nick",
    ]
    ah.send("b", "NICK bar")
    ah.send("b", "REGISTER * * password123")
    assert ah.lines("b") == [
        ":irc.test REGISTER SUCCESS bar :Account created",
        ":irc.test 900 bar bar!*@127.0.0.1 bar :You are now logged in as bar",
    ]


def test_register_before_connect_with_a_reserved_nick_is_account_exists(ah):
    """The same when registration refused the nick because an account owns it."""
    create(ah, "alice")
    ah.connect("b")
    ah.send("b", "NICK alice")
    ah.send("b", "USER b 0 * :B")
    ah.send("b", "REGISTER * * password123")
    assert ah.lines("b") == [
        ":irc.test 433 * alice :Nickname is reserved by a different account",
        ":irc.test FAIL REGISTER ACCOUNT_EXISTS alice :That name is in use; choose another nick",
    ]


# account extban (a:<account>, $a:<account>) ------------------------------------------------------------


def _login(h: Harness, name: str, nick: str, account: str) -> None:
    h.register(name, nick)
    h.send(name, "AUTHENTICATE PLAIN")
    h.send(name, "AUTHENTICATE " + b64(f"\0{account}\0sesame123".encode()))
    assert h.numerics(name) == ["AUTHENTICATE", "900", "903"]


def test_account_extban_matches_the_account_not_the_nick(ah):
    """account-extban: 'Servers publishing the ACCOUNTEXTBAN token allow clients to construct ban masks
    matching account names.' pircd's is a:<account> (EXTBAN=,am; $a: of earlier versions is still
    accepted); it matches accounts, not nicks."""
    create(ah, "bob")
    ah.register("op", "chanop")
    ah.send("op", "JOIN #c")
    ah.send("op", "MODE #c +b $a:bob")
    ah.send("op", "MODE #c +b $a:carol")
    ah.take("op")
    ah.register("n", "carol")  # a nick, no account
    ah.send("n", "JOIN #c")
    assert ah.lines("n")[0] == ":carol!n@127.0.0.1 JOIN #c"
    _login(ah, "b", "robert", "bob")
    ah.send("b", "JOIN #c")
    assert ah.lines("b") == [":irc.test 474 robert #c :Cannot join channel (+b)"]
    ah.send("op", "MODE #c -b $a:bob")
    ah.send("b", "JOIN #c")
    assert ah.lines("b")[0] == ":robert!b@127.0.0.1 JOIN #c"


def test_account_extban_in_exception_and_invite_lists(ah):
    """a:<account> works in +e (ban exception) and +I (invite exception) too."""
    create(ah, "bob")
    ah.register("op", "chanop")
    ah.send("op", "JOIN #e")
    ah.send("op", "MODE #e +b *!*@*")
    ah.send("op", "MODE #e +e a:bob")
    ah.send("op", "JOIN #i")
    ah.send("op", "MODE #i +i")
    ah.send("op", "MODE #i +I a:bob")
    _login(ah, "b", "robert", "bob")
    ah.send("b", "JOIN #e")
    assert ah.lines("b")[0] == ":robert!b@127.0.0.1 JOIN #e"
    ah.send("b", "JOIN #i")
    assert ah.lines("b")[0] == ":robert!b@127.0.0.1 JOIN #i"
    ah.register("n", "other")
    ah.send("n", "JOIN #e")
    ah.send("n", "JOIN #i")
    assert ah.lines("n") == [
        ":irc.test 474 other #e :Cannot join channel (+b)",
        ":irc.test 473 other #i :Cannot join channel (+i)",
    ]


def test_whox_account_field_shows_the_account(ah):
    """IRCv3 WHOX: 'a: account name' (0 when not logged in); the account, not the nick."""
    create(ah, "bob")
    _login(ah, "b", "robert", "bob")
    ah.register("w", "watcher")
    ah.send("w", "WHO robert %na")
    ah.send("w", "WHO watcher %na")
    assert ah.lines("w") == [
        ":irc.test 354 watcher robert bob",
        ":irc.test 315 watcher robert :End of WHO list",
        ":irc.test 354 watcher watcher 0",
        ":irc.test 315 watcher watcher :End of WHO list",
    ]


def test_a_scram_name_with_a_nul_is_refused_as_malformed(ah):
    """RFC 5802's names have no NUL (PostgreSQL could not even look one up): 904, as for any
    malformed client-first-message, on both databases."""
    create(ah, "alice", "correct horse")
    start_sasl(ah, "a", "alice", "SCRAM-SHA-256")
    ah.take("a")
    ah.send("a", "AUTHENTICATE " + b64(ScramClient("ali\0ce", "correct horse").first()))
    assert ah.numerics("a") == ["904"]
