/*
 * common.h: what every harvestd module shares: error codes, allocation wrappers,
 * container_of, clocks and small length-carrying slices.
 *
 * Error convention: functions return int, 0 is success and a negative value is an error.
 * System errors are libuv's UV_E* values; harvestd's own errors live in the HV_E* range
 * below, far from libuv's. hv_strerror() and hv_err_name() turn either into text.
 */
#ifndef HARVESTD_COMMON_H
#define HARVESTD_COMMON_H

#include <stddef.h>
#include <stdint.h>

#ifndef HV_VERSION
#define HV_VERSION "0.0.0"
#endif

enum {
    HV_ERR_BASE = -30000,
    HV_ETOOBIG,         /* a bounded buffer or limit was exceeded */
    HV_EPROTO,          /* peer violated the protocol (llhttp error, bad header) */
    HV_EDECODE,         /* content-encoding stream is corrupt or truncated */
    HV_EURL,            /* malformed URL */
    HV_ESCHEME,         /* URL scheme we cannot fetch */
    HV_EREDIRECTS,      /* redirect limit reached */
    HV_ECLOSED,         /* peer closed before a complete response */
    HV_ECANCELLED,      /* work abandoned by us (shutdown) */
    HV_ENESTING,        /* document nesting deeper than we agree to parse */
    HV_ETLS,            /* TLS handshake or record failure */
    HV_ECERT,           /* the peer's certificate did not verify */
    HV_EINTERNAL,       /* broken invariant: a bug of ours */
    HV_ERR_LAST
};

/** Text for a libuv or harvestd error code; never NULL. */
const char *hv_strerror(int err);
/** Stable upper-case name (ECONNREFUSED, HV_ETOOBIG); never NULL. */
const char *hv_err_name(int err);

#define hv_container_of(ptr, type, member) \
    ((type *)((char *)(ptr) - offsetof(type, member)))

#define HV_ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#define HV_MIN(a, b) ((a) < (b) ? (a) : (b))
#define HV_MAX(a, b) ((a) > (b) ? (a) : (b))

/* Allocation for fixed-size objects: abort with a message on OOM (there is no sane recovery
 * half-way through building a struct). Anything sized by a peer or a file goes through a
 * bounded buffer that can fail instead. */
void *hv_xmalloc(size_t size);
void *hv_xcalloc(size_t n, size_t size);
void *hv_xrealloc(void *p, size_t size);
char *hv_xstrdup(const char *s);
char *hv_xstrndup(const char *s, size_t n);

/** A borrowed, length-carrying view of bytes. */
typedef struct {
    const char *ptr;
    size_t len;
} hv_slice_t;

/** Wall clock, milliseconds since the Unix epoch. */
int64_t hv_now_unix_ms(void);
/** Monotonic clock in milliseconds (independent of any loop). */
uint64_t hv_mono_ms(void);

/**
 * Format a size limit for machine-readable error texts: 2097152 -> "2_mib", 65536 -> "64_kib",
 * 1000 -> "1000_bytes". Writes at most `cap` bytes including the NUL.
 */
void hv_format_size(char *out, size_t cap, uint64_t bytes);

#endif
