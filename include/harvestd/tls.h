/*
 * tls.h: TLS client sessions on mbedtls, as pure memory transforms: ciphertext in from the
 * socket, plaintext out to HTTP, and the reverse. No libuv here: conn moves the bytes.
 *
 * One hv_tls_ctx_t (configuration, trust store, random generator, session cache) is shared
 * by every connection and outlives them all. Each connection has an hv_tls_t with two
 * buffers: inbound ciphertext (filled by the caller from the socket, drained by mbedtls) and
 * outbound ciphertext (filled by mbedtls, drained by the caller after every call).
 *
 * Everything specific to mbedtls 2.28 (no TLS 1.3, curve configuration, how a resumed
 * handshake is recognised, iPAddress SAN matching) is confined to tls.c.
 */
#ifndef HARVESTD_TLS_H
#define HARVESTD_TLS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "harvestd/detail.h"

/* Newest protocol the build offers, for logs and the README. */
#define HV_TLS_NEWEST "TLS 1.2"

/** Inbound ciphertext buffer: more than one maximal record plus a socket read. */
#define HV_TLS_IN_BUF (64 * 1024)

typedef struct hv_tls_ctx_s hv_tls_ctx_t;
typedef struct hv_tls_s hv_tls_t;

typedef struct {
    uint64_t handshakes;  /* full handshakes completed */
    uint64_t resumed;     /* abbreviated (resumed) handshakes completed */
    uint64_t failures;
    /* The server's chains (tls.c: the verified-certificate cache); counted by the workers. */
    uint64_t chains_verified; /* against the trust store, whole */
    uint64_t chains_anchored; /* from an intermediate verified before */
    uint64_t chains_cached;   /* the same leaf for the same host: no signature checked */
} hv_tls_stats_t;

/**
 * Create the shared context. `ca_file` is a PEM bundle (NULL: the system bundle);
 * `insecure` disables certificate verification. Returns 0, or an error with a message in
 * `err` naming the file.
 */
int hv_tls_ctx_new(const char *ca_file, int insecure, hv_tls_ctx_t **out, char *err,
                   size_t errcap);
void hv_tls_ctx_free(hv_tls_ctx_t *ctx);
const hv_tls_stats_t *hv_tls_ctx_stats(const hv_tls_ctx_t *ctx);

/**
 * A client session for `host` (SNI and name check for names; an IP literal is matched
 * against the certificate's iPAddress entries and sends no SNI). `session_key` (e.g.
 * "host:port") selects the cached session to resume. Allocation failure aborts.
 */
hv_tls_t *hv_tls_new(hv_tls_ctx_t *ctx, const char *host, int host_is_ip,
                     const char *session_key);
/** hv_tls_new() that offers ALPN "h2" before "http/1.1" when `h2` is set (with the cipher
 *  suites RFC 9113 allows HTTP/2 alone), "http/1.1" alone otherwise. */
hv_tls_t *hv_tls_new_alpn(hv_tls_ctx_t *ctx, const char *host, int host_is_ip,
                          const char *session_key, int h2);
/** The protocol ALPN chose ("h2", "http/1.1"), NULL when the server chose none. */
const char *hv_tls_alpn(const hv_tls_t *t);
void hv_tls_free(hv_tls_t *t);

/** Where the next socket read should land: free space at the end of the inbound buffer. */
void hv_tls_in_space(hv_tls_t *t, char **ptr, size_t *len);
/** `n` bytes were read into that space. */
void hv_tls_in_commit(hv_tls_t *t, size_t n);

/** Drive the handshake: 0 done, 1 needs more input, HV_ETLS or HV_ECERT (see error). */
int hv_tls_handshake(hv_tls_t *t);

/*
 * The handshake in two halves, for running its public-key work on another thread
 * (tlspool.h): hv_tls_handshake_step() touches only `t` (and the context's settings, trust
 * store and random generators, which threads share safely), so it may run on a worker while
 * nothing else uses `t`; hv_tls_handshake_finish() then runs on the loop thread with its
 * result, and does what touches the shared context (the session cache, the figures).
 * hv_tls_handshake() is the two in a row.
 */
/** Steps as far as the input allows: 1 (needs more), 0 (over) or -1 (failed). */
int hv_tls_handshake_step(hv_tls_t *t);
/** Whether no input waits: a step could only ask for more (no need to hand it to a
 *  worker). */
int hv_tls_handshake_idle(const hv_tls_t *t);
/** What hv_tls_handshake() returns, for a step's result. */
int hv_tls_handshake_finish(hv_tls_t *t, int step);

/** A worker thread that runs handshake steps: its own random generator, seeded from the
 *  context's entropy (hv_tls_thread_stop() frees it, on the same thread). */
void hv_tls_thread_start(hv_tls_ctx_t *ctx);
void hv_tls_thread_stop(void);

/**
 * Decrypt into `buf`: returns bytes (> 0), 0 when more input is needed, UV_EOF after the
 * peer's close_notify, or HV_ETLS.
 */
ssize_t hv_tls_read(hv_tls_t *t, char *buf, size_t cap);

/** Whether plaintext or ciphertext is buffered, so a read could progress without I/O. */
int hv_tls_has_buffered(const hv_tls_t *t);

/** Encrypt all of `data` into the outbound buffer. 0 or HV_ETLS. */
int hv_tls_write(hv_tls_t *t, const char *data, size_t len);

/** Outbound ciphertext waiting to be sent; hv_tls_out_clear() once it is copied out. */
void hv_tls_out(const hv_tls_t *t, const char **ptr, size_t *len);
void hv_tls_out_clear(hv_tls_t *t);

/*
 * Sessions kept elsewhere (across runs: the re-crawl store). A session is exported as opaque
 * bytes (mbedtls's own serialisation, with the certificate chain the server presented) under
 * its session key ("host:port"), and imported back into the context's cache before a
 * connection to that key starts. Both on the loop thread.
 */
/** The cached session of `key` into `out` (`cap` bytes): its length, 0 when there is none,
 *  or UV_ENOBUFS when it does not fit. */
ssize_t hv_tls_session_export(hv_tls_ctx_t *ctx, const char *key, unsigned char *out,
                              size_t cap);
/** Put a session exported earlier into the cache under `key` (replacing one there); 0, or
 *  UV_EINVAL for bytes that are no session of this build (it is then dropped). */
int hv_tls_session_import(hv_tls_ctx_t *ctx, const char *key, const unsigned char *data,
                          size_t len);
/** Whether the cache has a session for `key`. */
int hv_tls_session_has(hv_tls_ctx_t *ctx, const char *key);
/** Called after every handshake that completed and left a session in the cache for `key`
 *  (a full one, or a resumption that renewed its ticket): where a store learns that there
 *  is something to export. NULL: none. */
void hv_tls_ctx_on_session(hv_tls_ctx_t *ctx, void (*cb)(void *ud, const char *key), void *ud);
/** Called by hv_tls_new*() (on the loop thread) when the cache has no session for `key`,
 *  before the ClientHello is made: the callback may hv_tls_session_import() one, which the
 *  connection then offers. NULL: none. */
void hv_tls_ctx_on_miss(hv_tls_ctx_t *ctx, void (*cb)(void *ud, const char *key), void *ud);
/** Whether the cached session of `key` carries a ticket: 1 (with the lifetime hint the server
 *  gave, in seconds, into *lifetime_s; 0: none given), 0 (resumable by session id alone), or
 *  UV_ENOENT (no session). */
int hv_tls_session_ticket(hv_tls_ctx_t *ctx, const char *key, uint32_t *lifetime_s);
/** A fingerprint of how this context verifies servers (verification on or off, the trusted
 *  certificates). A resumed session skips the verification its full handshake made: a session
 *  kept across runs is to be imported only into a context with the same fingerprint. */
uint64_t hv_tls_ctx_trust(const hv_tls_ctx_t *ctx);

/** Count a handshake that failed outside mbedtls (the peer closed or reset the socket). */
void hv_tls_count_failure(hv_tls_t *t);

/** Machine-readable detail of the last failure ("certificate_expired", "tls_alert_40"); ""
 *  before any. */
const char *hv_tls_error(const hv_tls_t *t);

/** The same detail as a code and its argument (code HV_D_NONE before any failure). It stays
 *  valid until hv_tls_free() and changes only with a later failure on `t`. */
const hv_fault_t *hv_tls_fault(const hv_tls_t *t);

#endif
