/*
 * stream.c: the Redis stream source (see stream.h).
 *
 * Entries are held in one table by id from the moment they arrive until their
 * acknowledgement is confirmed; the table's size is the bound that reading respects. An
 * entry goes QUEUED (in its batch's slot, waiting to be handed to the batch) -> DELIVERED
 * (the batch has it: job, page, record, write) -> DURABLE (its record is durable; waiting for
 * the acknowledgement to be sent) -> ACKING (sent; removed when the reply comes, put back to
 * DURABLE if the connection fails first).
 *
 * A slot is one batch name: the entries waiting for it, and the batch hosted on the batch
 * host (bhost.h) that writes its output (started when entries arrive, ended when it has been
 * quiet for a while or when an entry names other rules, and started again when more come,
 * once the host has reported the last one's end). The batch reads from a source of the
 * slot's (hv_source_t) that the slot feeds. Outputs are prepared (created and synced, their
 * crash notes read) and completed (the note removed) by the host, off the loop.
 *
 * Everything that moves runs from one pass, a step of the engine's own (hv_engine_add_pass):
 * I/O callbacks only record what they learnt and wake it, which marks the stream and wakes
 * the engine. What the pass hands to batches starts in the same engine pass.
 */
#include "harvestd/stream.h"

#include <assert.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>
#include <uthash.h>

#include "harvestd/bhost.h"
#include "harvestd/common.h"
#include "harvestd/dns.h"
#include "harvestd/engine.h"
#include "harvestd/handles.h"
#include "harvestd/log.h"
#include "harvestd/redis.h"
#include "harvestd/source.h"
#include "harvestd/streamkeys.h"

#define CONNECT_TIMEOUT_MS 5000
#define COMMAND_TIMEOUT_MS 10000
/* XREADGROUP BLOCK. Short: a read that comes back empty says the stream is dry, and the last
 * records are then written and synced at once; an idle daemon reads ten times a second. */
#define BLOCK_MS 100
#define BACKOFF_MIN_MS 200
#define BACKOFF_MAX_MS 10000
#define TICK_MS 500
#define RECHECK_MS 10               /* a read held back by the backlog: how soon to look again */
#define QUIET_END_MS 5000           /* a batch with nothing to do this long closes its output */
#define ACKS_PER_SCRIPT 512
#define IDS_PER_REFRESH 1024
#define URL_MAX 8192                /* as the reader's line limit */
#define ID_MAX 48                   /* "ms-seq": two 64-bit numbers and a dash */

typedef enum { E_CHECKING, E_QUEUED, E_DELIVERED, E_DURABLE, E_ACKING } estate_t;
typedef enum { P_GROUP, P_PENDING, P_NEW } phase_t;

typedef struct slot_s slot_t;
typedef struct args_s args_t;

typedef struct entry_s {
    UT_hash_handle hh;
    char id[ID_MAX];
    estate_t state;
    int ok;
    int lost;              /* another consumer owns it now (the refresh found out) */
    slot_t *slot;
    uint64_t line;
    char *url;             /* NULL: the entry has none */
    size_t url_len;
    const hv_ruleset_t *rules;
    hv_detail_t reject;
    const char *dead;      /* not NULL: a dead letter, for this reason (once its record, if it
                              gets one, is durable) */
    int poisoned;          /* delivered more than redis_max_deliveries times */
    int check_sent;        /* E_CHECKING: its XPENDING is in flight */
    char **fv;             /* a dead letter's own fields and values, as they came */
    size_t *fvlen;
    size_t nfv;
    TAILQ_ENTRY(entry_s) link; /* the slot's queue, the acknowledgements' or the dead letters' */
} entry_t;

TAILQ_HEAD(entry_list, entry_s);

typedef struct src_s {
    hv_source_t base;
    slot_t *slot;
    const hv_sink_t *sink;
    void *ud;
} src_t;

struct slot_s {
    UT_hash_handle hh;
    hv_stream_t *s;
    char *name;
    char *key;             /* its hash in Redis (S:batch:NAME) */
    char *path;            /* the output */
    char *note;            /* its crash note: input lines whose page took the parser down */
    hv_hosted_t *hb;       /* the batch on the host: preparing, running or completing */
    src_t *src;            /* the running batch's source, until the batch closes it */
    const hv_ruleset_t *rules; /* the running batch's */
    int paused;
    int eager;             /* the batch writes and syncs each record at once */
    int ending;            /* the batch's input was ended */
    unsigned outstanding;  /* delivered to the batch, not yet durable */
    uint64_t quiet_since;  /* when it last had nothing queued or outstanding */
    struct entry_list queue;
    unsigned refs;         /* held entries of this slot */
};

typedef struct {
    hv_stream_t *s;
    const char *name;      /* "read" or "write", for logs */
    hv_redis_t *r;
    int up;
    uint64_t backoff_ms;
    uv_timer_t retry;
} link_t;

/* An acknowledgement in flight: the entries it covers. */
typedef struct {
    hv_stream_t *s;
    unsigned n;
    entry_t *e[];
} ackreq_t;

struct hv_stream_s {
    uv_loop_t *loop;
    const hv_config_t *cfg;
    hv_engine_t *engine;
    hv_bhost_t *host;
    hv_stream_cbs_t cbs;
    void *ud;
    char out_dir[1024];
    char consumer[256];
    char url[HV_REDIS_URL_SHOWN_MAX]; /* redis_url as logs show it: no password */
    hv_redis_addr_t addr;
    hv_tls_ctx_t *tls;     /* the engine's, for rediss:// (NULL for redis://) */
    hv_dns_t *dns;
    hv_conn_stats_t cstats;
    hv_conn_env_t env;
    link_t rd, wr;
    args_t *args;          /* the command being built */

    phase_t phase;
    int pending_done;      /* this run has read its old pending entries (phase P_NEW once) */
    char cursor[ID_MAX];   /* P_PENDING: the last id read */
    int reading;
    int drained;           /* the last read returned fewer entries than it asked for */
    int grouping;
    int claiming;
    int refreshing;
    unsigned asked;        /* entries requested by reads and claims in flight */
    char claim_cursor[ID_MAX];
    uint64_t next_claim_ms;
    uint64_t next_refresh_ms;

    entry_t *held;         /* by id */
    unsigned nheld;
    unsigned nqueued;      /* of those, waiting in their slot for the batch to take them */
    struct entry_list acks;
    unsigned nacks;        /* entries in `acks` */
    unsigned nacking;      /* entries in acknowledgements in flight */
    int acks_refused;      /* the server refused the acknowledgement script: none goes again */
    struct entry_list dead; /* dead letters to move to S:dead (with their acknowledgement) */
    unsigned ndead;        /* entries in `dead` */
    unsigned ndeading;     /* dead letters sent, not yet answered */
    unsigned nunchecked;   /* entries E_CHECKING whose XPENDING is still to be sent */
    char *dead_key;        /* S:dead */
    slot_t *slots;         /* by name */
    unsigned nbatches;

    hv_engine_pass_t step; /* ours in the engine's pass */
    int dirty;             /* woken since our last step */
    uv_timer_t tick;
    uv_timer_t recheck;    /* a read held back by the backlog looks again soon */
    hv_handles_t handles;

    int repairing;         /* the outputs' repair runs: nothing connects before it ends */
    int stopping;
    int fatal;
    int closing;
    uint64_t give_up_ms;   /* closing: acknowledgements are given up after this */
    void (*closed)(void *ud);
    void *closed_ud;
    hv_stream_stats_t stats;
};

/* XACK each entry; count in the batch's hash only those that were still pending. KEYS: the
 * stream, the batch hash. ARGV: the group, then id and "1" (ok) or "0" (failed) pairs. */
static const char ack_script[] =
    "local done, ok = 0, 0\n"
    "for i = 2, #ARGV, 2 do\n"
    "  if redis.call('XACK', KEYS[1], ARGV[1], ARGV[i]) == 1 then\n"
    "    done = done + 1\n"
    "    if ARGV[i + 1] == '1' then ok = ok + 1 end\n"
    "  end\n"
    "end\n"
    "if done > 0 then\n"
    "  redis.call('HINCRBY', KEYS[2], 'done', done)\n"
    "  if ok > 0 then redis.call('HINCRBY', KEYS[2], 'ok', ok) end\n"
    "  if done > ok then redis.call('HINCRBY', KEYS[2], 'failed', done - ok) end\n"
    "end\n"
    "return done\n";

/* Move an entry to the dead letters, if it is still pending: XACK it and, when that removed it,
 * XADD it to S:dead, and when its line has a failed record (a poisoned entry) count it in its
 * batch's hash as done, failed and dead. KEYS: the stream, S:dead[, the batch's hash]. ARGV:
 * the group, the id, the reason, the consumer, then the entry's fields and values. */
static const char dead_script[] =
    "if redis.call('XACK', KEYS[1], ARGV[1], ARGV[2]) == 1 then\n"
    "  local f = {'id', ARGV[2], 'reason', ARGV[3], 'consumer', ARGV[4]}\n"
    "  for i = 5, #ARGV do f[#f + 1] = ARGV[i] end\n"
    "  redis.call('XADD', KEYS[2], '*', unpack(f))\n"
    "  if #KEYS > 2 then\n"
    "    redis.call('HINCRBY', KEYS[3], 'done', 1)\n"
    "    redis.call('HINCRBY', KEYS[3], 'failed', 1)\n"
    "    redis.call('HINCRBY', KEYS[3], 'dead', 1)\n"
    "  end\n"
    "  return 1\n"
    "end\n"
    "return 0\n";

/* Touch (XCLAIM ... JUSTID, which resets the idle time) each id still pending for this
 * consumer; return the others. KEYS: the stream. ARGV: the group, the consumer, the ids. */
static const char refresh_script[] =
    "local lost = {}\n"
    "for i = 3, #ARGV do\n"
    "  local p = redis.call('XPENDING', KEYS[1], ARGV[1], ARGV[i], ARGV[i], 1)\n"
    "  if p[1] ~= nil and p[1][2] == ARGV[2] then\n"
    "    redis.call('XCLAIM', KEYS[1], ARGV[1], ARGV[2], 0, ARGV[i], 'JUSTID')\n"
    "  else\n"
    "    lost[#lost + 1] = ARGV[i]\n"
    "  end\n"
    "end\n"
    "return lost\n";

static void wake(hv_stream_t *s);
static void link_connect(link_t *l);
static void link_down(link_t *l, int err);
static int retry_not_ready(link_t *l, const char *error);
static void fatal(hv_stream_t *s, int err, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static uint64_t now_ms(const hv_stream_t *s)
{
    return uv_now(s->loop);
}

static unsigned bound(const hv_stream_t *s)
{
    return s->cfg->queue_size;
}

static unsigned free_slots(const hv_stream_t *s)
{
    unsigned used = s->nheld + s->asked;
    return used < bound(s) ? bound(s) - used : 0;
}

static void fatal(hv_stream_t *s, int err, const char *fmt, ...)
{
    char detail[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(detail, sizeof(detail), fmt, ap);
    va_end(ap);
    if (s->fatal)
        return;
    s->fatal = 1;
    HV_LOG(HV_LOG_ERROR, "event=redis_fatal error=\"%s\"", detail);
    s->cbs.on_fatal(s->ud, err, detail);
}

/* A reply that is an error: its text (for logs), else NULL. */
static const char *reply_error(const redisReply *rep)
{
    return rep != NULL && rep->type == REDIS_REPLY_ERROR ? rep->str : NULL;
}

static int error_is(const redisReply *rep, const char *prefix)
{
    const char *e = reply_error(rep);
    return e != NULL && strncmp(e, prefix, strlen(prefix)) == 0;
}

/* Errors that say Redis cannot serve now but will: loading its data after a restart, a
 * script running too long, a replica whose master is down, a slot being moved, a replica
 * that was the master before a failover. The error's code (its first word), or NULL. */
static const char *not_ready_code(const char *e)
{
    static const char *const codes[] = {"LOADING", "BUSY", "MASTERDOWN", "TRYAGAIN", "READONLY"};
    for (size_t i = 0; e != NULL && i < HV_ARRAY_SIZE(codes); i++) {
        size_t n = strlen(codes[i]);
        if (strncmp(e, codes[i], n) == 0 && (e[n] == ' ' || e[n] == '\0'))
            return codes[i];
    }
    return NULL;
}

/* ---- entries and slots ---- */

static void slot_free(slot_t *sl)
{
    HASH_DEL(sl->s->slots, sl);
    free(sl->name);
    free(sl->key);
    free(sl->path);
    free(sl->note);
    free(sl);
}

/* A slot with nothing left goes. */
static void slot_maybe_free(slot_t *sl)
{
    if (sl->hb == NULL && sl->refs == 0 && TAILQ_EMPTY(&sl->queue))
        slot_free(sl);
}

static void entry_destroy(entry_t *e)
{
    for (size_t i = 0; i < e->nfv; i++)
        free(e->fv[i]);
    free(e->fv);
    free(e->fvlen);
    free(e->url);
    free(e);
}

static void entry_free(hv_stream_t *s, entry_t *e)
{
    HASH_DEL(s->held, e);
    s->nheld--;
    slot_t *sl = e->slot;
    entry_destroy(e);
    if (sl != NULL) {
        sl->refs--;
        slot_maybe_free(sl);
    }
}

static slot_t *slot_get(hv_stream_t *s, const char *name)
{
    slot_t *sl;
    HASH_FIND_STR(s->slots, name, sl);
    if (sl != NULL)
        return sl;
    char file[HV_STREAM_FILE_MAX + 1];
    sl = hv_xcalloc(1, sizeof(*sl));
    sl->s = s;
    sl->name = hv_xstrdup(name);
    /* Every name has an output name, bounded (streamkeys.h), and a key of its own. */
    int rc = hv_streamkeys_output_name(name, s->consumer, file, sizeof(file));
    assert(rc == 0);
    (void)rc;
    size_t kn = strlen(s->cfg->redis_stream) + strlen(name) + 8;
    sl->key = hv_xmalloc(kn);
    rc = hv_streamkeys_batch(s->cfg->redis_stream, name, sl->key, kn);
    assert(rc == 0);
    size_t n = strlen(s->out_dir) + 1 + strlen(file) + 1;
    sl->path = hv_xmalloc(n);
    snprintf(sl->path, n, "%s/%s", s->out_dir, file);
    sl->note = hv_xmalloc(n + 8);
    snprintf(sl->note, n + 8, "%.*s.crashes", (int)(strlen(sl->path) - 6), sl->path);
    TAILQ_INIT(&sl->queue);
    sl->quiet_since = now_ms(s);
    HASH_ADD_KEYPTR(hh, s->slots, sl->name, strlen(sl->name), sl);
    return sl;
}

/* ---- the batch's source ---- */

static void src_start(hv_source_t *base, const hv_sink_t *sink, void *ud)
{
    src_t *src = (src_t *)base;
    src->sink = sink;
    src->ud = ud;
    wake(src->slot->s);
}

static void src_resume(hv_source_t *base)
{
    src_t *src = (src_t *)base;
    src->slot->paused = 0;
    wake(src->slot->s);
}

static void src_close(hv_source_t *base)
{
    src_t *src = (src_t *)base;
    if (src->slot->src == src)
        src->slot->src = NULL;
    free(src);
}

static const char *src_name(const hv_source_t *base)
{
    return ((const src_t *)base)->slot->name;
}

static const hv_source_ops_t src_ops = {src_start, src_resume, src_close, src_name, NULL};

/* ---- batches ---- */

static void on_batch_durable(void *ud, hv_hosted_t *hb, char *token, int ok)
{
    slot_t *sl = ud;
    hv_stream_t *s = sl->s;
    entry_t *e;
    (void)hb;
    HASH_FIND_STR(s->held, token, e);
    free(token);
    if (e == NULL || e->state != E_DELIVERED)
        return;
    e->state = E_DURABLE;
    e->ok = ok;
    if (e->dead != NULL) {
        TAILQ_INSERT_TAIL(&s->dead, e, link); /* its record is durable: now the dead letter */
        s->ndead++;
    } else {
        TAILQ_INSERT_TAIL(&s->acks, e, link);
        s->nacks++;
    }
    if (--sl->outstanding == 0 && TAILQ_EMPTY(&sl->queue))
        sl->quiet_since = now_ms(s);
    wake(s);
}

static void on_batch_start(void *ud, hv_hosted_t *hb, const hv_hosted_prep_t *prep)
{
    slot_t *sl = ud;
    (void)hb, (void)prep;
    sl->s->nbatches++;
    HV_LOG(HV_LOG_INFO, "event=stream_batch_open batch=%s output=%s", sl->name, sl->path);
}

/* Every record durable, the ParserCrashed ones too, the note removed (status 0); or not. */
static void on_batch_end(void *ud, hv_hosted_t *hb, const hv_hosted_end_t *end)
{
    slot_t *sl = ud;
    hv_stream_t *s = sl->s;
    (void)hb;
    if (end->batch != NULL) {
        char summary[2048];
        hv_batch_format_stats(end->batch, now_ms(s), summary, sizeof(summary));
        HV_LOG(HV_LOG_INFO, "event=stream_batch_closed batch=%s output=%s status=%s %s",
               sl->name, sl->path, end->status == 0 ? "ok" : hv_err_name(end->status), summary);
        s->nbatches--;
    }
    sl->hb = NULL;
    sl->src = NULL;
    sl->outstanding = 0; /* what was delivered and never written stays pending in Redis */
    if (end->status != 0 && end->status != HV_ECANCELLED)
        fatal(s, end->status, "%s", end->detail);
    s->cbs.on_progress(s->ud);
    slot_maybe_free(sl);
    wake(s);
}

static const hv_hosted_cbs_t hosted_cbs = {on_batch_start, on_batch_durable, on_batch_end};

static void start_batch(slot_t *sl, const hv_ruleset_t *rules)
{
    hv_stream_t *s = sl->s;
    src_t *src = hv_xcalloc(1, sizeof(*src));
    src->base.ops = &src_ops;
    src->slot = sl;
    hv_hosted_opts_t opts = {
        .output = HV_BHOST_SHARED,
        .name = sl->name,
        .output_path = sl->path,
        .crash_note = sl->note,
        .rules = rules,
    };
    sl->src = src;
    sl->rules = rules;
    sl->paused = 0;
    sl->eager = 0;
    sl->ending = 0;
    sl->outstanding = 0;
    sl->hb = hv_bhost_start(s->host, &opts, &src->base, &hosted_cbs, sl);
}

/* Hand queued entries to the slot's batch; start or end batches as the queue asks. */
static void slot_pass(slot_t *sl)
{
    hv_stream_t *s = sl->s;
    entry_t *e;
    if (sl->hb == NULL) {
        if (s->stopping || s->fatal || TAILQ_EMPTY(&sl->queue))
            return;
        start_batch(sl, TAILQ_FIRST(&sl->queue)->rules);
        return; /* the batch's source starts delivering once the batch runs */
    }
    if (hv_hosted_batch(sl->hb) == NULL || sl->src == NULL || sl->src->sink == NULL ||
        sl->ending)
        return;
    while (!sl->paused && (e = TAILQ_FIRST(&sl->queue)) != NULL) {
        if (e->state == E_CHECKING)
            break; /* its delivery count first; the others wait behind it, in order */
        if (e->reject == HV_D_NONE && e->rules != sl->rules) {
            /* One batch has one rule set: this one ends, the next starts with these. */
            sl->ending = 1;
            sl->src->sink->on_end(sl->src->ud, 0);
            return;
        }
        TAILQ_REMOVE(&sl->queue, e, link);
        s->nqueued--;
        e->state = E_DELIVERED;
        sl->outstanding++;
        hv_line_meta_t meta = {
            .token = e->id, .batch = sl->name, .reject = e->reject, .poisoned = e->poisoned};
        size_t len = e->url != NULL ? e->url_len : 0;
        int over = len > URL_MAX;
        src_t *src = sl->src;
        int pause = src->sink->on_line(src->ud, e->url != NULL ? e->url : "",
                                       over ? URL_MAX : len, e->line, over, &meta);
        if (sl->src != src)
            return; /* the batch closed its input meanwhile */
        if (pause)
            sl->paused = 1;
    }
    if (TAILQ_EMPTY(&sl->queue) && sl->outstanding == 0 &&
        now_ms(s) - sl->quiet_since >= QUIET_END_MS) {
        sl->ending = 1;
        sl->src->sink->on_end(sl->src->ud, 0);
    }
}

/* ---- entries arriving ---- */

static const redisReply *field(const redisReply *fields, const char *name)
{
    if (fields == NULL || fields->type != REDIS_REPLY_ARRAY)
        return NULL;
    for (size_t i = 0; i + 1 < fields->elements; i += 2) {
        const redisReply *k = fields->element[i], *v = fields->element[i + 1];
        if (k->type == REDIS_REPLY_STRING && k->len == strlen(name) &&
            memcmp(k->str, name, k->len) == 0 && v->type == REDIS_REPLY_STRING)
            return v;
    }
    return NULL;
}

static void ack_deleted(hv_stream_t *s, const char *id);

/* A stream id as Redis makes them: digits, a dash, digits. */
static int id_ok(const redisReply *id)
{
    size_t dashes = 0;
    if (id->len == 0 || id->len >= ID_MAX)
        return 0;
    for (size_t i = 0; i < id->len; i++) {
        if (id->str[i] == '-')
            dashes++;
        else if (id->str[i] < '0' || id->str[i] > '9')
            return 0;
    }
    return dashes == 1 && id->str[0] != '-' && id->str[id->len - 1] != '-';
}

typedef enum { GOT_NEW, GOT_PENDING, GOT_CLAIMED } got_t;

/* An entry no batch can take (e->dead says why): held, counted against the bound like the
 * others, until it is moved to S:dead with its acknowledgement (flush_dead()). It keeps its
 * own fields and values for that. */
static void keep_fields(entry_t *e, const redisReply *fields)
{
    e->nfv = fields->elements;
    e->fv = hv_xcalloc(e->nfv ? e->nfv : 1, sizeof(*e->fv));
    e->fvlen = hv_xcalloc(e->nfv ? e->nfv : 1, sizeof(*e->fvlen));
    for (size_t i = 0; i < e->nfv; i++) {
        const redisReply *f = fields->element[i];
        int str = f->type == REDIS_REPLY_STRING;
        e->fv[i] = hv_xmalloc(str ? f->len + 1 : 1);
        if (str)
            memcpy(e->fv[i], f->str, f->len);
        e->fvlen[i] = str ? f->len : 0;
        e->fv[i][e->fvlen[i]] = '\0';
    }
}

static void take_dead_letter(hv_stream_t *s, entry_t *e, const redisReply *fields, got_t how)
{
    keep_fields(e, fields);
    HASH_ADD_STR(s->held, id, e);
    s->nheld++;
    TAILQ_INSERT_TAIL(&s->dead, e, link);
    s->ndead++;
    if (how == GOT_CLAIMED)
        s->stats.reclaimed++;
    else
        s->stats.read++;
    HV_LOG(HV_LOG_WARNING, "event=stream_dead_letter id=%s reason=%s action=move stream=%s",
           e->id, e->dead, s->dead_key);
}

/* How an entry came (got_t, above): new, read again from this consumer's pending list (a
 * previous run's), or taken over from another consumer. The last two may already have a
 * record. */

/* One [id, [field, value...]] from XREADGROUP or XAUTOCLAIM. */
static void take_entry(hv_stream_t *s, const redisReply *item, got_t how)
{
    if (item->type != REDIS_REPLY_ARRAY || item->elements < 2 ||
        item->element[0]->type != REDIS_REPLY_STRING || !id_ok(item->element[0]))
        return;
    const char *id = item->element[0]->str;
    const redisReply *fields = item->element[1];
    entry_t *e;
    HASH_FIND_STR(s->held, id, e);
    if (e != NULL)
        return; /* already ours (delivered again after a reconnect, or claimed back) */
    if (fields->type != REDIS_REPLY_ARRAY) {
        /* Deleted from the stream while pending: nothing to fetch, nothing to write. */
        HV_LOG(HV_LOG_WARNING, "event=stream_entry_deleted id=%s action=ack", id);
        s->stats.invalid++;
        ack_deleted(s, id);
        return;
    }
    const redisReply *batch = field(fields, "batch"), *line = field(fields, "line");
    const redisReply *url = field(fields, "url"), *rules = field(fields, "rules");
    e = hv_xcalloc(1, sizeof(*e));
    memcpy(e->id, id, item->element[0]->len + 1);
    e->state = E_QUEUED;
    /* A batch and a line harvestd can place, or a dead letter: a name cut at a NUL would join
     * another batch, a line that is not a number would be no line of any batch. */
    if (batch != NULL && !hv_streamkeys_batch_field_ok(batch->str, batch->len))
        e->dead = "batch_invalid";
    else if (line == NULL || hv_streamkeys_line_field(line->str, line->len, &e->line) != 0)
        e->dead = "line_invalid";
    if (e->dead != NULL) {
        take_dead_letter(s, e, fields, how);
        return;
    }
    if (url != NULL) {
        e->url = hv_xstrndup(url->str, url->len);
        e->url_len = url->len;
    } else {
        e->reject = HV_D_ENTRY_WITHOUT_URL;
    }
    const char *rname = rules != NULL && rules->len > 0 ? rules->str : s->cfg->default_rules;
    int rules_ok = rules == NULL || memchr(rules->str, '\0', rules->len) == NULL;
    e->rules = rname[0] != '\0' && rules_ok ? hv_config_ruleset(s->cfg, rname) : NULL;
    if (rname[0] != '\0' && e->rules == NULL && e->reject == HV_D_NONE) {
        char shown[80];
        e->reject = HV_D_UNKNOWN_RULES;
        snprintf(shown, sizeof(shown), "%.64s", rname);
        HV_LOG(HV_LOG_WARNING, "event=stream_unknown_rules id=%s rules=\"%s\"", id, shown);
    }
    if (e->reject != HV_D_NONE)
        s->stats.invalid++;
    const char *bname = batch != NULL && batch->len > 0 ? batch->str : "unbatched";
    slot_t *sl = slot_get(s, bname);
    e->slot = sl;
    sl->refs++;
    HASH_ADD_STR(s->held, id, e);
    s->nheld++;
    TAILQ_INSERT_TAIL(&sl->queue, e, link);
    s->nqueued++;
    if (how != GOT_NEW) {
        /* Delivered before: a daemon may have died on it. Its delivery count decides. */
        e->state = E_CHECKING;
        keep_fields(e, fields);
        s->nunchecked++;
    }
    if (how == GOT_CLAIMED) {
        s->stats.reclaimed++;
        HV_LOG(HV_LOG_NOTICE, "event=stream_reclaimed id=%s batch=%s line=%" PRIu64, id,
               sl->name, e->line);
    } else {
        s->stats.read++;
        if (how == GOT_PENDING)
            HV_LOG(HV_LOG_NOTICE, "event=stream_redelivered id=%s batch=%s line=%" PRIu64, id,
                   sl->name, e->line);
    }
}

/* A reply with more entries than were asked for (a broken or hostile server): what fits the
 * request is kept, the rest is left pending for this consumer, where XAUTOCLAIM finds it
 * again once it is idle. Said once per reply. */
static void over_count(const hv_stream_t *s, const char *what, unsigned asked, size_t got)
{
    if (got > asked)
        HV_LOG(HV_LOG_WARNING, "event=stream_reply_over_count command=%s stream=%s asked=%u "
               "got=%zu kept=%u", what, s->cfg->redis_stream, asked, got, asked);
}

/* XREADGROUP's reply: [[stream, [entry...]]], or nil after the block time. Takes at most
 * `asked` entries; returns how many it took, the last one's id in `last`. */
static size_t take_read(hv_stream_t *s, const redisReply *rep, unsigned asked, char *last,
                        size_t lastcap)
{
    if (rep->type != REDIS_REPLY_ARRAY || rep->elements < 1)
        return 0;
    const redisReply *st = rep->element[0];
    if (st->type != REDIS_REPLY_ARRAY || st->elements < 2 ||
        st->element[1]->type != REDIS_REPLY_ARRAY)
        return 0;
    const redisReply *items = st->element[1];
    size_t n = HV_MIN(items->elements, (size_t)asked);
    over_count(s, "XREADGROUP", asked, items->elements);
    for (size_t i = 0; i < n; i++)
        take_entry(s, items->element[i], s->phase == P_PENDING ? GOT_PENDING : GOT_NEW);
    if (n > 0) {
        const redisReply *it = items->element[n - 1];
        if (it->type == REDIS_REPLY_ARRAY && it->elements >= 1 &&
            it->element[0]->type == REDIS_REPLY_STRING && it->element[0]->len < lastcap)
            memcpy(last, it->element[0]->str, it->element[0]->len + 1);
    }
    return n;
}

/* ---- commands ---- */

/* A command's arguments, built in the stream's one buffer: every command is formatted by
 * hv_redis_command() before it returns, so one buffer serves them all. */
struct args_s {
    const char *argv[8 + 2 * ACKS_PER_SCRIPT + IDS_PER_REFRESH];
    size_t len[8 + 2 * ACKS_PER_SCRIPT + IDS_PER_REFRESH];
    int argc;
};

static void arg(args_t *a, const char *s)
{
    a->argv[a->argc] = s;
    a->len[a->argc] = strlen(s);
    a->argc++;
}

static int link_send(link_t *l, args_t *a, uint64_t timeout_ms, hv_redis_reply_cb cb, void *data)
{
    if (!l->up || l->r == NULL)
        return UV_ENOTCONN;
    return hv_redis_command(l->r, a->argc, a->argv, a->len, timeout_ms, cb, data);
}

static void on_group(hv_redis_t *r, void *data, int status, const redisReply *rep)
{
    hv_stream_t *s = data;
    (void)r;
    s->grouping = 0;
    if (status != 0)
        return; /* the connection's failure, which reconnects */
    if (retry_not_ready(&s->wr, reply_error(rep)))
        return;
    if (error_is(rep, "WRONGTYPE")) {
        fatal(s, UV_EINVAL, "redis_stream %s at %s is not a stream (the key holds another type)",
              s->cfg->redis_stream, s->url);
        return;
    }
    if (reply_error(rep) != NULL && !error_is(rep, "BUSYGROUP")) {
        fatal(s, UV_EINVAL, "creating group %s on %s: %s", s->cfg->redis_group,
              s->cfg->redis_stream, reply_error(rep));
        return;
    }
    if (reply_error(rep) == NULL)
        HV_LOG(HV_LOG_NOTICE, "event=stream_group_created stream=%s group=%s",
               s->cfg->redis_stream, s->cfg->redis_group);
    if (s->phase == P_GROUP) {
        s->phase = s->pending_done ? P_NEW : P_PENDING;
        snprintf(s->cursor, sizeof(s->cursor), "0");
    }
    wake(s);
}

static void ensure_group(hv_stream_t *s)
{
    args_t *a = s->args;
    a->argc = 0;
    arg(a, "XGROUP");
    arg(a, "CREATE");
    arg(a, s->cfg->redis_stream);
    arg(a, s->cfg->redis_group);
    arg(a, "0");
    arg(a, "MKSTREAM");
    if (link_send(&s->wr, a, COMMAND_TIMEOUT_MS, on_group, s) == 0)
        s->grouping = 1;
}

/* A read or a claim in flight: the entries it asked for count against the bound. */
typedef struct {
    hv_stream_t *s;
    unsigned count;
} askreq_t;

static void on_read(hv_redis_t *r, void *data, int status, const redisReply *rep)
{
    askreq_t *rq = data;
    hv_stream_t *s = rq->s;
    unsigned asked = rq->count;
    (void)r;
    s->asked -= asked;
    free(rq);
    s->reading = 0;
    if (status != 0 || retry_not_ready(&s->rd, reply_error(rep)))
        return;
    if (error_is(rep, "NOGROUP")) {
        /* Redis lost the group (restarted without its data): create it again. */
        HV_LOG(HV_LOG_WARNING, "event=stream_group_missing stream=%s group=%s action=create",
               s->cfg->redis_stream, s->cfg->redis_group);
        s->phase = P_GROUP;
        wake(s);
        return;
    }
    if (error_is(rep, "WRONGTYPE")) {
        fatal(s, UV_EINVAL, "redis_stream %s at %s is not a stream (the key holds another type)",
              s->cfg->redis_stream, s->url);
        return;
    }
    if (reply_error(rep) != NULL) {
        fatal(s, UV_EINVAL, "XREADGROUP on %s: %s", s->cfg->redis_stream, reply_error(rep));
        return;
    }
    char last[ID_MAX] = "";
    size_t n = take_read(s, rep, asked, last, sizeof(last));
    /* Fewer than asked: the stream has nothing more for now. */
    s->drained = s->phase == P_NEW && n < asked;
    if (s->phase == P_PENDING) {
        if (n == 0) {
            s->phase = P_NEW;
            s->pending_done = 1;
            HV_LOG(HV_LOG_INFO, "event=stream_pending_read held=%u", s->nheld);
        } else if (last[0] != '\0') {
            memcpy(s->cursor, last, sizeof(last));
        }
    }
    wake(s);
}

static void on_recheck(uv_timer_t *t)
{
    wake(t->data);
}

/* Entries this daemon holds but cannot start are entries another daemon could be fetching:
 * it reads only while the jobs waiting for a request slot (and the entries not yet handed to
 * their batch) are fewer than `concurrency`, one round of requests ahead. */
static unsigned backlog_room(const hv_stream_t *s)
{
    unsigned backlog = hv_engine_waiting(s->engine) + s->nqueued;
    return backlog < s->cfg->concurrency ? s->cfg->concurrency - backlog : 0;
}

static void start_read(hv_stream_t *s)
{
    unsigned n = HV_MIN(free_slots(s), backlog_room(s));
    /* Small reads while most of the bound is in use would cost a round trip per entry. */
    unsigned least = HV_MAX(1u, HV_MIN(64u, HV_MIN(bound(s), s->cfg->concurrency) / 8));
    if (n == 0 || (n < least && s->nheld > 0)) {
        /* Nothing wakes us when waiting jobs start: look again shortly. */
        if (free_slots(s) >= least && !uv_is_active((uv_handle_t *)&s->recheck))
            uv_timer_start(&s->recheck, on_recheck, RECHECK_MS, 0);
        return;
    }
    char count[24], block[24];
    snprintf(count, sizeof(count), "%u", n);
    snprintf(block, sizeof(block), "%u", BLOCK_MS);
    args_t *a = s->args;
    a->argc = 0;
    arg(a, "XREADGROUP");
    arg(a, "GROUP");
    arg(a, s->cfg->redis_group);
    arg(a, s->consumer);
    arg(a, "COUNT");
    arg(a, count);
    if (s->phase == P_NEW) {
        arg(a, "BLOCK");
        arg(a, block);
    }
    arg(a, "STREAMS");
    arg(a, s->cfg->redis_stream);
    arg(a, s->phase == P_NEW ? ">" : s->cursor);
    askreq_t *rq = hv_xmalloc(sizeof(*rq));
    rq->s = s;
    rq->count = n;
    if (link_send(&s->rd, a, BLOCK_MS + COMMAND_TIMEOUT_MS, on_read, rq) != 0) {
        free(rq);
        return;
    }
    s->asked += n;
    s->reading = 1;
}

/* ---- acknowledgements ---- */

static void on_ack(hv_redis_t *r, void *data, int status, const redisReply *rep)
{
    ackreq_t *aq = data;
    hv_stream_t *s = aq->s;
    (void)r;
    s->nacking -= aq->n;
    if (status != 0 || reply_error(rep) != NULL) {
        /* Kept: they go again once the connection is back (XACK is idempotent, and the
         * script counts only what it removed). */
        for (unsigned i = aq->n; i-- > 0;) {
            aq->e[i]->state = E_DURABLE;
            TAILQ_INSERT_HEAD(&s->acks, aq->e[i], link);
            s->nacks++;
        }
        if (status == 0 && !retry_not_ready(&s->wr, reply_error(rep))) {
            s->acks_refused = 1;
            fatal(s, UV_EINVAL, "acknowledging on %s: %s", s->cfg->redis_stream,
                  reply_error(rep));
        }
        free(aq);
        wake(s);
        return;
    }
    for (unsigned i = 0; i < aq->n; i++)
        entry_free(s, aq->e[i]);
    s->stats.acked += aq->n;
    free(aq);
    wake(s);
}

/* Send what waits, one script per batch and round of up to ACKS_PER_SCRIPT entries. */
static void flush_acks(hv_stream_t *s)
{
    args_t *a = s->args;
    while (s->wr.up && !s->acks_refused && !TAILQ_EMPTY(&s->acks)) {
        slot_t *sl = TAILQ_FIRST(&s->acks)->slot;
        ackreq_t *aq = hv_xmalloc(sizeof(*aq) + ACKS_PER_SCRIPT * sizeof(entry_t *));
        aq->s = s;
        aq->n = 0;
        a->argc = 0;
        arg(a, "EVAL");
        arg(a, ack_script);
        arg(a, "2");
        arg(a, s->cfg->redis_stream);
        arg(a, sl->key);
        arg(a, s->cfg->redis_group);
        entry_t *e, *next;
        for (e = TAILQ_FIRST(&s->acks); e != NULL && aq->n < ACKS_PER_SCRIPT; e = next) {
            next = TAILQ_NEXT(e, link);
            if (e->slot != sl)
                continue;
            TAILQ_REMOVE(&s->acks, e, link);
            s->nacks--;
            e->state = E_ACKING;
            aq->e[aq->n++] = e;
            arg(a, e->id);
            arg(a, e->ok ? "1" : "0");
        }
        s->nacking += aq->n;
        if (link_send(&s->wr, a, COMMAND_TIMEOUT_MS, on_ack, aq) != 0) {
            on_ack(NULL, aq, UV_ENOTCONN, NULL);
            return;
        }
    }
}

static void on_plain_ack(hv_redis_t *r, void *data, int status, const redisReply *rep)
{
    (void)r, (void)data, (void)status, (void)rep;
}

/* ---- delivery counts ---- */

/* An XPENDING in flight: the entry it asks about, by id (it may be gone by the answer). */
typedef struct {
    hv_stream_t *s;
    char id[ID_MAX];
} checkreq_t;

/* The entry's one line of XPENDING ... id id 1: [id, consumer, idle, deliveries]. The
 * deliveries, or -1 when the entry is no longer this consumer's (taken over meanwhile). */
static long long pending_deliveries(const hv_stream_t *s, const redisReply *rep)
{
    if (rep->type != REDIS_REPLY_ARRAY || rep->elements == 0)
        return -1;
    const redisReply *it = rep->element[0];
    if (it->type != REDIS_REPLY_ARRAY || it->elements < 4 ||
        it->element[1]->type != REDIS_REPLY_STRING ||
        it->element[3]->type != REDIS_REPLY_INTEGER)
        return 0; /* not the reply Redis gives: no count to go by */
    if (strlen(s->consumer) != it->element[1]->len ||
        memcmp(s->consumer, it->element[1]->str, it->element[1]->len) != 0)
        return -1;
    return it->element[3]->integer;
}

static void on_check(hv_redis_t *r, void *data, int status, const redisReply *rep)
{
    checkreq_t *cq = data;
    hv_stream_t *s = cq->s;
    entry_t *e;
    (void)r;
    HASH_FIND_STR(s->held, cq->id, e);
    free(cq);
    if (e == NULL || e->state != E_CHECKING)
        return;
    if (status != 0 || retry_not_ready(&s->wr, reply_error(rep))) {
        e->check_sent = 0; /* asked again once the connection is back */
        s->nunchecked++;
        wake(s);
        return;
    }
    long long deliveries = 0;
    if (reply_error(rep) != NULL)
        HV_LOG(HV_LOG_WARNING, "event=stream_check_failed id=%s error=\"%s\"", e->id,
               reply_error(rep));
    else
        deliveries = pending_deliveries(s, rep);
    if (deliveries < 0) {
        /* Another consumer took it over meanwhile: it is theirs to write. */
        TAILQ_REMOVE(&e->slot->queue, e, link);
        s->nqueued--;
        s->stats.lost++;
        HV_LOG(HV_LOG_NOTICE, "event=stream_entry_taken id=%s batch=%s line=%" PRIu64, e->id,
               e->slot->name, e->line);
        entry_free(s, e);
        wake(s);
        return;
    }
    if (deliveries > (long long)s->cfg->redis_max_deliveries) {
        /* Its daemons kept dying on it: a failed record, and the dead letters. */
        e->poisoned = 1;
        e->reject = HV_D_DELIVERED_TOO_OFTEN;
        e->dead = "poisoned";
        HV_LOG(HV_LOG_WARNING, "event=stream_poisoned id=%s batch=%s line=%" PRIu64
               " deliveries=%lld max=%u action=dead_letter", e->id, e->slot->name, e->line,
               deliveries, s->cfg->redis_max_deliveries);
    }
    e->state = E_QUEUED;
    wake(s);
}

/* Ask the delivery count of each entry delivered before (read again from the pending list,
 * or taken over), one XPENDING each (they are few). */
static void send_checks(hv_stream_t *s)
{
    slot_t *sl, *tmp;
    entry_t *e;
    if (s->nunchecked == 0 || !s->wr.up)
        return;
    HASH_ITER(hh, s->slots, sl, tmp) {
        TAILQ_FOREACH(e, &sl->queue, link) {
            if (e->state != E_CHECKING || e->check_sent)
                continue;
            args_t *a = s->args;
            a->argc = 0;
            arg(a, "XPENDING");
            arg(a, s->cfg->redis_stream);
            arg(a, s->cfg->redis_group);
            arg(a, e->id);
            arg(a, e->id);
            arg(a, "1");
            checkreq_t *cq = hv_xmalloc(sizeof(*cq));
            cq->s = s;
            memcpy(cq->id, e->id, sizeof(cq->id));
            if (link_send(&s->wr, a, COMMAND_TIMEOUT_MS, on_check, cq) != 0) {
                free(cq);
                return;
            }
            e->check_sent = 1;
            s->nunchecked--;
        }
    }
}

/* ---- dead letters ---- */

typedef struct {
    hv_stream_t *s;
    entry_t *e;
} deadreq_t;

static void on_dead(hv_redis_t *r, void *data, int status, const redisReply *rep)
{
    deadreq_t *dq = data;
    hv_stream_t *s = dq->s;
    entry_t *e = dq->e;
    (void)r;
    free(dq);
    s->ndeading--;
    if (status != 0 || reply_error(rep) != NULL) {
        /* Kept, sent again once the connection is back (the script acknowledges first, so
         * an entry moved already is not moved twice). */
        TAILQ_INSERT_HEAD(&s->dead, e, link);
        s->ndead++;
        if (status == 0 && !retry_not_ready(&s->wr, reply_error(rep))) {
            s->acks_refused = 1;
            fatal(s, UV_EINVAL, "moving entry %s to %s: %s", e->id, s->dead_key,
                  reply_error(rep));
        }
        wake(s);
        return;
    }
    if (rep->type == REDIS_REPLY_INTEGER && rep->integer == 1)
        s->stats.dead++;
    else
        s->stats.lost++; /* another consumer had taken it over meanwhile */
    entry_free(s, e);
    wake(s);
}

/* Move what waits to S:dead, one script per entry (they are rare). */
static void flush_dead(hv_stream_t *s)
{
    args_t *a = s->args;
    entry_t *e;
    while (s->wr.up && !s->acks_refused && (e = TAILQ_FIRST(&s->dead)) != NULL) {
        TAILQ_REMOVE(&s->dead, e, link);
        s->ndead--;
        a->argc = 0;
        arg(a, "EVAL");
        arg(a, dead_script);
        arg(a, e->slot != NULL ? "3" : "2");
        arg(a, s->cfg->redis_stream);
        arg(a, s->dead_key);
        if (e->slot != NULL)
            arg(a, e->slot->key);
        arg(a, s->cfg->redis_group);
        arg(a, e->id);
        arg(a, e->dead);
        arg(a, s->consumer);
        for (size_t i = 0; i + 1 < e->nfv && a->argc + 2 <= (int)HV_ARRAY_SIZE(a->argv); i += 2) {
            a->argv[a->argc] = e->fv[i];
            a->len[a->argc++] = e->fvlen[i];
            a->argv[a->argc] = e->fv[i + 1];
            a->len[a->argc++] = e->fvlen[i + 1];
        }
        deadreq_t *dq = hv_xmalloc(sizeof(*dq));
        dq->s = s;
        dq->e = e;
        s->ndeading++;
        if (link_send(&s->wr, a, COMMAND_TIMEOUT_MS, on_dead, dq) != 0) {
            on_dead(NULL, dq, UV_ENOTCONN, NULL);
            return;
        }
    }
}

static void ack_deleted(hv_stream_t *s, const char *id)
{
    args_t *a = s->args;
    a->argc = 0;
    arg(a, "XACK");
    arg(a, s->cfg->redis_stream);
    arg(a, s->cfg->redis_group);
    arg(a, id);
    link_send(&s->wr, a, COMMAND_TIMEOUT_MS, on_plain_ack, NULL); /* else at the next start */
}

/* ---- taking over and keeping ---- */

static void on_claim(hv_redis_t *r, void *data, int status, const redisReply *rep)
{
    askreq_t *cq = data;
    hv_stream_t *s = cq->s;
    unsigned cq_count = cq->count;
    (void)r;
    s->asked -= cq->count;
    free(cq);
    s->claiming = 0;
    if (status != 0 || retry_not_ready(&s->wr, reply_error(rep)))
        return;
    if (reply_error(rep) != NULL) {
        if (!error_is(rep, "NOGROUP"))
            HV_LOG(HV_LOG_WARNING, "event=stream_claim_failed error=\"%s\"", reply_error(rep));
        return;
    }
    if (rep->type != REDIS_REPLY_ARRAY || rep->elements < 2 ||
        rep->element[0]->type != REDIS_REPLY_STRING ||
        rep->element[1]->type != REDIS_REPLY_ARRAY)
        return;
    const redisReply *items = rep->element[1];
    size_t n = HV_MIN(items->elements, (size_t)cq_count);
    over_count(s, "XAUTOCLAIM", cq_count, items->elements);
    for (size_t i = 0; i < n; i++)
        take_entry(s, items->element[i], GOT_CLAIMED);
    snprintf(s->claim_cursor, sizeof(s->claim_cursor), "%s", rep->element[0]->str);
    /* More to look at: go on at once rather than after another period. */
    if (strcmp(s->claim_cursor, "0-0") != 0)
        s->next_claim_ms = now_ms(s);
    wake(s);
}

static void start_claim(hv_stream_t *s)
{
    unsigned n = free_slots(s);
    if (n == 0)
        return;
    char idle[24], count[24];
    snprintf(idle, sizeof(idle), "%" PRIu64, s->cfg->redis_claim_idle_ms);
    snprintf(count, sizeof(count), "%u", HV_MIN(n, 1000u));
    args_t *a = s->args;
    a->argc = 0;
    arg(a, "XAUTOCLAIM");
    arg(a, s->cfg->redis_stream);
    arg(a, s->cfg->redis_group);
    arg(a, s->consumer);
    arg(a, idle);
    arg(a, s->claim_cursor);
    arg(a, "COUNT");
    arg(a, count);
    askreq_t *cq = hv_xmalloc(sizeof(*cq));
    cq->s = s;
    cq->count = HV_MIN(n, 1000u);
    if (link_send(&s->wr, a, COMMAND_TIMEOUT_MS, on_claim, cq) != 0) {
        free(cq);
        return;
    }
    s->asked += cq->count;
    s->claiming = 1;
    s->next_claim_ms = now_ms(s) + s->cfg->redis_claim_idle_ms / 2;
}

static void on_refresh(hv_redis_t *r, void *data, int status, const redisReply *rep)
{
    hv_stream_t *s = data;
    (void)r;
    s->refreshing = 0;
    if (status != 0 || retry_not_ready(&s->wr, reply_error(rep)))
        return;
    if (reply_error(rep) != NULL) {
        HV_LOG(HV_LOG_WARNING, "event=stream_refresh_failed error=\"%s\"", reply_error(rep));
        return;
    }
    if (rep->type != REDIS_REPLY_ARRAY)
        return;
    for (size_t i = 0; i < rep->elements; i++) {
        const redisReply *id = rep->element[i];
        entry_t *e;
        if (id->type != REDIS_REPLY_STRING)
            continue;
        HASH_FIND_STR(s->held, id->str, e);
        if (e == NULL || e->lost)
            continue;
        /* Its record is still written; the acknowledgement will find it gone. */
        e->lost = 1;
        s->stats.lost++;
        HV_LOG(HV_LOG_NOTICE, "event=stream_entry_taken id=%s batch=%s line=%" PRIu64, e->id,
               e->slot != NULL ? e->slot->name : "-", e->line);
    }
}

static void start_refresh(hv_stream_t *s)
{
    args_t *a = s->args;
    s->next_refresh_ms = now_ms(s) + HV_MAX(s->cfg->redis_claim_idle_ms / 4, 250);
    a->argc = 0;
    arg(a, "EVAL");
    arg(a, refresh_script);
    arg(a, "1");
    arg(a, s->cfg->redis_stream);
    arg(a, s->cfg->redis_group);
    arg(a, s->consumer);
    int first = a->argc;
    entry_t *e, *tmp;
    HASH_ITER(hh, s->held, e, tmp) {
        if (a->argc - first >= IDS_PER_REFRESH)
            break;
        if (e->state != E_ACKING && !e->lost)
            arg(a, e->id);
    }
    if (a->argc == first)
        return;
    if (link_send(&s->wr, a, COMMAND_TIMEOUT_MS, on_refresh, s) == 0)
        s->refreshing = 1;
}

/* ---- connections ---- */

static void on_retry(uv_timer_t *t)
{
    link_t *l = t->data;
    link_connect(l);
}

static void link_down(link_t *l, int err)
{
    hv_stream_t *s = l->s;
    if (l->r != NULL) {
        hv_redis_t *r = l->r;
        l->r = NULL;
        hv_redis_close(r);
    }
    int was_up = l->up;
    l->up = 0;
    if (was_up) {
        s->stats.reconnects++;
        HV_LOG(HV_LOG_WARNING, "event=redis_down link=%s url=%s err=%s (%s) held=%u "
               "acks_waiting=%u", l->name, s->url, hv_err_name(err),
               hv_strerror(err), s->nheld, s->nacks + s->nacking);
    }
    if ((s->stopping || s->closing) && l == &s->rd)
        return;
    uint64_t delay = l->backoff_ms;
    l->backoff_ms = HV_MIN(l->backoff_ms * 2, (uint64_t)BACKOFF_MAX_MS);
    if (!was_up)
        HV_LOG(HV_LOG_INFO, "event=redis_unreachable link=%s url=%s err=%s retry_in_ms=%" PRIu64,
               l->name, s->url, hv_err_name(err), delay);
    uv_timer_start(&l->retry, on_retry, delay, 0);
    wake(s);
}

/* A reply that says Redis is not ready (not_ready_code()): the link goes down and connects
 * again with the backoff, as when the connection is lost; 1 then. 0 for anything else. */
static int retry_not_ready(link_t *l, const char *error)
{
    const char *code = not_ready_code(error);
    if (code == NULL)
        return 0;
    HV_LOG(HV_LOG_WARNING, "event=redis_not_ready link=%s url=%s reply=%s action=reconnect",
           l->name, l->s->url, code);
    link_down(l, HV_ENOTREADY);
    return 1;
}

static void on_link_connect(hv_redis_t *r, int status)
{
    link_t *l = hv_redis_data(r);
    hv_stream_t *s = l->s;
    if (status == HV_EREFUSED && retry_not_ready(l, hv_redis_refusal(r)))
        return;
    /* The server refusing the URL's user, password or database will not change its mind on a
     * retry: a configuration error, like a bad URL. */
    if (status == HV_EREFUSED && strcmp(hv_redis_failed_command(r), "AUTH") == 0)
        fatal(s, UV_EINVAL, "redis_url %s: AUTH%s%s refused: %s", s->url,
              s->addr.user[0] != '\0' ? " as " : "", s->addr.user, hv_redis_refusal(r));
    else if (status == HV_EREFUSED)
        fatal(s, UV_EINVAL, "redis_url %s: SELECT %u refused: %s", s->url,
              s->addr.db, hv_redis_refusal(r));
    if (status != 0) {
        if (hv_redis_limit(r) != NULL)
            HV_LOG(HV_LOG_WARNING, "event=redis_reply_over_limit link=%s url=%s limit=\"%s\"",
                   l->name, s->url, hv_redis_limit(r));
        /* A certificate that does not verify, a handshake the server refuses: retried like
         * any failed connect (a server's certificate may be replaced while the daemon runs),
         * but said at every attempt, since nothing works until it is mended. */
        if (hv_redis_tls_error(r) != NULL)
            HV_LOG(HV_LOG_WARNING, "event=redis_tls_failed link=%s url=%s err=%s tls_error=%s "
                   "retry_in_ms=%" PRIu64, l->name, s->url, hv_err_name(status),
                   hv_redis_tls_error(r), l->backoff_ms);
        link_down(l, status);
        return;
    }
    l->up = 1;
    l->backoff_ms = BACKOFF_MIN_MS;
    HV_LOG(HV_LOG_NOTICE, "event=redis_up link=%s url=%s consumer=%s", l->name,
           s->url, s->consumer);
    if (l == &s->wr)
        ensure_group(s); /* also checks the key's type, at every connect */
    wake(s);
}

static void on_link_error(hv_redis_t *r, int err)
{
    link_t *l = hv_redis_data(r);
    /* A reply over a bound of redis.h: a broken or hostile server, named in the log. */
    if (hv_redis_limit(r) != NULL)
        HV_LOG(HV_LOG_WARNING, "event=redis_reply_over_limit link=%s url=%s limit=\"%s\"",
               l->name, l->s->url, hv_redis_limit(r));
    link_down(l, err);
}

static const hv_redis_cbs_t link_cbs = {on_link_connect, on_link_error};

static void link_connect(link_t *l)
{
    hv_stream_t *s = l->s;
    if (l->r != NULL || s->closing || ((s->stopping) && l == &s->rd))
        return;
    int rc = hv_redis_connect(&s->env, s->tls, &s->addr, CONNECT_TIMEOUT_MS, &link_cbs, l,
                              &l->r);
    if (rc != 0) {
        l->r = NULL;
        link_down(l, rc);
    }
}

/* ---- the pass ---- */

static void finish_close(hv_stream_t *s);

static void pass(hv_stream_t *s)
{
    slot_t *sl, *tmp;
    uint64_t now = now_ms(s);
    if (s->handles.closing)
        return;
    HASH_ITER(hh, s->slots, sl, tmp) {
        slot_pass(sl);
    }
    flush_acks(s);
    flush_dead(s);
    send_checks(s);
    int active = !s->stopping && !s->fatal && !s->closing;
    if (active && s->wr.up && s->phase == P_GROUP && !s->grouping)
        ensure_group(s);
    /* Claims before reads: a blocking read asks for every free slot, and returns (with new
     * entries, or none after BLOCK_MS) before the next claim is due. */
    if (active && s->wr.up && s->phase == P_NEW && !s->claiming && now >= s->next_claim_ms)
        start_claim(s);
    if (active && s->rd.up && s->phase != P_GROUP && !s->reading)
        start_read(s);
    if (!s->closing && s->wr.up && !s->refreshing && now >= s->next_refresh_ms)
        start_refresh(s);
    /* Once the stream runs dry, the last records are waited for one by one: each is written
     * and synced at once (and the batches go back to flush_ms and the interval when entries
     * come again). */
    HASH_ITER(hh, s->slots, sl, tmp) {
        hv_batch_t *b = sl->hb != NULL ? hv_hosted_batch(sl->hb) : NULL;
        if (b != NULL && sl->eager != (s->drained && active)) {
            sl->eager = s->drained && active;
            hv_batch_set_eager(b, sl->eager);
        }
    }
    /* A quarter of the bound waits for an fsync (reading would soon wait for it), or there is
     * nothing more to read: sync now rather than at the interval, which only spreads fsyncs
     * out under load. */
    if (active && s->nacks + s->nacking < s->nheld) {
        uint64_t unsynced = 0;
        HASH_ITER(hh, s->slots, sl, tmp) {
            hv_batch_t *b = sl->hb != NULL ? hv_hosted_batch(sl->hb) : NULL;
            if (b != NULL)
                unsynced += hv_batch_unsynced(b);
        }
        if (unsynced > 0 && (s->drained || unsynced >= bound(s) / 4 ||
                             free_slots(s) < bound(s) / 4 + 1)) {
            HASH_ITER(hh, s->slots, sl, tmp) {
                hv_batch_t *b = sl->hb != NULL ? hv_hosted_batch(sl->hb) : NULL;
                if (b != NULL && hv_batch_unsynced(b) > 0)
                    hv_batch_sync_soon(b);
            }
        }
    }
    if (s->closing)
        finish_close(s);
}

static void on_engine_pass(void *ud)
{
    hv_stream_t *s = ud;
    if (!s->dirty)
        return;
    s->dirty = 0;
    pass(s);
}

static void wake(hv_stream_t *s)
{
    if (s->handles.closing)
        return;
    s->dirty = 1;
    hv_engine_wake(s->engine);
}

static void on_tick(uv_timer_t *t)
{
    wake(t->data);
}

/* ---- lifecycle ---- */

static void on_handles_closed(hv_handles_t *hs)
{
    hv_stream_t *s = hv_container_of(hs, hv_stream_t, handles);
    void (*done)(void *) = s->closed;
    void *ud = s->closed_ud;
    hv_dns_close(s->dns);
    free(s->args);
    free(s->dead_key);
    explicit_bzero(&s->addr, sizeof(s->addr)); /* the password */
    free(s);
    if (done != NULL)
        done(ud);
}

int hv_stream_open(uv_loop_t *loop, const hv_config_t *cfg, hv_bhost_t *host,
                   hv_engine_t *engine, const char *out_dir, const hv_stream_cbs_t *cbs, void *ud, hv_stream_t **out,
                   char *err, size_t errcap)
{
    hv_redis_addr_t addr;
    *out = NULL;
    /* The configuration checked the URL and the password file; the file is read now. */
    const char *pwfile = cfg->redis_password_file[0] != '\0' ? cfg->redis_password_file : NULL;
    if (hv_redis_url_load(cfg->redis_url, pwfile, &addr, err, errcap) != 0)
        return UV_EINVAL;
    if (addr.tls && hv_engine_tls(engine) == NULL) {
        explicit_bzero(&addr, sizeof(addr));
        return hv_errf(err, errcap, UV_EINVAL, "redis_url: rediss:// needs TLS, and this "
                       "daemon has no TLS context");
    }
    hv_stream_t *s = hv_xcalloc(1, sizeof(*s));
    s->loop = loop;
    s->cfg = cfg;
    s->engine = engine;
    s->host = host;
    s->cbs = *cbs;
    s->ud = ud;
    s->addr = addr;
    s->tls = addr.tls ? hv_engine_tls(engine) : NULL;
    hv_redis_url_mask(cfg->redis_url, s->url, sizeof(s->url));
    explicit_bzero(&addr, sizeof(addr));
    snprintf(s->out_dir, sizeof(s->out_dir), "%s", out_dir);
    snprintf(s->consumer, sizeof(s->consumer), "%s", cfg->redis_consumer); /* see config */
    s->dns = hv_dns_new(loop, cfg->dns_ttl_ms, 4);
    s->args = hv_xmalloc(sizeof(*s->args));
    s->env.loop = loop;
    s->env.dns = s->dns;
    s->env.guard = NULL; /* the operator's server, not a fetched URL's */
    s->env.stats = &s->cstats;
    s->rd.s = s->wr.s = s;
    s->rd.name = "read";
    s->wr.name = "write";
    s->rd.backoff_ms = s->wr.backoff_ms = BACKOFF_MIN_MS;
    s->phase = P_GROUP;
    snprintf(s->claim_cursor, sizeof(s->claim_cursor), "0-0");
    TAILQ_INIT(&s->acks);
    TAILQ_INIT(&s->dead);
    size_t dn = strlen(cfg->redis_stream) + 8;
    s->dead_key = hv_xmalloc(dn);
    (void)hv_streamkeys_dead(cfg->redis_stream, s->dead_key, dn);
    s->step.run = on_engine_pass;
    s->step.ud = s;
    hv_engine_add_pass(engine, &s->step);
    hv_handles_init(&s->handles, on_handles_closed);
    uv_timer_init(loop, &s->tick);
    uv_timer_init(loop, &s->recheck);
    uv_timer_init(loop, &s->rd.retry);
    uv_timer_init(loop, &s->wr.retry);
    s->tick.data = s->recheck.data = s;
    s->rd.retry.data = &s->rd;
    s->wr.retry.data = &s->wr;
    hv_handles_own(&s->handles, (uv_handle_t *)&s->tick);
    hv_handles_own(&s->handles, (uv_handle_t *)&s->recheck);
    hv_handles_own(&s->handles, (uv_handle_t *)&s->rd.retry);
    hv_handles_own(&s->handles, (uv_handle_t *)&s->wr.retry);
    *out = s;
    return 0;
}

/* Every output of this consumer loses a torn last line (a crash) before anything is
 * appended, including those no entry will reopen: every line of them stays JSON. Then the
 * stream connects. */
static void on_outputs_repaired(void *ud)
{
    hv_stream_t *s = ud;
    s->repairing = 0;
    if (s->closing || s->stopping) {
        wake(s); /* finish_close waited for the repair */
        s->cbs.on_progress(s->ud); /* so did the daemon's stop */
        return;
    }
    uint64_t now = now_ms(s);
    s->next_claim_ms = now + s->cfg->redis_claim_idle_ms / 2;
    s->next_refresh_ms = now + HV_MAX(s->cfg->redis_claim_idle_ms / 4, 250);
    uv_timer_start(&s->tick, on_tick, TICK_MS, TICK_MS);
    HV_LOG(HV_LOG_NOTICE, "event=stream_start url=%s stream=%s group=%s consumer=%s bound=%u "
           "claim_idle_ms=%" PRIu64, s->url, s->cfg->redis_stream,
           s->cfg->redis_group, s->consumer, bound(s), s->cfg->redis_claim_idle_ms);
    link_connect(&s->wr);
    link_connect(&s->rd);
    s->cbs.on_ready(s->ud);
}

void hv_stream_start(hv_stream_t *s)
{
    char tail[HV_STREAM_FILE_MAX + 1];
    int rc = hv_streamkeys_output_name("x", s->consumer, tail, sizeof(tail));
    assert(rc == 0); /* every name has one (streamkeys.h) */
    (void)rc;
    s->repairing = 1;
    hv_bhost_repair_outputs(s->host, s->out_dir, tail + 1 /* ".CONSUMER.jsonl" */,
                            on_outputs_repaired, s);
}

void hv_stream_stop(hv_stream_t *s)
{
    if (s->stopping)
        return;
    s->stopping = 1;
    /* A blocking read in flight is abandoned: what it would have delivered stays pending
     * for this consumer and is read again at the next start. */
    uv_timer_stop(&s->rd.retry);
    if (s->rd.r != NULL) {
        hv_redis_t *r = s->rd.r;
        s->rd.r = NULL;
        s->rd.up = 0;
        hv_redis_close(r);
    }
    wake(s);
}

void hv_stream_stats(const hv_stream_t *s, hv_stream_stats_t *out)
{
    *out = s->stats;
    out->up = s->wr.up && (s->rd.up || s->stopping);
    out->held = s->nheld;
    out->acks_waiting = s->nacks + s->nacking + s->ndead + s->ndeading;
    out->batches = s->nbatches;
}

static void finish_close(hv_stream_t *s)
{
    if (s->handles.closing || s->repairing)
        return;
    unsigned waiting = s->nacks + s->nacking + s->ndead + s->ndeading;
    if (waiting > 0 && !s->fatal && now_ms(s) < s->give_up_ms)
        return; /* the tick comes back */
    if (waiting > 0)
        HV_LOG(HV_LOG_WARNING, "event=stream_acks_given_up count=%u note=\"their entries stay "
               "pending and are processed again\"", waiting);
    HV_LOG(HV_LOG_NOTICE, "event=stream_closed read=%" PRIu64 " reclaimed=%" PRIu64
           " acked=%" PRIu64 " lost=%" PRIu64 " invalid=%" PRIu64 " unacked=%u",
           s->stats.read, s->stats.reclaimed, s->stats.acked, s->stats.lost, s->stats.invalid,
           s->nheld);
    link_t *links[2] = {&s->rd, &s->wr};
    for (int i = 0; i < 2; i++) {
        if (links[i]->r != NULL) {
            hv_redis_t *r = links[i]->r;
            links[i]->r = NULL;
            links[i]->up = 0;
            hv_redis_close(r);
        }
    }
    entry_t *e, *tmp;
    HASH_ITER(hh, s->held, e, tmp) {
        HASH_DEL(s->held, e);
        entry_destroy(e);
    }
    s->nheld = 0;
    slot_t *sl, *stmp;
    HASH_ITER(hh, s->slots, sl, stmp) {
        slot_free(sl);
    }
    hv_engine_remove_pass(s->engine, &s->step);
    hv_handles_close_all(&s->handles);
}

void hv_stream_close(hv_stream_t *s, void (*done)(void *ud), void *ud)
{
    hv_stream_stop(s);
    s->closing = 1;
    s->closed = done;
    s->closed_ud = ud;
    s->give_up_ms = now_ms(s) + s->cfg->drain_timeout_ms;
    wake(s);
}
