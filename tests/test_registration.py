"""Connection registration: PASS, NICK, USER, CAP negotiation, the welcome burst, PING and QUIT."""

from __future__ import annotations

from ircd.caps import Capability
from ircd.passwords import hash_sync

WELCOME_NUMERICS = ["001", "002", "003", "004", "005", "251", "252", "253", "254", "255", "265", "266", "375",
                    "372", "376"]


def burst(numerics: list[str]) -> list[str]:
    """The numerics with consecutive 005 lines collapsed (their number depends on the tokens)."""
    return [n for i, n in enumerate(numerics) if n != "005" or numerics[i - 1] != "005"]


def test_welcome_burst(h):
    """RFC 2812 5.1: "The server sends Replies 001 to 004 to a user upon successful registration.\""""
    h.connect("a")
    h.send("a", "NICK alice")
    assert h.lines("a") == []
    h.send("a", "USER al 0 * :Alice Liddell")
    lines = h.lines("a")
    assert burst([ln.split()[1] for ln in lines]) == WELCOME_NUMERICS
    assert lines[:4] == [
        ":irc.test 001 alice :Welcome to the TestNet IRC Network alice!al@127.0.0.1",
        ":irc.test 002 alice :Your host is irc.test, running version pircd-0.1.0",
        ":irc.test 003 alice :This server was created 2027-01-15 08:00:00 UTC",
        ":irc.test 004 alice irc.test pircd-0.1.0 BiowZ CbeIiklmnoqstv beIkloqv",
    ]
    assert lines[-10:] == [
        ":irc.test 251 alice :There are 1 users and 0 invisible on 1 servers",
        ":irc.test 252 alice 0 :IRC Operators online",
        ":irc.test 253 alice 0 :unknown connection(s)",
        ":irc.test 254 alice 0 :channels formed",
        ":irc.test 255 alice :I have 1 clients and 0 servers",
        ":irc.test 265 alice 1 1 :Current local users 1, max 1",
        ":irc.test 266 alice 1 1 :Current global users 1, max 1",
        ":irc.test 375 alice :- irc.test Message of the day - ",
        ":irc.test 372 alice :- Welcome to pircd.",
        ":irc.test 376 alice :End of /MOTD command",
    ]


def test_isupport_tokens(h):
    """Modern IRC, RPL_ISUPPORT: "The ABNF representation for this is: ... <client> 1*13<token> :are supported by this server\""""
    h.connect("a")
    h.send("a", "NICK alice")
    h.send("a", "USER al 0 * :Alice")
    isupport = [m for m in h.messages("a") if m.command == "005"]
    tokens: dict[str, str] = {}
    for m in isupport:
        assert m.params[-1] == "are supported by this server"
        assert len(m.params) - 2 <= 13
        for token in m.params[1:-1]:
            key, _, value = token.partition("=")
            tokens[key] = value
    # the core tokens (extensions and accounts may add more)
    assert {key: tokens.get(key) for key in CORE_ISUPPORT} == CORE_ISUPPORT


CORE_ISUPPORT = {
        "AWAYLEN": "390", "BOT": "B", "CASEMAPPING": "rfc1459", "CHANLIMIT": "#:100",
        "CHANMODES": "beI,k,l,Cimnst", "CHANNELLEN": "64", "CHANTYPES": "#", "ELIST": "CMNTU", "EXCEPTS": "e",
        "HOSTLEN": "64", "INVEX": "I", "KICKLEN": "390", "MAXLIST": "b:100,e:100,I:100", "MAXTARGETS": "4", "EXTBAN": ",am",
        "ACCOUNTEXTBAN": "a",
        "MODES": "6", "MONITOR": "100", "NETWORK": "TestNet", "NICKLEN": "32", "PREFIX": "(qov)~@+",
        "STATUSMSG": "~@+",
        "TARGMAX": "PRIVMSG:4,NOTICE:4,TAGMSG:4,JOIN:,PART:,KICK:4,NAMES:4,WHOIS:1,LIST:,MONITOR:,ISON:,"
                   "USERHOST:5",
        "TOPICLEN": "390", "USERLEN": "18", "UTF8ONLY": "", "WHOX": "",
}


def test_nick_without_parameter_is_431(h):
    """RFC 2812 ERR_NONICKNAMEGIVEN: "Returned when a nickname parameter expected for a command and isn't found.\""""
    h.connect("a")
    h.send("a", "NICK")
    h.send("a", "NICK :")
    assert h.lines("a") == [":irc.test 431 * :No nickname given"] * 2


def test_erroneous_nick_is_432(h):
    """RFC 2812 ERR_ERRONEUSNICKNAME: "Returned after receiving a NICK message which contains characters
    which do not fall in the defined set.\""""
    h.connect("a")
    for bad in ("1abc", "a!b", "a@b", "#chan", "x" * 33):
        h.send("a", f"NICK {bad}")
    h.send("a", "NICK :with space")
    assert h.lines("a") == [
        ":irc.test 432 * 1abc :Erroneous nickname",
        ":irc.test 432 * a!b :Erroneous nickname",
        ":irc.test 432 * a@b :Erroneous nickname",
        ":irc.test 432 * #chan :Erroneous nickname",
        f":irc.test 432 * {'x' * 33} :Erroneous nickname",
        ":irc.test 432 * with_space :Erroneous nickname",
    ]


def test_nick_in_use_is_433_case_insensitively(h):
    """RFC 2812 ERR_NICKNAMEINUSE: "Returned when a NICK message is processed that results in an attempt
    to change to a currently existing nickname.\""""
    h.register("alice")
    h.connect("b")
    h.send("b", "NICK ALICE")
    h.send("b", "NICK alice")
    assert h.lines("b") == [
        ":irc.test 433 * ALICE :Nickname is already in use",
        ":irc.test 433 * alice :Nickname is already in use",
    ]
    # rfc1459 casemapping: [ ] \ ~ fold to { } | ^
    h.register("c", nick="a[b]")
    h.connect("d")
    h.send("d", "NICK A{B}")
    assert h.lines("d") == [":irc.test 433 * A{B} :Nickname is already in use"]


def test_nick_change_after_registration(h):
    """RFC 2812 3.1.2: "NICK command is used to give user a nickname or change the existing one.\""""
    h.alice_and_bob_in("#c")
    h.send("alice", "NICK Alicia")
    assert h.lines("alice") == [":alice!alice@127.0.0.1 NICK Alicia"]
    assert h.lines("bob") == [":alice!alice@127.0.0.1 NICK Alicia"]
    h.send("bob", "NICK Alicia")
    assert h.lines("bob") == [":irc.test 433 bob Alicia :Nickname is already in use"]
    # a case-only change is allowed and announced
    h.send("alice", "NICK ALICIA")
    assert h.lines("alice") == [":Alicia!alice@127.0.0.1 NICK ALICIA"]


def test_user_needs_four_parameters_461(h):
    """RFC 2812 ERR_NEEDMOREPARAMS: "Returned by the server by numerous commands to indicate to the client
    that it didn't supply enough parameters.\""""
    h.connect("a")
    h.send("a", "USER al 0 *")
    h.send("a", "USER")
    assert h.lines("a") == [
        ":irc.test 461 * USER :Not enough parameters",
        ":irc.test 461 * USER :Not enough parameters",
    ]


def test_user_after_registration_is_462(h):
    """RFC 2812 ERR_ALREADYREGISTRED: "Returned by the server to any link which tries to change part of the
    registered details (such as password or user details from second USER message).\""""
    h.register("alice")
    h.send("alice", "USER x 0 * :X")
    h.send("alice", "PASS secret")
    assert h.lines("alice") == [
        ":irc.test 462 alice :You may not reregister",
        ":irc.test 462 alice :You may not reregister",
    ]


def test_commands_before_registration_are_451(h):
    """RFC 2812 ERR_NOTREGISTERED: "Returned by the server to indicate that the client MUST be registered
    before the server will allow it to be parsed in detail.\""""
    h.connect("a")
    h.send("a", "JOIN #c")
    h.send("a", "PRIVMSG x :hi")
    assert h.lines("a") == [
        ":irc.test 451 * :You have not registered",
        ":irc.test 451 * :You have not registered",
    ]


def test_unknown_command_is_421(h):
    """RFC 2812 ERR_UNKNOWNCOMMAND: "Returned to a registered client to indicate that the command sent is
    unknown by the server.\""""
    h.register("alice")
    h.send("alice", "FROBNICATE a b")
    assert h.lines("alice") == [":irc.test 421 alice FROBNICATE :Unknown command"]


def test_server_password_accepted(make_harness):
    """RFC 2812 3.1.1: "The optional password can and MUST be set before any attempt to register the
    connection is made.\""""
    h = make_harness(server={"password": "letmein"})
    h.connect("a")
    h.send("a", "PASS letmein")
    h.send("a", "NICK alice")
    h.send("a", "USER al 0 * :Alice")
    assert burst(h.numerics("a")) == WELCOME_NUMERICS
    assert h.clients["a"].registered


def test_server_password_argon2_hash(make_harness):
    """The server password may be an argon2 hash (never stored in clear)."""
    h = make_harness(server={"password": hash_sync("letmein")})
    h.connect("a")
    h.send("a", "PASS letmein")
    h.send("a", "NICK alice")
    h.send("a", "USER al 0 * :Alice")
    assert burst(h.numerics("a")) == WELCOME_NUMERICS


def test_wrong_server_password_is_464_and_error(make_harness):
    """RFC 2812 ERR_PASSWDMISMATCH: "Returned to indicate a failed attempt at registering a connection for
    which a password was required and was either not given or incorrect.\""""
    h = make_harness(server={"password": "letmein"})
    h.connect("a")
    h.send("a", "PASS wrong")
    h.send("a", "NICK alice")
    h.send("a", "USER al 0 * :Alice")
    assert h.lines("a") == [
        ":irc.test 464 alice :Password incorrect",
        "ERROR :Closing link: 127.0.0.1 (Bad password)",
    ]
    assert h.conns["a"].closed
    assert not h.clients["a"].registered
    # the nick is free again
    h.connect("b")
    h.send("b", "PASS letmein")
    h.send("b", "NICK alice")
    h.send("b", "USER al 0 * :Alice")
    assert burst(h.numerics("b")) == WELCOME_NUMERICS


def test_missing_server_password_is_464(make_harness):
    """ERR_PASSWDMISMATCH also when the password "was ... not given"."""
    h = make_harness(server={"password": "letmein"})
    h.connect("a")
    h.send("a", "NICK alice")
    h.send("a", "USER al 0 * :Alice")
    assert h.lines("a") == [
        ":irc.test 464 alice :Password incorrect",
        "ERROR :Closing link: 127.0.0.1 (Bad password)",
    ]


def test_ping_pong(h):
    """RFC 2812 3.7.2: "The PING command is used to test the presence of an active client or server at the
    other end of the connection.\""""
    h.connect("a")
    h.send("a", "PING :hello there")
    h.send("a", "PING")
    h.send("a", "PONG whatever")
    assert h.lines("a") == [
        ":irc.test PONG irc.test :hello there",
        ":irc.test 409 * :No origin specified",
    ]


def test_quit_tells_channel_peers(h):
    """RFC 2812 3.1.7: "A client session is terminated with a quit message. The server acknowledges this
    by sending an ERROR message to the client.\""""
    h.register("alice")
    h.register("bob")
    h.send("alice", "JOIN #c")
    h.send("bob", "JOIN #c")
    h.take("alice")
    h.take("bob")
    h.send("bob", "QUIT :gone fishing")
    assert h.lines("bob") == ["ERROR :Closing link: 127.0.0.1 (Quit: gone fishing)"]
    assert h.lines("alice") == [":bob!bob@127.0.0.1 QUIT :Quit: gone fishing"]
    assert h.conns["bob"].closed
    h.send("alice", "ISON bob")
    assert h.lines("alice") == [":irc.test 303 alice :"]


def test_quit_before_registration(h):
    """QUIT works before registration too."""
    h.connect("a")
    h.send("a", "QUIT")
    assert h.lines("a") == ["ERROR :Closing link: 127.0.0.1 (Quit:)"]


# CAP ----------------------------------------------------------------------

CORE_CAPS = ("account-notify account-tag away-notify batch cap-notify chghost echo-message extended-join "
           "invite-notify labeled-response message-tags multi-prefix server-time setname userhost-in-names "
           "standard-replies draft/no-implicit-names")


def ls_lines(h, version: int = 302) -> list[str]:
    """The CAP LS reply for every capability offered (core ones and any an account module adds):
    with 302 in as few lines of 512 bytes as it fits (all but the last marked ``*``), without it
    one line."""
    from ircd.caps import ls_chunks
    from ircd.proto.lines import format_line

    tokens = h.server.caps.ls_tokens(h.server, version)
    if version < 302:  # one line, whatever its length (the tests' lists fit)
        chunks = [" ".join(tokens)]
    else:
        chunks = ls_chunks(tokens, ":irc.test CAP * LS")
    more = ["*"] if version >= 302 else []
    return [
        format_line("CAP", ["*", "LS", *(more if i < len(chunks) - 1 else []), chunk], "irc.test").decode().rstrip("\r\n")
        for i, chunk in enumerate(chunks)
    ]


def test_cap_ls(h):
    """IRCv3 capability negotiation: "The LS subcommand is used to list the capabilities supported by the
    server.\""""
    h.connect("a")
    h.send("a", "CAP LS 302")
    lines = h.lines("a")
    assert lines == ls_lines(h)
    offered = {tok for line in lines for tok in line.split(" LS ", 1)[1].lstrip("* ").lstrip(":").split()}
    assert set(CORE_CAPS.split()) <= offered


def test_registration_waits_for_cap_end(h):
    """IRCv3: "Upon receiving either a CAP LS or CAP REQ command during connection registration, the server
    MUST not complete registration until the client sends a CAP END command.\""""
    h.connect("a")
    h.send("a", "CAP LS 302")
    h.send("a", "NICK alice")
    h.send("a", "USER al 0 * :Alice")
    assert h.lines("a") == ls_lines(h)
    assert not h.clients["a"].registered
    h.send("a", "CAP END")
    assert burst(h.numerics("a")) == WELCOME_NUMERICS


def test_registration_waits_after_cap_req_alone(h):
    """IRCv3: "If a server receives a REQ subcommand while client registration is in progress, it MUST suspend
    registration until an END subcommand is received.\""""
    h.connect("a")
    h.send("a", "CAP REQ :multi-prefix")
    h.send("a", "NICK alice")
    h.send("a", "USER al 0 * :Alice")
    assert h.lines("a") == [":irc.test CAP * ACK multi-prefix"]
    h.send("a", "CAP END")
    assert burst(h.numerics("a")) == WELCOME_NUMERICS


def test_cap_end_after_registration_is_ignored(h):
    """IRCv3 capability negotiation: "If the client is already registered, this command MUST be ignored by the
    server.\""""
    h.register("alice")
    h.send("alice", "CAP END")
    assert h.lines("alice") == []


def test_cap_req_ack_nak_and_list(h):
    """IRCv3 capability negotiation: "The capability identifier set must be accepted as a whole, or rejected
    entirely.\"; CAP LIST: "If no capabilities are enabled, an empty parameter must be sent.\""""
    h.connect("a")
    h.send("a", "CAP REQ :multi-prefix bogus-cap")
    h.send("a", "CAP LIST")
    h.send("a", "CAP REQ :multi-prefix server-time")
    h.send("a", "CAP LIST")
    h.send("a", "CAP REQ :-server-time")
    h.send("a", "CAP LIST")
    h.send("a", "CAP REQ :")
    assert h.lines("a") == [
        ":irc.test CAP * NAK :multi-prefix bogus-cap",
        ":irc.test CAP * LIST :",
        # the ACK already carries the capabilities it enables
        "@time=2027-01-15T08:00:00.000Z :irc.test CAP * ACK :multi-prefix server-time",
        "@time=2027-01-15T08:00:00.000Z :irc.test CAP * LIST :multi-prefix server-time",
        ":irc.test CAP * ACK -server-time",
        ":irc.test CAP * LIST multi-prefix",
        ":irc.test CAP * NAK :",
    ]


def test_cap_unknown_subcommand_is_410(h):
    """IRCv3 capability negotiation: "If a client sends a subcommand which is not in the list above or otherwise
    issues an invalid command, then numeric `410` (`ERR_INVALIDCAPCMD`) should be sent.\""""
    h.connect("a")
    h.send("a", "CAP FROB")
    assert h.lines("a") == [":irc.test 410 * FROB :Invalid CAP command"]


def test_cap_ls_302_continuation(h):
    """IRCv3 CAP 302: "If the reply contains multiple lines (due to IRC line length limitations), and the client
    supports CAP version `302`, all but the last reply MUST have a parameter containing only an asterisk (`*`)
    preceding the capability list.\""""
    for i in range(30):
        h.server.caps.add(Capability(f"vendor.example/cap-{i:02d}", value="v" * 20))
    h.connect("a")
    h.send("a", "CAP LS 302")
    msgs = h.messages("a")
    assert len(msgs) >= 3
    for m in msgs[:-1]:
        assert m.params[:3] == ["*", "LS", "*"]
        assert len(m.params) == 4
    assert msgs[-1].params[:2] == ["*", "LS"] and len(msgs[-1].params) == 3
    tokens = " ".join(m.params[-1] for m in msgs).split()
    assert sorted(tokens) == sorted(h.server.caps.ls_tokens(h.server, 302))
    assert [t for t in tokens if t.startswith("vendor.")] == [f"vendor.example/cap-{i:02d}={'v' * 20}" for i in range(30)]
    for m in msgs:
        assert len(m.format()) <= 512


def test_cap_ls_without_302_is_one_line(h):
    """Capability negotiation: "If the client supports CAP version 302, the server MAY send multiple
    lines in response to CAP LS and CAP LIST" (so not to others). A list too long for one line loses
    draft capabilities first, from the end; they can still be requested."""
    for i in range(12):
        h.server.caps.add(Capability(f"vendor.example/long-capability-{i:02d}"))
    h.connect("a")
    h.send("a", "CAP LS")
    [line] = h.lines("a")
    assert len(line) + 2 <= 512
    shown = line.split(" :", 1)[1].split()
    assert "draft/metadata-3" not in shown and "vendor.example/long-capability-00" in shown
    assert "message-tags" in shown and "account-tag" in shown
    h.send("a", "CAP REQ :draft/metadata-3")
    assert h.lines("a") == [":irc.test CAP * ACK draft/metadata-3"]


def test_cap_ls_without_302_has_no_values(h):
    """IRCv3 CAP 302: "If the client supports CAP version `302`, the server MAY specify additional data for each
    capability using the `<name>=<value>` format\"; "If a client has not indicated support for `CAP LS 302`
    features, the server MUST NOT send these new features to the client.\""""
    h.server.caps.add(Capability("vendor.example/valued", value="x,y"))
    h.connect("a")
    h.send("a", "CAP LS")
    assert h.lines("a") == ls_lines(h, 0)
    assert ls_lines(h, 0)[-1].endswith(" vendor.example/valued")
    h.send("a", "CAP LS 302")
    assert h.lines("a") == ls_lines(h, 302)
    assert " vendor.example/valued=x,y " in " ".join(ls_lines(h, 302))


def test_welcome_burst_with_server_time_in_a_labeled_batch(h):
    """The burst's fixed text is formatted once per configuration; a client with server-time,
    batch and labeled-response still gets every line tagged, inside the label's batch."""
    h.connect("a")
    h.send("a", "CAP LS 302")
    h.send("a", "CAP REQ :server-time batch labeled-response")
    h.send("a", "NICK alice")
    h.send("a", "USER al 0 * :Alice")
    h.take("a")
    h.send("a", "@label=r1 CAP END")
    lines = h.lines("a")
    stamp = "time=2027-01-15T08:00:00.000Z"
    ref = lines[0].split()[3][1:]
    assert lines[0] == f"@label=r1;{stamp} :irc.test BATCH +{ref} labeled-response"
    assert lines[1] == (f"@{stamp};batch={ref} :irc.test 001 alice :Welcome to the TestNet IRC Network "
                        "alice!al@127.0.0.1")
    assert lines[-5:] == [
        f"@{stamp};batch={ref} :irc.test 266 alice 1 1 :Current global users 1, max 1",
        f"@{stamp};batch={ref} :irc.test 375 alice :- irc.test Message of the day - ",
        f"@{stamp};batch={ref} :irc.test 372 alice :- Welcome to pircd.",
        f"@{stamp};batch={ref} :irc.test 376 alice :End of /MOTD command",
        f"@{stamp} :irc.test BATCH -{ref}",
    ]
    assert all(ln.startswith(f"@{stamp};batch={ref} :irc.test ") for ln in lines[1:-1])
    assert burst([ln.split()[2] for ln in lines[1:-1]]) == WELCOME_NUMERICS


def test_welcome_burst_with_a_motd_of_percent_signs_and_control_characters(make_harness):
    """MOTD text goes into the burst as it is: a % sign, and the characters the preformatted burst
    uses for its own purposes (then the MOTD is formatted line by line)."""
    for motd in ("100% sure, 50%s off, %d", "\x01ACTION waves\x01 \x00 \x02bold\x02"):
        h = make_harness(server={"motd": motd})
        h.connect("a")
        h.send("a", "NICK alice")
        h.send("a", "USER al 0 * :Alice")
        assert h.lines("a")[-3:] == [
            ":irc.test 375 alice :- irc.test Message of the day - ",
            f":irc.test 372 alice :- {motd}",
            ":irc.test 376 alice :End of /MOTD command",
        ]


def test_the_welcome_templates_give_the_bytes_of_the_burst_formatted_line_by_line():
    """The burst's values are put with ``%`` into text formatted once per configuration
    (welcome.WelcomeTemplates); with no templates it is formatted line by line. Both must give the
    same lines, numbers and percent signs in the configured text included."""
    from ircd.commands.welcome import WelcomeTemplates

    from tests.harness import Harness, config

    def burst_of(templated: bool) -> list[str]:
        h = Harness(config(server={"network": "Net%s%d100%", "motd": "50% off\n%(x)s %%"}))
        try:
            for name in ("one", "two", "three"):
                h.register(name)
            h.send("two", "MODE two +i")
            h.connect("pending")
            if not templated:
                h.server.welcome_templates = WelcomeTemplates(None, None)
            h.connect("new")
            h.send("new", "NICK new")
            h.send("new", "USER new 0 * :New")
            return h.lines("new")
        finally:
            h.close()

    templated, by_line = burst_of(True), burst_of(False)
    assert templated == by_line
    assert ":irc.test 001 new :Welcome to the Net%s%d100% IRC Network new!new@127.0.0.1" in templated
    assert ":irc.test 251 new :There are 3 users and 1 invisible on 1 servers" in templated
    assert ":irc.test 253 new 1 :unknown connection(s)" in templated
    assert ":irc.test 255 new :I have 4 clients and 0 servers" in templated
    assert ":irc.test 265 new 4 4 :Current local users 4, max 4" in templated
    assert ":irc.test 372 new :- 50% off" in templated
    assert ":irc.test 372 new :- %(x)s %%" in templated
