/*
 * http.h: one HTTP/1.1 exchange over a byte stream (or an HTTP/2 stream's, below): request text, response parsing with
 * llhttp, header and body limits, content decoding (gzip/deflate with zlib) and the
 * keep-alive decision. Pure: no I/O and no loop; the owner feeds it bytes and reads results.
 *
 * A response moves through: head -> (owner decides what to do with the body) -> body ->
 * complete. Interim 1xx responses are skipped. After completion the owner may reuse the
 * connection only if `keep_alive` is set (llhttp said so and no stray bytes followed).
 */
#ifndef HARVESTD_HTTP_H
#define HARVESTD_HTTP_H

#include <llhttp.h>
#include <stddef.h>
#include <stdint.h>
#include <zlib.h>

#include "harvestd/buf.h"
#include "harvestd/detail.h"
#include "harvestd/url.h"

typedef struct {
    uint64_t max_body;         /* decoded body bytes kept; more is HV_ETOOBIG */
    uint64_t max_header_bytes; /* status line + header lines; more is HV_EPROTO */
    uint64_t max_drain;        /* body bytes read and dropped to keep a connection reusable */
    int truncate;              /* keep the first max_body bytes and drop the rest instead of
                                  failing (robots.txt) */
} hv_http_limits_t;

/** What the owner wants done with a body, decided once the head is complete. */
typedef enum {
    HV_HTTP_BODY_KEEP,    /* decode and keep it (within max_body) */
    HV_HTTP_BODY_DISCARD, /* read and drop it (within max_drain), then complete */
    HV_HTTP_BODY_ABORT,   /* stop now: hv_http_feed returns HV_ECANCELLED */
} hv_http_body_t;

typedef struct hv_http_s hv_http_t;
typedef hv_http_body_t (*hv_http_head_cb)(hv_http_t *h);

typedef enum {
    HV_ENC_IDENTITY,
    HV_ENC_GZIP,
    HV_ENC_DEFLATE,
    HV_ENC_BROTLI,
    HV_ENC_ZSTD,
    HV_ENC_UNSUPPORTED
} hv_http_enc_t;

struct hv_http_s {
    /* results: valid from the head callback on */
    int status;
    int64_t content_length;    /* -1 when absent */
    hv_buf_t content_type;     /* raw header value (NUL-terminated when non-empty) */
    hv_buf_t location;
    hv_buf_t retry_after;      /* raw Retry-After value */
    hv_buf_t etag;             /* raw ETag value (validators: an over-long one is dropped) */
    hv_buf_t last_modified;    /* raw Last-Modified value */
    hv_buf_t cache_control;    /* every Cache-Control header, joined with "," */
    int cache_control_cut;     /* Cache-Control was longer than we keep */
    hv_http_enc_t encoding;
    hv_buf_t body;             /* decoded body (HV_HTTP_BODY_KEEP) */
    int complete;
    int keep_alive;
    int truncated;             /* body bytes were dropped (limits->truncate) */
    uint64_t bytes_in;         /* every byte fed, head included: 0 means "nothing came" */
    hv_fault_t fault;          /* the last error's detail: code and argument (detail.h) */
    void *data;                /* owner */

    /* private */
    llhttp_t _parser;
    const hv_http_limits_t *_limits;
    hv_http_head_cb _on_head;
    hv_http_body_t _body_mode;
    uint64_t _head_bytes;
    uint64_t _drained;
    int _err;                  /* error raised inside a callback */
    int _header;               /* which header's value is being collected */
    int _in_trailers;          /* the final head is complete: header callbacks are trailers */
    hv_buf_t _field;
    z_stream _z;
    int _z_init;
    int _z_end;                /* the compressed stream reached its end */
    unsigned char _z_hdr[2];   /* first bytes of a "deflate" body, to tell zlib from raw */
    unsigned _z_hdr_len;
    int _z_members;            /* complete gzip members so far */
    struct BrotliDecoderStateStruct *_br;
    int _br_end;
    struct ZSTD_DCtx_s *_zs;
    int _zs_end;               /* the last zstd frame is complete */
    unsigned _zs_frames;       /* complete zstd frames so far */
    int _z_ignore;             /* junk after the last member: drop the rest */
};

/** Validators of a conditional request; NULL members are not sent. */
typedef struct {
    const char *etag;          /* sent as If-None-Match */
    const char *last_modified; /* sent as If-Modified-Since */
} hv_http_cond_t;

/** Most bytes of a request head: the URL, a User-Agent, two validators and the configured
 * headers of one request fit in it with room to spare (config.h bounds the headers). */
#define HV_HTTP_REQUEST_MAX (64 * 1024)

/** Most bytes of one configured request header, "Name: value". */
#define HV_HTTP_FIELD_MAX 8192

/** A request header field of the configuration, sent as given. An empty value means "not
 * sent": neither the field nor a default field of harvestd's of the same name (Accept,
 * Accept-Encoding), as `-H 'Name:'` does in curl. */
typedef struct {
    const char *name;
    const char *value;
} hv_http_field_t;

/** A request sent to an HTTP proxy (for an http URL), not to the origin. */
typedef struct {
    const char *authorization; /* Proxy-Authorization value ("Basic ..."); NULL: none */
} hv_http_via_t;

/** Build a GET request for `u` into `out`, conditional on `cond` (NULL: none; a validator
 * that is no valid header value is not sent), with the `nfields` configured `fields` after
 * harvestd's own (the caller has already chosen them: one per name). With `via`, the request
 * goes to a proxy: its target is the absolute URL, and it carries the proxy's credentials.
 * 0, HV_ETOOBIG, or UV_EINVAL for a field that hv_http_field_check() refuses or proxy
 * credentials that are no header value (nothing is appended then). */
int hv_http_request(hv_buf_t *out, const hv_url_t *u, const char *user_agent,
                    const hv_http_cond_t *cond, const hv_http_via_t *via,
                    const hv_http_field_t *fields, size_t nfields);

/** A request field for HTTP/2: name (lower case) and value, not NUL-terminated. */
typedef struct {
    const char *name;
    size_t nlen;
    const char *value;
    size_t vlen;
} hv_http_nv_t;

/** The fields of hv_http_request()'s GET for an HTTP/2 stream, pseudo-fields first, into
 * `nv` (`cap` of them, *n set): the same fields, in the same order, with names lower-cased
 * into `store` (values point into the arguments, which must outlive `nv`). 0, HV_ETOOBIG or
 * UV_EINVAL as hv_http_request(). */
int hv_http_request_h2(hv_http_nv_t *nv, size_t cap, size_t *n, char *store, size_t storecap,
                       const hv_url_t *u, const char *user_agent, const hv_http_cond_t *cond,
                       const hv_http_field_t *fields, size_t nfields);

/** Whether `name: value` may be configured as a request header: the name an RFC 9110 token
 * that harvestd does not send itself (Host, the framing and connection fields, the
 * conditionals of re-crawling, User-Agent: see README, "Request headers"), the value without
 * CR, LF, NUL or another control but HTAB. 0, or UV_EINVAL with a message in `err` that names
 * the field and never quotes its value (it may be a secret). */
int hv_http_field_check(const char *name, const char *value, char *err, size_t errcap);

/** Whether the value of field `name` is a secret, shown as *** wherever harvestd shows it:
 * Authorization, Proxy-Authorization, Cookie, and any name with auth, token, key, secret,
 * passw, session or cookie in it. */
int hv_http_field_secret(const char *name);

/** What the response's Cache-Control says about storing it: *no_store is set for no-store
 * (and when the header was too long to read whole: a limit never allows what the server
 * may have refused), *max_age_s to max-age's value, or -1. */
void hv_http_cache_control(const hv_http_t *h, int *no_store, int64_t *max_age_s);

/** Prepare for one response. `limits` must outlive the exchange. */
void hv_http_init(hv_http_t *h, const hv_http_limits_t *limits, hv_http_head_cb on_head,
                  void *data);

/** Release buffers and the decoder (the body too, unless stolen with hv_buf_steal). */
void hv_http_free(hv_http_t *h);

/**
 * Parse `len` more bytes. Returns 0 (need more), 1 (response complete: stop feeding), or an
 * error with h->fault set: HV_EPROTO (malformed, head too large, unsupported encoding),
 * HV_ETOOBIG (body over max_body), HV_EDECODE (corrupt compressed body), HV_ECANCELLED (the
 * head callback said ABORT).
 */
int hv_http_feed(hv_http_t *h, const char *data, size_t len);

/**
 * Room for the next bytes of the connection when they can only be the body of this response
 * (its head is done, the body is kept, with no coding and a Content-Length): the free part of
 * the body buffer, at most the bytes still announced. Bytes read there and then passed to
 * hv_http_feed() at that very place become the body without a copy. 1 with `*base`, `*len`;
 * 0 when the bytes must go elsewhere (anything else, or too little room to be worth a read).
 */
int hv_http_body_space(hv_http_t *h, char **base, size_t *len);

/** The peer closed the stream. Returns 1 if that completed the response (close-delimited),
 * else an error: HV_ECLOSED (h->fault says where it stopped), HV_EDECODE, HV_EPROTO. */
int hv_http_eof(hv_http_t *h);

/*
 * HTTP/2 (h2.h frames the exchange): the response head comes as fields and the body as
 * data, with the same limits, decoding and results as over HTTP/1.1. Each returns 0 (more),
 * 1 (complete: nothing more is wanted, the stream may be reset) or an error as
 * hv_http_feed() does.
 */
/** A field of the final head (no pseudo-field). */
int hv_http_h2_field(hv_http_t *h, const char *name, size_t nlen, const char *value, size_t vlen);
/** The final head is complete with `status`: the head callback runs. */
int hv_http_h2_head(hv_http_t *h, int status);
/** Body bytes. */
int hv_http_h2_data(hv_http_t *h, const char *data, size_t len);
/** The stream ended (END_STREAM): 1, or an error (a coding cut short, no head). */
int hv_http_h2_end(hv_http_t *h);
/** The stream was lost before its end: HV_ECLOSED, h->fault saying where it stopped. */
int hv_http_h2_lost(hv_http_t *h);

/** Retry-After as a delay in ms from `now_unix_ms` (delta-seconds or HTTP-date), or -1 when
 * absent or unparseable. */
int64_t hv_http_retry_after_ms(const hv_http_t *h, int64_t now_unix_ms);

/** Lower-cased media type of the response without parameters ("text/html"), into `out`. */
void hv_http_media_type(const hv_http_t *h, char *out, size_t cap);

#endif
