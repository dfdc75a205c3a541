"""METADATA: IRCv3 draft/metadata-2 and draft/metadata-3."""

from __future__ import annotations

import pytest

from ircd.api import ExtensionAPI
from tests.harness import Harness, config

M3 = ["draft/metadata-3", "batch"]
A = "alice!alice@127.0.0.1"


def unbatched(lines: list[str]) -> list[str]:
    """The lines without their batch tags and BATCH frames (tags other than batch are kept)."""
    out = []
    for line in lines:
        if " BATCH " in line.split(" :", 1)[0] + " ":
            continue
        if line.startswith("@batch="):
            line = line.split(" ", 1)[1]
        out.append(line)
    return out


@pytest.fixture
def meta(h):
    h.register("alice", caps=M3)
    h.register("bob", caps=M3)
    return h


def test_capabilities_and_limits(h):
    """metadata: "max-subs", "max-keys" and "max-value-bytes" in the capability value; "before-connect"
    when METADATA works during registration."""
    tokens = h.server.caps.ls_tokens(h.server, 302)
    value = "before-connect,max-subs=100,max-keys=100,max-value-bytes=300"
    assert f"draft/metadata-2={value}" in tokens and f"draft/metadata-3={value}" in tokens
    off = Harness(config(metadata={"enabled": False}))
    try:
        assert not [t for t in off.server.caps.ls_tokens(off.server, 302) if "metadata" in t]
    finally:
        off.close()


def test_set_get_list_unset_own(meta):
    """metadata: "METADATA <Target> SET <Key> [:Value]" answers RPL_KEYVALUE, GET and LIST answer in a
    metadata batch, SET without a value removes the key (RPL_KEYNOTSET)."""
    h = meta
    h.send("alice", "METADATA * SET display-name :Alice A.")
    assert h.lines("alice") == [":irc.test 761 alice alice display-name * :Alice A."]
    h.send("alice", "METADATA alice GET display-name avatar $bad")
    lines = h.lines("alice")
    assert lines[0].startswith(":irc.test BATCH +") and lines[0].endswith(" metadata alice")
    assert unbatched(lines) == [
        ":irc.test 761 alice alice display-name * :Alice A.",
        ":irc.test 766 alice alice avatar :Key is not set",
        ":irc.test FAIL METADATA INVALID_KEY $bad :Invalid key name",
    ]
    h.send("bob", "METADATA Alice LIST")
    assert unbatched(h.lines("bob")) == [":irc.test 761 bob alice display-name * :Alice A."]
    h.send("alice", "METADATA * SET display-name")
    assert h.lines("alice") == [":irc.test 766 alice alice display-name :Key deleted"]
    h.send("alice", "METADATA * SET display-name")
    assert h.lines("alice") == [":irc.test FAIL METADATA KEY_NOT_SET alice display-name :Key is not set"]


def test_refusals(meta):
    """metadata: "FAIL METADATA KEY_NO_PERMISSION" for another user's keys, INVALID_TARGET for an unknown
    one, INVALID_VALUE for values that are too long, LIMIT_REACHED past max-keys."""
    h = meta
    h.send("alice", "METADATA bob SET display-name :Not Bob")
    assert h.lines("alice") == [
        ":irc.test FAIL METADATA KEY_NO_PERMISSION bob display-name :You do not have permission to do that"
    ]
    h.send("alice", "METADATA bob CLEAR")
    assert h.lines("alice") == [":irc.test FAIL METADATA KEY_NO_PERMISSION bob * :You do not have permission to do that"]
    h.send("alice", "METADATA nobody LIST")
    assert h.lines("alice") == [":irc.test FAIL METADATA INVALID_TARGET nobody :Invalid metadata target"]
    h.send("alice", "METADATA * SET url :" + "x" * 301)
    assert h.lines("alice") == [":irc.test FAIL METADATA INVALID_VALUE url :Value is too long (at most 300 bytes)"]
    h.send("alice", "METADATA * FROB")
    assert h.lines("alice") == [":irc.test FAIL METADATA SUBCOMMAND_INVALID FROB :Invalid subcommand"]
    h.send("alice", "METADATA * SET")
    assert h.lines("alice") == [":irc.test 461 alice METADATA :Not enough parameters"]
    assert h.lines("bob") == []
    h.register("carol")  # no capability
    h.send("carol", "METADATA * LIST")
    assert h.lines("carol")[0].startswith(":irc.test FAIL METADATA NEED_CAPABILITY")


def test_max_keys(make_harness):
    h = make_harness(metadata={"max_keys": 2})
    h.register("alice", caps=M3)
    h.send("alice", "METADATA * SET a :1")
    h.send("alice", "METADATA * SET b :2")
    h.send("alice", "METADATA * SET a :3")
    h.take("alice")
    h.send("alice", "METADATA * SET c :4")
    assert h.lines("alice") == [":irc.test FAIL METADATA LIMIT_REACHED alice :Too many metadata keys"]


def test_subscriptions(meta):
    """metadata: SUB answers RPL_METADATASUBOK, UNSUB RPL_METADATAUNSUBOK, SUBS lists in a
    metadata-subs batch; past max-subs "the server does not process any further keys" (TOO_MANY_SUBS
    names the first key not subscribed)."""
    h = meta
    h.send("bob", "METADATA * SUB avatar display-name $x avatar")
    assert h.lines("bob") == [
        ":irc.test FAIL METADATA INVALID_KEY $x :Invalid key name",
        ":irc.test 770 bob avatar display-name avatar",
    ]
    h.send("bob", "METADATA * SUBS")
    assert unbatched(h.lines("bob")) == [":irc.test 772 bob avatar display-name"]
    h.send("bob", "METADATA * UNSUB avatar")
    assert h.lines("bob") == [":irc.test 771 bob avatar"]
    small = Harness(config(metadata={"max_subs": 2}))
    try:
        small.register("c", caps=M3)
        small.send("c", "METADATA * SUB a b c d")
        assert small.lines("c") == [
            ":irc.test FAIL METADATA TOO_MANY_SUBS c :Too many subscriptions (at most 2)",
            ":irc.test 770 c a b",
        ]
    finally:
        small.close()


def test_updates_reach_subscribers_who_share_a_channel(meta):
    """metadata: "When metadata is updated, users who have subscribed to the changed key will receive
    a METADATA message" (metadata-3: a 761/766 numeric); "For user metadata, this applies only to
    subscribers who either share a channel with the updated user or are monitoring them"; not the
    client that made the change."""
    h = meta
    h.register("carol", caps=["draft/metadata-2", "batch"])
    h.register("dave", caps=M3)
    for name in ("bob", "carol", "dave"):
        h.send(name, "METADATA * SUB display-name")
    h.send("dave", "METADATA * SUB avatar")  # not display-name... and subscribed after it
    for name in ("alice", "bob", "carol"):
        h.send(name, "JOIN #a")
    for name in ("alice", "bob", "carol", "dave"):
        h.take(name)
    h.send("alice", "METADATA * SET display-name :Al")
    assert h.lines("alice") == [":irc.test 761 alice alice display-name * Al"]
    assert h.lines("bob") == [":irc.test 761 bob alice display-name * Al"]
    assert h.lines("carol") == [f":{A} METADATA alice display-name * Al"]
    assert h.lines("dave") == []  # shares no channel
    h.send("dave", "MONITOR + alice")
    h.take("dave")
    h.send("alice", "METADATA * SET display-name")
    h.take("alice")
    assert h.lines("bob") == [":irc.test 766 bob alice display-name :Key deleted"]
    assert h.lines("carol") == [f":{A} METADATA alice display-name *"]
    assert h.lines("dave") == [":irc.test 766 dave alice display-name :Key deleted"]


def test_channel_metadata(meta):
    """metadata: clients set metadata "on channels they administer"; channel changes reach subscribed
    members only, and a joining subscriber gets the channel's and its members' current values."""
    h = meta
    h.send("alice", "JOIN #a")
    h.send("bob", "JOIN #a")
    h.send("bob", "METADATA * SUB url display-name")
    h.take("alice")
    h.take("bob")
    h.send("bob", "METADATA #a SET url :https://b.example")
    assert h.lines("bob") == [":irc.test FAIL METADATA KEY_NO_PERMISSION #a url :You do not have permission to do that"]
    h.send("alice", "METADATA #A SET url :https://a.example")
    assert h.lines("alice") == [":irc.test 761 alice #a url * https://a.example"]
    assert h.lines("bob") == [":irc.test 761 bob #a url * https://a.example"]
    h.send("alice", "METADATA * SET display-name :Al")
    h.take("alice")
    h.take("bob")
    h.register("carol", caps=M3)
    h.send("carol", "METADATA #a GET url")
    assert h.lines("carol") == [":irc.test FAIL METADATA KEY_NO_PERMISSION #a url :You do not have permission to do that"]
    h.send("carol", "METADATA * SUB url display-name")
    h.take("carol")
    h.send("carol", "JOIN #a")
    lines = h.lines("carol")
    start = lines.index(next(ln for ln in lines if ln.endswith(" metadata #a")))
    assert unbatched(lines[start:start + 4]) == [
        ":irc.test 761 carol #a url * https://a.example",
        ":irc.test 761 carol alice display-name * Al",
    ]
    assert lines[start - 1] == ":carol!carol@127.0.0.1 JOIN #a"
    h.take("alice")
    h.take("bob")
    h.send("carol", "METADATA #a SYNC")
    assert unbatched(h.lines("carol")) == [
        ":irc.test 761 carol #a url * https://a.example",
        ":irc.test 761 carol alice display-name * Al",
    ]
    h.send("alice", "METADATA #a CLEAR")
    assert unbatched(h.lines("alice")) == [":irc.test 766 alice #a url :Key deleted"]
    assert h.lines("carol") == [":irc.test 766 carol #a url :Key deleted"]
    # a rename keeps them
    h.send("alice", "METADATA #a SET topic-url :x")
    h.send("alice", "RENAME #a #b")
    h.take("alice")
    h.send("alice", "METADATA #b LIST")
    assert unbatched(h.lines("alice")) == [":irc.test 761 alice #b topic-url * x"]


def test_before_connect_and_registration_burst(h):
    """metadata: with before-connect, "Clients that have not completed connection registration MUST use
    * to target themselves"; the metadata then appears "in a metadata batch with their own nick as
    target as part of the registration burst"."""
    h.connect("a")
    h.send("a", "CAP LS 302")
    h.send("a", "CAP REQ :draft/metadata-3 batch")
    h.take("a")
    h.send("a", "METADATA * SET display-name :a b c")
    assert h.lines("a") == [":irc.test 761 * * display-name * :a b c"]
    h.send("a", "METADATA bob SET x :y")
    assert h.lines("a") == [
        ":irc.test FAIL METADATA KEY_NO_PERMISSION bob * :Only your own metadata (*) before registration"
    ]
    h.send("a", "METADATA * SUB display-name")
    assert h.lines("a") == [":irc.test 770 * display-name"]
    h.send("a", "NICK abc")
    h.send("a", "USER u 0 * :u")
    h.send("a", "CAP END")
    lines = h.lines("a")
    start = next(i for i, ln in enumerate(lines) if ln.endswith(" metadata abc"))
    assert [ln.split(" ", 2)[1] for ln in lines[:start]] == ["001", "002", "003", "004", "005", "005", "005"]
    assert unbatched(lines[start:start + 3]) == [":irc.test 761 abc abc display-name * :a b c"]
    h.send("a", "METADATA * LIST")
    assert unbatched(h.lines("a")) == [":irc.test 761 abc abc display-name * :a b c"]


def test_whois_shows_keys(meta):
    """metadata: "When a user with the capability enabled runs WHOIS on a user with metadata set, a
    subset of that metadata MAY be sent with RPL_WHOISKEYVALUE numerics"."""
    h = meta
    h.send("alice", "METADATA * SET display-name :Al")
    h.take("alice")
    h.send("bob", "WHOIS alice")
    assert ":irc.test 760 bob alice display-name * Al" in h.lines("bob")
    h.register("carol")
    h.send("carol", "WHOIS alice")
    assert not [ln for ln in h.lines("carol") if " 760 " in ln]


def test_read_only_keys_from_an_extension(meta):
    """An extension gives read-only keys (PIRCAN's roster: pircan/kind, pircan/owner, display-name)
    through api.metadata_keys; they are read like any key and cannot be set."""
    h = meta
    api = ExtensionAPI(h.server, "roster")
    api.metadata_keys(lambda c: {"pircan/kind": "agent", "pircan/owner": "olga"} if c.nick == "bob" else {})
    h.send("alice", "METADATA bob LIST")
    assert unbatched(h.lines("alice")) == [
        ":irc.test 761 alice bob pircan/kind * agent",
        ":irc.test 761 alice bob pircan/owner * olga",
    ]
    h.send("bob", "METADATA * SET pircan/kind :person")
    assert h.lines("bob") == [
        ":irc.test FAIL METADATA KEY_NO_PERMISSION bob pircan/kind :This key is set by the server"
    ]
