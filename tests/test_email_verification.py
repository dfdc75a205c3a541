"""REGISTER with a required email address and VERIFY (IRCv3 account-registration), the code sent by a
command or by SMTP (a local aiosmtpd receiver on port 0)."""

from __future__ import annotations

import asyncio
import contextlib
import email
import email.policy
import re
import sys
import threading

import pytest

from ircd.config import ConfigError, from_dict
from tests import dbs
from tests.harness import Harness, config

CAP = "draft/account-registration"


def cfg(tmp_path, **accounts):
    sink = tmp_path / "mail.txt"
    base = {
        "registration": True, "email_required": True, "argon2_time_cost": 1, "argon2_memory_kib": 8192,
        "email_command": [sys.executable, "-c",
                          f"import sys; open({str(sink)!r}, 'ab').write(sys.stdin.buffer.read())"],
    }
    base.update(accounts)
    return config(storage={"durability": "off"}, accounts=base)


@pytest.fixture
def eh(tmp_path):
    h = Harness(cfg(tmp_path), db=str(tmp_path / "e.db"))
    yield h
    h.close()


def code_in(text: str) -> str:
    found = re.search(r"VERIFY bar ([A-Z2-9]{8})\r?\n", text)
    assert found is not None, text
    return found.group(1)


def accounts_in(db) -> list[tuple[str, str | None]]:
    return dbs.connect(db).execute("SELECT name, email FROM accounts").fetchall()


def test_register_sends_a_code_and_verify_creates_the_account(eh, tmp_path):
    """account-registration: "REGISTER VERIFICATION_REQUIRED <account> <message>", then "VERIFY
    <account> <code>" answered "VERIFY SUCCESS <account> <message>"; "Afterward, the client is assumed
    to be authenticated to the <account> as if it used SASL"."""
    eh.register("bar", caps=[CAP])
    eh.send("bar", "CAP LS 302")
    assert any(f"{CAP}=before-connect,email-required" in ln for ln in eh.lines("bar"))
    eh.send("bar", "REGISTER * * password123")
    eh.send("bar", "REGISTER * not-an-address password123")
    assert eh.lines("bar") == [
        ":irc.test FAIL REGISTER INVALID_EMAIL bar :A valid email address is needed to register on this server",
    ] * 2
    eh.send("bar", "REGISTER * bar@example.org password123")
    assert eh.lines("bar") == [
        (":irc.test REGISTER VERIFICATION_REQUIRED bar :A code was sent to bar@example.org: send VERIFY bar "
        "<code> to finish"),
    ]
    message = email.message_from_bytes((tmp_path / "mail.txt").read_bytes(), policy=email.policy.default)
    assert (message["To"], message["From"]) == ("bar@example.org", "pircd@localhost")
    assert message["Subject"] == "Your code for the account bar on TestNet"
    code = code_in(message.get_content())
    eh.settle()
    assert accounts_in(str(tmp_path / "e.db")) == []  # nothing is stored before VERIFY
    eh.send("bar", "VERIFY bar ABCDEFGH")
    assert eh.lines("bar") == [
        ":irc.test FAIL VERIFY INVALID_CODE bar :That code is not valid for this account, or no longer",
    ]
    eh.send("bar", f"VERIFY bar {code.lower()}")
    assert eh.lines("bar") == [
        ":irc.test VERIFY SUCCESS bar :Account created",
        ":irc.test 900 bar bar!bar@127.0.0.1 bar :You are now logged in as bar",
    ]
    eh.settle()
    assert accounts_in(str(tmp_path / "e.db")) == [("bar", "bar@example.org")]
    eh.send("bar", f"VERIFY bar {code}")
    assert eh.lines("bar") == [":irc.test FAIL VERIFY ALREADY_AUTHENTICATED bar :You are already logged in"]


def test_wrong_codes_and_expiry_end_a_registration(eh, tmp_path):
    eh.register("bar")
    eh.send("bar", "REGISTER * bar@example.org password123")
    code = code_in(email.message_from_bytes((tmp_path / "mail.txt").read_bytes(),
                                            policy=email.policy.default).get_content())
    for _ in range(5):
        eh.send("bar", "VERIFY bar 22222222")
    eh.send("bar", f"VERIFY bar {code}")  # the right code, too late: five wrong guesses dropped it
    assert eh.numerics("bar")[-1] == "FAIL"
    (tmp_path / "mail.txt").write_bytes(b"")
    eh.send("bar", "REGISTER * bar@example.org password123")
    code = code_in(email.message_from_bytes((tmp_path / "mail.txt").read_bytes(),
                                            policy=email.policy.default).get_content())
    eh.clock.advance(3600)
    eh.send("bar", f"VERIFY bar {code}")
    assert eh.lines("bar")[-1] == (
        ":irc.test FAIL VERIFY INVALID_CODE bar :That code is not valid for this account, or no longer"
    )
    assert eh.clients["bar"].account is None


def test_codes_per_source_and_a_failed_delivery(tmp_path):
    h = Harness(cfg(tmp_path, email_codes_per_hour=2), db=str(tmp_path / "e.db"))
    try:
        h.register("bar")
        for _ in range(3):
            h.send("bar", "REGISTER * bar@example.org password123")
        assert h.lines("bar")[-1] == (
            ":irc.test FAIL REGISTER TEMPORARILY_UNAVAILABLE bar :Too many verification codes sent lately; "
            "try again later"
        )
        h.clock.advance(3601)
        h.send("bar", "REGISTER * bar@example.org password123")
        assert h.messages("bar")[-1].params[0] == "VERIFICATION_REQUIRED"
    finally:
        h.close()
    h = Harness(cfg(tmp_path, email_command=[sys.executable, "-c", "import sys; sys.exit('no route')"]),
                db=str(tmp_path / "f.db"))
    try:
        h.register("bar")
        h.send("bar", "REGISTER * bar@example.org password123")
        assert h.lines("bar") == [
            (":irc.test FAIL REGISTER TEMPORARILY_UNAVAILABLE bar :The verification code could not be sent; try "
            "again later"),
        ]
        assert h.server.accounts.verifications.pending == {}
    finally:
        h.close()


def test_simultaneous_registers_are_each_counted_and_an_address_has_its_own_limit(tmp_path):
    """A code is counted before it is made: REGISTERs from one source at the same moment do not all
    pass the check; and one email address gets no more codes per hour from many sources."""
    h = Harness(cfg(tmp_path, email_codes_per_hour=1), db=str(tmp_path / "e.db"))
    try:
        names = ["r0", "r1", "r2", "r3"]
        for name in names:
            h.register(name)
        waiting = [h.server.handle_line(h.clients[name], f"REGISTER * {name}@example.org password123".encode())
                   for name in names]
        async def together() -> None:
            await asyncio.gather(*[w for w in waiting if w is not None])

        h.run(together())
        h.server.flush_all()
        answers = sorted(" ".join(m.params[:2]) for name in names for m in h.messages(name)
                         if m.command in ("REGISTER", "FAIL"))
        assert answers[:3] == ["REGISTER TEMPORARILY_UNAVAILABLE"] * 3, answers
        assert answers[3].startswith("VERIFICATION_REQUIRED r"), answers
        assert len(h.server.accounts.verifications.pending) == 1
        for i, name in enumerate(("s1", "s2")):  # another source each, the same address
            h.register(name, ip=f"10.0.0.{i + 1}")
            h.send(name, "REGISTER * Victim@Example.org password123")
        assert [h.messages(n)[-1].params[:2] for n in ("s1", "s2")] == [
            ["VERIFICATION_REQUIRED", "s1"], ["REGISTER", "TEMPORARILY_UNAVAILABLE"]]
    finally:
        h.close()


def test_another_sources_wrong_codes_do_not_cancel_a_registration(eh, tmp_path):
    eh.register("bar")
    eh.send("bar", "REGISTER * bar@example.org password123")
    code = code_in(email.message_from_bytes((tmp_path / "mail.txt").read_bytes(),
                                            policy=email.policy.default).get_content())
    eh.take("bar")
    eh.register("evil", ip="10.9.9.9")
    for _ in range(5):
        eh.send("evil", "VERIFY bar 22222222")
    assert eh.lines("evil")[-1] == (
        ":irc.test FAIL VERIFY INVALID_CODE bar :That code is not valid for this account, or no longer")
    eh.send("evil", "VERIFY bar 33333333")  # past the login throttle's limit for this source
    assert eh.lines("evil") == [
        ":irc.test FAIL VERIFY TEMPORARILY_UNAVAILABLE bar :Too many wrong codes lately; try again later"]
    eh.send("bar", f"VERIFY bar {code}")
    assert eh.lines("bar")[:1] == [":irc.test VERIFY SUCCESS bar :Account created"]


def test_a_client_gone_while_its_account_is_made_is_not_logged_in(eh, tmp_path):
    eh.register("bar")
    eh.send("bar", "REGISTER * bar@example.org password123")
    code = code_in(email.message_from_bytes((tmp_path / "mail.txt").read_bytes(),
                                            policy=email.policy.default).get_content())
    store = eh.server.accounts.store  # the store's method: the account service may be compiled
    create = store.create_account

    async def create_as_the_client_leaves(*args, **kwargs):
        eh.server.disconnect(eh.clients["bar"], "gone")
        return await create(*args, **kwargs)

    store.create_account = create_as_the_client_leaves
    eh.send("bar", f"VERIFY bar {code}")
    eh.settle()
    assert accounts_in(str(tmp_path / "e.db")) == [("bar", "bar@example.org")]
    assert "bar" not in eh.server.state.by_account
    assert eh.clients["bar"].account is None


@contextlib.contextmanager
def smtp_receiver(handler):
    """aiosmtpd's SMTP protocol on 127.0.0.1 port 0, served by an event loop in a thread."""
    from aiosmtpd.smtp import SMTP

    loop = asyncio.new_event_loop()
    server = loop.run_until_complete(loop.create_server(lambda: SMTP(handler), "127.0.0.1", 0))
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        yield server.sockets[0].getsockname()[1]
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        server.close()
        loop.run_until_complete(server.wait_closed())
        loop.close()


def test_code_by_smtp_and_nickserv_verify(tmp_path):
    """The code handed to an SMTP server (smtplib in a worker thread), here a local receiver."""
    received: list[bytes] = []

    class Handler:
        async def handle_DATA(self, server, session, envelope):
            received.append(envelope.content)
            return "250 OK"

    with smtp_receiver(Handler()) as port:
        h = Harness(cfg(tmp_path, email_command=[], email_smtp=f"127.0.0.1:{port}", email_smtp_tls="none"),
                    db=str(tmp_path / "s.db"))
        try:
            h.register("bar")
            h.send("bar", "PRIVMSG NickServ :REGISTER password123")
            h.send("bar", "PRIVMSG NickServ :REGISTER password123 bar@example.org")
            assert h.lines("bar") == [
                (":NickServ!NickServ@services.pircd NOTICE bar :This server needs an email address: REGISTER "
                "<password> <email>"),
                (":NickServ!NickServ@services.pircd NOTICE bar :A code was sent to bar@example.org: send VERIFY "
                "bar <code> to finish."),
            ]
            assert len(received) == 1
            code = code_in(email.message_from_bytes(received[0], policy=email.policy.default).get_content())
            h.send("bar", f"PRIVMSG NickServ :VERIFY bar {code}")
            assert h.lines("bar") == [
                ":irc.test 900 bar bar!bar@127.0.0.1 bar :You are now logged in as bar",
                ":NickServ!NickServ@services.pircd NOTICE bar :Account bar created; you are logged in.",
            ]
        finally:
            h.close()


def test_email_required_needs_a_way_to_send():
    with pytest.raises(ConfigError) as info:
        from_dict({"accounts": {"email_required": True}})
    assert info.value.problems == [
        ("accounts", "Value error, email_required needs email_command or email_smtp to send the codes")
    ]
    with pytest.raises(ConfigError) as info:
        from_dict({"accounts": {"email_smtp": "localhost"}})
    assert info.value.problems[0][0] == "accounts.email_smtp"
