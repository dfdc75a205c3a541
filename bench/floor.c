/*
 * floor: the least an IRC relay can do for the benchmark's socket scenarios.
 *
 *     cc -O2 -o floor bench/floor.c && ./floor PORT [PAUSE_US]
 *
 * One process, one thread, level-triggered epoll on 127.0.0.1:PORT, like
 * pircd's own loop: each ready socket is read once per turn, every line of
 * that read is handled, and the output of the whole turn is written after it,
 * one write per connection. It speaks just enough IRC for bench/loadgen.py:
 * NICK and USER (001 and 376), PING, JOIN (the JOIN to every member, 366),
 * PRIVMSG to a nick or a channel, QUIT (the QUIT to the channel, then ERROR
 * and close). Nothing is checked or stored; names are compared byte for byte;
 * other commands are ignored.
 *
 * PAUSE_US (default 0) sleeps that long after each turn, so that more work
 * waits at each wake-up: a check of how far batching lowers the kernel's share.
 *
 * It is not a server. It is the benchmark's yardstick: its CPU per relayed
 * message or delivered line is mostly the kernel's share of the same socket
 * work (reads, writes, the wake-ups of the clients), which every server on
 * the machine pays too. docs/benchmarks.md says how to read it.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>
#include <arpa/inet.h>

#define READ (64 * 1024) /* one read, into a buffer all connections share */
#define PART 1024          /* the unfinished end of a read, kept per connection */
#define SENDQ (16u << 20)
#define MAXCHANS 8 /* channels one connection may be on */
#define NICKLEN 48
#define TABLE (1u << 18) /* nick hash slots; a power of two */

struct chan;

struct conn {
    int fd;
    int dirty;     /* on the list of connections to write after this turn */
    int watching;  /* EPOLLOUT requested: the kernel's buffer was full */
    int registered;
    char nick[NICKLEN];
    size_t partlen, outlen, outcap;
    char *out;
    struct chan *chans[MAXCHANS];
    char part[PART];
};

struct chan {
    char name[64];
    struct conn **members;
    size_t n, cap;
};

static struct conn **conns; /* by fd */
static size_t nconns;
static struct conn **dirty;
static size_t ndirty;
static struct chan *chans;
static size_t nchans, capchans;
static struct conn *table[TABLE]; /* open addressing; TOMB marks a removed nick */
static struct conn tomb;
#define TOMB (&tomb)
static int ep;

static unsigned hash(const char *s, size_t n) {
    unsigned h = 2166136261u;
    for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 16777619u;
    return h;
}

static struct conn *find_nick(const char *s, size_t n) {
    if (n == 0 || n >= NICKLEN) return NULL;
    for (unsigned i = hash(s, n) & (TABLE - 1);; i = (i + 1) & (TABLE - 1)) {
        struct conn *c = table[i];
        if (c == NULL) return NULL;
        if (c != TOMB && strlen(c->nick) == n && memcmp(c->nick, s, n) == 0) return c;
    }
}

static void drop_nick(struct conn *c) {
    size_t n = strlen(c->nick);
    if (n == 0) return;
    for (unsigned i = hash(c->nick, n) & (TABLE - 1);; i = (i + 1) & (TABLE - 1)) {
        if (table[i] == NULL) return;
        if (table[i] == c) {
            table[i] = TOMB;
            return;
        }
    }
}

static int set_nick(struct conn *c, const char *s, size_t n) {
    if (n == 0 || n >= NICKLEN || find_nick(s, n)) return -1;
    drop_nick(c);
    memcpy(c->nick, s, n);
    c->nick[n] = 0;
    for (unsigned i = hash(s, n) & (TABLE - 1);; i = (i + 1) & (TABLE - 1)) {
        if (table[i] == NULL || table[i] == TOMB) {
            table[i] = c;
            return 0;
        }
    }
}

static void queue(struct conn *c, const char *s, size_t n) {
    if (c->outlen + n > c->outcap) {
        size_t cap = c->outcap ? c->outcap : 4096;
        while (cap < c->outlen + n) cap *= 2;
        c->out = realloc(c->out, cap);
        if (c->out == NULL) abort();
        c->outcap = cap;
    }
    memcpy(c->out + c->outlen, s, n);
    c->outlen += n;
    if (!c->dirty) {
        c->dirty = 1;
        dirty[ndirty++] = c;
    }
}

/* a line snprintf cut short at size: it still ends in CR LF */
static int crlf_cut(char *line, size_t size) {
    line[size - 3] = '\r';
    line[size - 2] = '\n';
    return (int)size - 1;
}

static void queuef(struct conn *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void queuef(struct conn *c, const char *fmt, ...) {
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (n > (int)sizeof line - 1) n = crlf_cut(line, sizeof line);
    if (n > 0) queue(c, line, (size_t)n);
}

static struct chan *find_chan(const char *s, size_t n, int create) {
    for (size_t i = 0; i < nchans; i++)
        if (strlen(chans[i].name) == n && memcmp(chans[i].name, s, n) == 0) return &chans[i];
    if (!create || n == 0 || n >= sizeof chans[0].name) return NULL;
    if (nchans == capchans) return NULL; /* the benchmark uses a handful */
    struct chan *ch = &chans[nchans++];
    memcpy(ch->name, s, n);
    ch->name[n] = 0;
    return ch;
}

/* a line to every member of ch but skip */
static void to_channel(struct chan *ch, struct conn *skip, const char *line, size_t n) {
    for (size_t i = 0; i < ch->n; i++)
        if (ch->members[i] != skip) queue(ch->members[i], line, n);
}

static void part_all(struct conn *c, const char *quit, size_t qn) {
    for (int k = 0; k < MAXCHANS; k++) {
        struct chan *ch = c->chans[k];
        if (ch == NULL) continue;
        c->chans[k] = NULL;
        for (size_t i = 0; i < ch->n; i++)
            if (ch->members[i] == c) {
                ch->members[i] = ch->members[--ch->n];
                break;
            }
        if (quit) to_channel(ch, c, quit, qn);
    }
}

static void flush(struct conn *c);

static void close_conn(struct conn *c, const char *reason) {
    if (c->registered) {
        char line[512];
        int n = snprintf(line, sizeof line, ":%s!u@127.0.0.1 QUIT :%s\r\n", c->nick, reason);
        part_all(c, line, (size_t)n);
    } else {
        part_all(c, NULL, 0);
    }
    drop_nick(c);
    epoll_ctl(ep, EPOLL_CTL_DEL, c->fd, NULL);
    close(c->fd);
    conns[c->fd] = NULL;
    for (size_t i = 0; i < ndirty; i++)
        if (dirty[i] == c) dirty[i] = NULL;
    free(c->out);
    free(c);
}

/* the length of the word at s: up to the first space, or all n bytes */
static size_t word(const char *s, size_t n) {
    const char *sp = memchr(s, ' ', n);
    return sp ? (size_t)(sp - s) : n;
}

/* returns -1 when the connection is gone */
static int handle(struct conn *c, char *line, size_t n) {
    if (n && line[n - 1] == '\r') n--;
    if (n && line[0] == '@') { /* tags: none are sent by the load generator; skip them */
        size_t w = word(line, n);
        line += w < n ? w + 1 : n;
        n -= w < n ? w + 1 : n;
    }
    size_t cw = word(line, n);
    const char *rest = cw < n ? line + cw + 1 : line + n;
    size_t rn = cw < n ? n - cw - 1 : 0;
#define IS(cmd) (cw == sizeof(cmd) - 1 && memcmp(line, cmd, cw) == 0)
    if (IS("PRIVMSG")) {
        if (!c->registered) return 0;
        size_t tw = word(rest, rn);
        const char *text = tw < rn ? rest + tw + 1 : rest + rn;
        size_t tn = tw < rn ? rn - tw - 1 : 0;
        if (tn && text[0] == ':') text++, tn--;
        char out[1024];
        int m = snprintf(out, sizeof out, ":%s!u@127.0.0.1 PRIVMSG %.*s :%.*s\r\n", c->nick, (int)tw, rest,
                         (int)tn, text);
        if (m >= (int)sizeof out) m = crlf_cut(out, sizeof out);
        if (tw && rest[0] == '#') {
            struct chan *ch = find_chan(rest, tw, 0);
            if (ch) to_channel(ch, c, out, (size_t)m);
        } else {
            struct conn *to = find_nick(rest, tw);
            if (to)
                queue(to, out, (size_t)m);
            else
                queuef(c, ":floor 401 %s %.*s :No such nick\r\n", c->nick, (int)tw, rest);
        }
    } else if (IS("PING")) {
        if (rn && rest[0] == ':') rest++, rn--;
        queuef(c, ":floor PONG floor :%.*s\r\n", (int)rn, rest);
    } else if (IS("NICK")) {
        size_t w = word(rest, rn);
        if (set_nick(c, rest, w) != 0) queuef(c, ":floor 433 * %.*s :Nickname is in use\r\n", (int)w, rest);
    } else if (IS("USER")) {
        if (!c->registered && c->nick[0]) {
            c->registered = 1;
            queuef(c, ":floor 001 %s :Welcome\r\n:floor 376 %s :End of MOTD\r\n", c->nick, c->nick);
        }
    } else if (IS("JOIN")) {
        if (!c->registered) return 0;
        size_t w = word(rest, rn);
        struct chan *ch = find_chan(rest, w, 1);
        int slot = -1;
        for (int k = 0; k < MAXCHANS; k++) {
            if (c->chans[k] == ch) return 0;
            if (c->chans[k] == NULL && slot < 0) slot = k;
        }
        if (ch == NULL || slot < 0) return 0;
        if (ch->n == ch->cap) {
            ch->cap = ch->cap ? 2 * ch->cap : 64;
            ch->members = realloc(ch->members, ch->cap * sizeof *ch->members);
            if (ch->members == NULL) abort();
        }
        ch->members[ch->n++] = c;
        c->chans[slot] = ch;
        char out[256];
        int m = snprintf(out, sizeof out, ":%s!u@127.0.0.1 JOIN %s\r\n", c->nick, ch->name);
        to_channel(ch, NULL, out, (size_t)m);
        queuef(c, ":floor 366 %s %s :End of NAMES list\r\n", c->nick, ch->name);
    } else if (IS("QUIT")) {
        queuef(c, "ERROR :Closing link\r\n");
        flush(c);
        close_conn(c, "Quit");
        return -1;
    }
    return 0;
#undef IS
}

static void watch(struct conn *c, int out) {
    struct epoll_event ev = {.events = EPOLLIN | (out ? EPOLLOUT : 0), .data.fd = c->fd};
    epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &ev);
    c->watching = out;
}

static void flush(struct conn *c) {
    if (c->outlen) {
        ssize_t w = write(c->fd, c->out, c->outlen);
        if (w > 0) {
            memmove(c->out, c->out + w, c->outlen - (size_t)w);
            c->outlen -= (size_t)w;
        }
    }
    if (c->outlen && !c->watching) watch(c, 1);
    if (!c->outlen && c->watching) watch(c, 0);
    if (!c->outlen && c->out) { /* an idle connection holds no output buffer */
        free(c->out);
        c->out = NULL;
        c->outcap = 0;
    }
}

static void readable(struct conn *c) {
    static char buf[PART + READ];
    memcpy(buf, c->part, c->partlen);
    ssize_t r = read(c->fd, buf + c->partlen, READ);
    if (r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR)) {
        close_conn(c, r == 0 ? "Connection closed" : "Read error");
        return;
    }
    if (r < 0) return;
    char *p = buf, *end = buf + c->partlen + r, *nl;
    while ((nl = memchr(p, '\n', (size_t)(end - p))) != NULL) {
        if (handle(c, p, (size_t)(nl - p)) < 0) return;
        p = nl + 1;
    }
    if ((size_t)(end - p) > PART) {
        close_conn(c, "Line too long");
        return;
    }
    c->partlen = (size_t)(end - p);
    memcpy(c->part, p, c->partlen);
}

static void accept_all(int lfd) {
    for (;;) {
        int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK);
        if (fd < 0) return;
        if ((size_t)fd >= nconns) {
            close(fd);
            continue;
        }
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        struct conn *c = calloc(1, sizeof *c);
        if (c == NULL) abort();
        c->fd = fd;
        conns[fd] = c;
        struct epoll_event ev = {.events = EPOLLIN, .data.fd = fd};
        epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev);
    }
}

int main(int argc, char **argv) {
    if (argc != 2 && argc != 3) {
        fprintf(stderr, "usage: %s PORT [PAUSE_US]\n", argv[0]);
        return 2;
    }
    useconds_t pause = argc == 3 ? (useconds_t)atoi(argv[2]) : 0;
    signal(SIGPIPE, SIG_IGN);
    struct rlimit rl;
    getrlimit(RLIMIT_NOFILE, &rl);
    nconns = rl.rlim_cur;
    conns = calloc(nconns, sizeof *conns);
    dirty = calloc(nconns + 2048, sizeof *dirty); /* closed slots stay listed for the turn */
    capchans = 1024;
    chans = calloc(capchans, sizeof *chans);
    if (!conns || !dirty || !chans) abort();

    int lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    int one = 1;
    setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((unsigned short)atoi(argv[1]))};
    inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
    if (bind(lfd, (struct sockaddr *)&sa, sizeof sa) < 0 || listen(lfd, 4096) < 0) {
        perror("floor: listen");
        return 1;
    }
    ep = epoll_create1(0);
    struct epoll_event lev = {.events = EPOLLIN, .data.fd = lfd};
    epoll_ctl(ep, EPOLL_CTL_ADD, lfd, &lev);
    fprintf(stderr, "floor: listening on 127.0.0.1:%s\n", argv[1]);

    struct epoll_event evs[1024];
    for (;;) {
        int n = epoll_wait(ep, evs, 1024, -1);
        if (n < 0 && errno != EINTR) {
            perror("floor: epoll_wait");
            return 1;
        }
        for (int i = 0; i < n; i++) {
            int fd = evs[i].data.fd;
            if (fd == lfd) {
                accept_all(lfd);
                continue;
            }
            struct conn *c = conns[fd];
            if (c == NULL) continue;
            if (evs[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR)) readable(c);
            c = conns[fd];
            if (c && (evs[i].events & EPOLLOUT)) flush(c);
        }
        for (size_t i = 0; i < ndirty; i++) {
            struct conn *c = dirty[i];
            if (c == NULL) continue;
            c->dirty = 0;
            flush(c);
            if (c->outlen > SENDQ) close_conn(c, "SendQ exceeded");
        }
        ndirty = 0;
        if (pause) usleep(pause);
    }
}
