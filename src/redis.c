/*
 * redis.c: a Redis connection (see redis.h).
 *
 * The connection is an hv_conn_t (conn.h): it does the lookup (through the dns cache), the
 * connect with its address fallback, TLS for rediss (conn's, as for https: the handshake
 * before on_conn_connect, plaintext after it), the owned writes and the one timer, which serves the
 * connect timeout, then the deadline of the oldest command waiting for its reply (replies
 * come in order, so it is the next one due). This file adds the RESP framing and the queue
 * of commands. The hv_redis_t is freed by hv_redis_close(), after the connection is handed
 * back to conn, which frees its own memory once its handles have closed; owner callbacks may
 * close, so state is checked after each.
 *
 * States: CONNECTING (conn's connect, under the connect timeout) -> PREPARING (the commands the
 * URL asks for before the owner's: AUTH when it has a user or a password, then SELECT for a
 * database other than 0; each is sent once the one before said yes, and is the one pending
 * command, under its own deadline) -> OPEN (the owner was told, and sends) -> BROKEN (the
 * owner is told once: on_connect while CONNECTING or PREPARING, on_error once OPEN) ->
 * CLOSING (hv_redis_close).
 *
 * The bounds (redis.h) are kept by a scan of the RESP framing that sees every byte before the
 * reader does: it knows where the current reply started, which arrays are open and how many
 * elements each still owes, and the length a header announces as its digits arrive. Bytes up
 * to the one that breaks a bound go to the reader (replies completed before it are answered),
 * the rest never does. The scan is stricter than the reader only on framing no Redis sends
 * (a header that is not a count, a bulk string not followed by CRLF), which fails as a reply
 * the reader refuses would (HV_EPROTO).
 */
#include "harvestd/redis.h"

#include <hiredis/read.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>

#include "harvestd/common.h"
#include "harvestd/cf_tls.h"
#include "harvestd/conn.h"
#include "harvestd/detail.h"
#include "harvestd/log.h"

typedef enum { ST_CONNECTING, ST_PREPARING, ST_OPEN, ST_BROKEN, ST_CLOSING } state_t;

/* The commands of PREPARING, in the order they are sent. */
typedef enum { PREP_AUTH, PREP_SELECT, PREP_DONE } prep_t;

static const char *const prep_names[] = {"AUTH", "SELECT"};

/* Where the scan is: at a reply's or element's type byte, in a header's count ($ and *), in a
 * simple line (+ - :), in a bulk string's bytes, or at the CRLF after them. */
typedef enum {
    SC_TYPE,
    SC_COUNT,
    SC_COUNT_LF,
    SC_LINE,
    SC_LINE_LF,
    SC_BULK,
    SC_BULK_CR,
    SC_BULK_LF
} scan_state_t;

typedef struct {
    scan_state_t state;
    char type;    /* the header's or line's type byte */
    int negative; /* the count started with '-' */
    int digits;
    uint64_t count;                    /* the header's count so far */
    uint64_t line;                     /* bytes of the simple line so far */
    uint64_t bulk;                     /* bulk string bytes still to come */
    unsigned depth;                    /* arrays open */
    uint64_t owed[HV_REDIS_MAX_DEPTH]; /* elements each open array still owes */
    uint64_t elements;                 /* elements this reply's arrays announced */
    uint64_t bytes;                    /* bytes of this reply so far */
} scan_t;

typedef struct pending_s {
    hv_redis_reply_cb cb;
    void *data;
    uint64_t deadline;
    TAILQ_ENTRY(pending_s) link;
} pending_t;

struct hv_redis_s {
    uv_loop_t *loop;
    state_t state;
    const hv_redis_cbs_t *cbs;
    void *data;
    hv_conn_t *conn;
    redisReader *reader;
    TAILQ_HEAD(, pending_s) pending;
    size_t npending;
    int in_callback; /* an owner callback is running: close defers the free */
    int dead;        /* closed during that callback */
    hv_redis_addr_t addr; /* who logs in (AUTH) and the database to select (0: none) */
    uint64_t timeout_ms;
    prep_t prep;               /* PREPARING: the command sent */
    const char *failed_command; /* the connect failed in PREPARING: that command's name */
    char *refusal;     /* the server's error reply to it */
    scan_t scan;
    int scan_err;   /* why the scan stopped: HV_ETOOBIG or HV_EPROTO */
    char limit[96]; /* the bound a reply broke (HV_ETOOBIG), or "" */
    char tls_error[HV_DETAIL_TEXT_MAX]; /* the TLS failure's detail (HV_ETLS, HV_ECERT), or "" */
};

/* Free once no callback of ours is on the stack. */
static void maybe_free(hv_redis_t *r)
{
    if (r->state != ST_CLOSING || r->in_callback > 0)
        return;
    redisReaderFree(r->reader);
    free(r->refusal);
    explicit_bzero(&r->addr, sizeof(r->addr)); /* the password */
    free(r);
}

/* Run an owner callback; returns 0 if the connection was closed meanwhile (then freed). */
#define CALL(r, expr)                                                                           \
    ((r)->in_callback++, (expr), (r)->in_callback--,                                           \
     (r)->state == ST_CLOSING ? (maybe_free(r), 0) : 1)

/* Fail every pending command with `status`, oldest first. 0 if a callback closed us. */
static int fail_pending(hv_redis_t *r, int status)
{
    pending_t *p;
    while ((p = TAILQ_FIRST(&r->pending)) != NULL) {
        TAILQ_REMOVE(&r->pending, p, link);
        r->npending--;
        hv_redis_reply_cb cb = p->cb;
        void *data = p->data;
        free(p);
        if (!CALL(r, cb(r, data, status, NULL)))
            return 0;
    }
    return 1;
}

/* The timer follows the oldest pending command, or stops. */
static void arm(hv_redis_t *r)
{
    pending_t *p = TAILQ_FIRST(&r->pending);
    if (p == NULL) {
        hv_conn_set_timer(r->conn, 0);
        return;
    }
    uint64_t now = uv_now(r->loop);
    hv_conn_set_timer(r->conn, p->deadline > now ? p->deadline - now : 1);
}

/* The connection cannot go on: fail what waits (while PREPARING, its command, whose callback
 * tells the owner), then tell the owner of an open one. */
static void broken(hv_redis_t *r, int err)
{
    if (r->state != ST_OPEN && r->state != ST_PREPARING)
        return;
    int was_open = r->state == ST_OPEN;
    HV_LOG(HV_LOG_INFO, "event=redis_broken err=%s pending=%zu", hv_err_name(err), r->npending);
    r->state = ST_BROKEN;
    hv_conn_read_stop(r->conn);
    hv_conn_set_timer(r->conn, 0);
    if (fail_pending(r, err) && was_open)
        CALL(r, r->cbs->on_error(r, err));
}

/* Write a command and queue its reply's callback, whatever the state (callers check it). A
 * `secret` command (AUTH) is wiped from our memory once conn has its copy. */
static int send_command(hv_redis_t *r, int argc, const char **argv, const size_t *argvlen,
                        uint64_t timeout_ms, int secret, hv_redis_reply_cb cb, void *data)
{
    char *cmd;
    int len = redisFormatCommandArgv(&cmd, argc, argv, argvlen);
    if (len < 0)
        return UV_ENOMEM;
    int rc = hv_conn_write(r->conn, cmd, (size_t)len); /* conn sends its own copy */
    if (secret)
        explicit_bzero(cmd, (size_t)len);
    redisFreeCommand(cmd);
    if (rc != 0)
        return rc;
    pending_t *p = hv_xmalloc(sizeof(*p));
    p->cb = cb;
    p->data = data;
    p->deadline = uv_now(r->loop) + timeout_ms;
    TAILQ_INSERT_TAIL(&r->pending, p, link);
    if (r->npending++ == 0)
        arm(r);
    return 0;
}

static void on_prepared(hv_redis_t *r, void *data, int status, const redisReply *reply);

/* Send the first command of PREPARING from `from` on that the URL asks for; with none left,
 * the connect is over and the owner hears of it. */
static void prepare(hv_redis_t *r, prep_t from)
{
    for (prep_t p = from; p < PREP_DONE; p++) {
        char db[16];
        const char *argv[3];
        size_t lens[3];
        int argc = 0;
        if (p == PREP_AUTH && r->addr.password[0] == '\0' && r->addr.user[0] == '\0')
            continue;
        if (p == PREP_SELECT && r->addr.db == 0)
            continue;
        argv[argc++] = prep_names[p];
        if (p == PREP_AUTH) {
            if (r->addr.user[0] != '\0')
                argv[argc++] = r->addr.user; /* else the default user */
            argv[argc++] = r->addr.password;
        } else {
            snprintf(db, sizeof(db), "%u", r->addr.db);
            argv[argc++] = db;
        }
        for (int i = 0; i < argc; i++)
            lens[i] = strlen(argv[i]);
        r->state = ST_PREPARING;
        r->prep = p;
        int rc = send_command(r, argc, argv, lens, r->timeout_ms, p == PREP_AUTH, on_prepared,
                              NULL);
        if (rc != 0) {
            r->state = ST_BROKEN;
            hv_conn_read_stop(r->conn);
            hv_conn_set_timer(r->conn, 0);
            CALL(r, r->cbs->on_connect(r, rc));
        }
        return;
    }
    r->state = ST_OPEN;
    if (CALL(r, r->cbs->on_connect(r, 0)))
        arm(r);
}

/* The answer to a command of PREPARING: a refusal (or none) ends the connect, and the owner
 * hears of it now; a yes moves on to the next. A close by the owner (its cancellation) is not
 * news to it. */
static void on_prepared(hv_redis_t *r, void *data, int status, const redisReply *reply)
{
    (void)data;
    if (r->state == ST_CLOSING)
        return;
    if (status == 0 && reply->type == REDIS_REPLY_ERROR) {
        r->refusal = hv_xstrndup(reply->str, reply->len);
        status = HV_EREFUSED;
    }
    if (status != 0) {
        if (r->state == ST_PREPARING) {
            r->state = ST_BROKEN;
            hv_conn_read_stop(r->conn);
            hv_conn_set_timer(r->conn, 0);
        }
        r->failed_command = prep_names[r->prep];
        CALL(r, r->cbs->on_connect(r, status));
        return;
    }
    prepare(r, r->prep + 1);
}

/* A TLS failure's detail, kept for hv_redis_tls_error(). */
static void keep_tls_error(hv_redis_t *r, int err)
{
    const hv_fault_t *f = hv_conn_error(r->conn);
    if ((err == HV_ETLS || err == HV_ECERT) && f->code != HV_D_NONE)
        hv_detail_format(r->tls_error, sizeof(r->tls_error), f->code, f->arg);
}

static void on_conn_connect(hv_conn_t *c, int status)
{
    hv_redis_t *r = c->data;
    if (r->state != ST_CONNECTING)
        return; /* the connect timed out first */
    hv_conn_set_timer(c, 0);
    if (status != 0) {
        keep_tls_error(r, status);
        r->state = ST_BROKEN;
        CALL(r, r->cbs->on_connect(r, status));
        return;
    }
    hv_conn_read_start(c);
    prepare(r, PREP_AUTH);
}

static void on_conn_timeout(hv_conn_t *c)
{
    hv_redis_t *r = c->data;
    if (r->state == ST_CONNECTING) {
        r->state = ST_BROKEN;
        CALL(r, r->cbs->on_connect(r, UV_ETIMEDOUT));
    } else {
        broken(r, UV_ETIMEDOUT);
    }
}

static void on_conn_error(hv_conn_t *c, int err)
{
    keep_tls_error(c->data, err);
    broken(c->data, err);
}

/* ---- the bounds */

/* A bound broken: the scan stops here. Returns 0, for the scan's caller. */
__attribute__((format(printf, 2, 3))) static int over(hv_redis_t *r, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->limit, sizeof(r->limit), fmt, ap);
    va_end(ap);
    r->scan_err = HV_ETOOBIG;
    return 0;
}

static int malformed(hv_redis_t *r)
{
    r->scan_err = HV_EPROTO;
    return 0;
}

/* An element (or the reply itself) is complete: the arrays it closes are closed, and once no
 * array is open the next byte starts a new reply. */
static void element_done(scan_t *sc)
{
    sc->state = SC_TYPE;
    while (sc->depth > 0) {
        if (--sc->owed[sc->depth - 1] > 0)
            return;
        sc->depth--;
    }
    sc->bytes = 0;
    sc->elements = 0;
}

/* A header's count is complete (after its CRLF). 1, or 0 with the scan stopped. */
static int header_done(hv_redis_t *r)
{
    scan_t *sc = &r->scan;
    if (sc->negative) { /* -1: a nil bulk string or array, as the reader takes it */
        element_done(sc);
        return 1;
    }
    if (sc->type == '$') {
        if (sc->bytes + sc->count + 2 > HV_REDIS_MAX_REPLY_BYTES)
            return over(r, "a reply longer than %d bytes", HV_REDIS_MAX_REPLY_BYTES);
        sc->bulk = sc->count;
        sc->state = sc->bulk > 0 ? SC_BULK : SC_BULK_CR;
        return 1;
    }
    if (sc->count == 0) {
        element_done(sc);
        return 1;
    }
    sc->elements += sc->count;
    sc->owed[sc->depth++] = sc->count;
    sc->state = SC_TYPE;
    return 1;
}

/* One byte of a header's count: "-1", or digits whose value stays within the bound. */
static int count_byte(hv_redis_t *r, char ch)
{
    scan_t *sc = &r->scan;
    if (ch == '\r') {
        if (sc->digits == 0)
            return malformed(r);
        sc->state = SC_COUNT_LF;
        return 1;
    }
    if (ch == '-' && sc->digits == 0 && !sc->negative) {
        sc->negative = 1;
        return 1;
    }
    if (ch < '0' || ch > '9')
        return malformed(r);
    sc->count = sc->count * 10 + (uint64_t)(ch - '0');
    sc->digits++;
    if (sc->negative && sc->count != 1)
        return malformed(r);
    if (sc->negative)
        return 1;
    /* Refused as soon as the digits say too much: "$99999999999" does not wait for its CRLF. */
    if (sc->type == '$' && sc->count > HV_REDIS_MAX_BULK)
        return over(r, "a bulk string longer than %d bytes", HV_REDIS_MAX_BULK);
    if (sc->type == '*' && sc->count > HV_REDIS_MAX_ELEMENTS - sc->elements)
        return over(r, "arrays of more than %d elements in one reply", HV_REDIS_MAX_ELEMENTS);
    return 1;
}

/* One byte outside a bulk string's contents. 1, or 0 with the scan stopped. */
static int scan_byte(hv_redis_t *r, char ch)
{
    scan_t *sc = &r->scan;
    if (++sc->bytes > HV_REDIS_MAX_REPLY_BYTES)
        return over(r, "a reply longer than %d bytes", HV_REDIS_MAX_REPLY_BYTES);
    switch (sc->state) {
    case SC_TYPE:
        sc->type = ch;
        if (ch == '+' || ch == '-' || ch == ':') {
            sc->line = 0;
            sc->state = SC_LINE;
            return 1;
        }
        if (ch != '$' && ch != '*')
            return malformed(r);
        if (ch == '*' && sc->depth == HV_REDIS_MAX_DEPTH)
            return over(r, "arrays nested deeper than %d", HV_REDIS_MAX_DEPTH);
        sc->negative = 0;
        sc->digits = 0;
        sc->count = 0;
        sc->state = SC_COUNT;
        return 1;
    case SC_COUNT:
        return count_byte(r, ch);
    case SC_COUNT_LF:
        return ch == '\n' ? header_done(r) : malformed(r);
    case SC_LINE_LF:
        if (ch == '\n') {
            element_done(sc);
            return 1;
        }
        /* A CR inside the line, as the reader takes it: only CRLF ends a line. */
        sc->line++;
        if (ch == '\r')
            break;
        sc->state = SC_LINE;
        /* fall through */
    case SC_LINE:
        if (ch == '\r') {
            sc->state = SC_LINE_LF;
            return 1;
        }
        sc->line++;
        break;
    case SC_BULK_CR:
        if (ch != '\r')
            return malformed(r);
        sc->state = SC_BULK_LF;
        return 1;
    case SC_BULK_LF:
        if (ch != '\n')
            return malformed(r);
        element_done(sc);
        return 1;
    case SC_BULK:
        break; /* not here: scan() takes the contents whole */
    }
    if (sc->line > HV_REDIS_MAX_BULK)
        return over(r, "a status, error or integer line longer than %d bytes", HV_REDIS_MAX_BULK);
    return 1;
}

/* How many of `len` bytes are within the bounds: all of them, or those before the byte that
 * broke one (r->scan_err says why). */
static size_t scan(hv_redis_t *r, const char *data, size_t len)
{
    scan_t *sc = &r->scan;
    size_t i = 0;
    while (i < len) {
        if (sc->state == SC_BULK) {
            /* Its header made sure the reply has room for it. */
            size_t n = (size_t)HV_MIN((uint64_t)(len - i), sc->bulk);
            sc->bulk -= n;
            sc->bytes += n;
            i += n;
            if (sc->bulk == 0)
                sc->state = SC_BULK_CR;
            continue;
        }
        if (!scan_byte(r, data[i]))
            return i;
        i++;
    }
    return len;
}

/* ---- replies */

/* Answer each complete reply the reader has. 1, or 0 when the connection is no longer open
 * (broken, SELECT failed, or closed by a callback: then freed). */
static int deliver(hv_redis_t *r)
{
    for (;;) {
        void *reply = NULL;
        if (redisReaderGetReply(r->reader, &reply) != REDIS_OK) {
            broken(r, HV_EPROTO);
            return 0;
        }
        if (reply == NULL)
            return 1;
        pending_t *p = TAILQ_FIRST(&r->pending);
        if (p == NULL) { /* a reply nobody asked for */
            freeReplyObject(reply);
            broken(r, HV_EPROTO);
            return 0;
        }
        TAILQ_REMOVE(&r->pending, p, link);
        r->npending--;
        int alive = CALL(r, p->cb(r, p->data, 0, reply));
        free(p);
        freeReplyObject(reply);
        if (!alive)
            return 0;
        if (r->state != ST_OPEN && r->state != ST_PREPARING)
            return 0; /* a callback's command broke the connection, or AUTH or SELECT failed */
    }
}

static void on_conn_read(hv_conn_t *c, const char *data, size_t len)
{
    hv_redis_t *r = c->data;
    if (r->state != ST_OPEN && r->state != ST_PREPARING)
        return;
    size_t within = scan(r, data, len);
    if (within > 0 && redisReaderFeed(r->reader, data, within) != REDIS_OK) {
        broken(r, HV_EPROTO);
        return;
    }
    if (!deliver(r))
        return;
    if (within < len) {
        broken(r, r->scan_err);
        return;
    }
    arm(r);
}

static const hv_conn_cbs_t conn_cbs = {on_conn_connect, on_conn_read, on_conn_error,
                                       on_conn_timeout};

int hv_redis_connect(hv_conn_env_t *env, hv_tls_ctx_t *tls, const hv_redis_addr_t *addr,
                     uint64_t timeout_ms, const hv_redis_cbs_t *cbs, void *data, hv_redis_t **out)
{
    *out = NULL;
    if (addr->tls && tls == NULL)
        return UV_EINVAL;
    hv_redis_t *r = hv_xcalloc(1, sizeof(*r));
    r->loop = env->loop;
    r->cbs = cbs;
    r->data = data;
    r->state = ST_CONNECTING;
    r->addr = *addr;
    r->timeout_ms = timeout_ms > 0 ? timeout_ms : 1;
    TAILQ_INIT(&r->pending);
    r->reader = redisReaderCreate();
    if (r->reader == NULL) {
        free(r);
        return UV_ENOMEM;
    }
    struct sockaddr_in6 a6;
    struct sockaddr_in a4;
    int is_ip = uv_ip4_addr(addr->host, 0, &a4) == 0 || uv_ip6_addr(addr->host, 0, &a6) == 0;
    hv_cf_tls_arg_t tls_arg = {.ctx = tls, .host = addr->host, .host_is_ip = is_ip,
                               .port = addr->port};
    hv_conn_layer_t layers[1] = {{&hv_cf_tls, &tls_arg}};
    int rc = hv_conn_connect(env, layers, addr->tls ? 1 : 0, addr->host, is_ip, addr->port,
                             &conn_cbs, r, &r->conn);
    if (rc != 0) {
        redisReaderFree(r->reader);
        explicit_bzero(&r->addr, sizeof(r->addr));
        free(r);
        return rc;
    }
    hv_conn_set_timer(r->conn, r->timeout_ms);
    *out = r;
    return 0;
}

const char *hv_redis_failed_command(const hv_redis_t *r)
{
    return r->failed_command;
}

const char *hv_redis_refusal(const hv_redis_t *r)
{
    return r->refusal;
}

const char *hv_redis_tls_error(const hv_redis_t *r)
{
    return r->tls_error[0] != '\0' ? r->tls_error : NULL;
}

const char *hv_redis_limit(const hv_redis_t *r)
{
    return r->limit[0] != '\0' ? r->limit : NULL;
}

int hv_redis_command(hv_redis_t *r, int argc, const char **argv, const size_t *argvlen,
                     uint64_t timeout_ms, hv_redis_reply_cb cb, void *data)
{
    if (r->state != ST_OPEN)
        return UV_ENOTCONN;
    return send_command(r, argc, argv, argvlen, timeout_ms, 0, cb, data);
}

size_t hv_redis_pending(const hv_redis_t *r)
{
    return r->npending;
}

void *hv_redis_data(const hv_redis_t *r)
{
    return r->data;
}

void hv_redis_close(hv_redis_t *r)
{
    if (r->state == ST_CLOSING)
        return;
    r->state = ST_CLOSING;
    hv_conn_close(r->conn); /* no callback of conn's runs after this */
    r->conn = NULL;
    r->in_callback++;
    pending_t *p;
    while ((p = TAILQ_FIRST(&r->pending)) != NULL) {
        TAILQ_REMOVE(&r->pending, p, link);
        r->npending--;
        p->cb(r, p->data, UV_ECANCELED, NULL);
        free(p);
    }
    r->in_callback--;
    maybe_free(r);
}
