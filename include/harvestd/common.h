/*
 * common.h: what every harvestd module shares: error codes, allocation wrappers,
 * container_of, clocks, small length-carrying slices and ASCII helpers.
 *
 * Error convention: functions return int, 0 is success and a negative value is an error.
 * System errors are libuv's UV_E* values; harvestd's own errors live in the HV_E* range
 * below, far from libuv's. hv_strerror() and hv_err_name() turn either into text.
 */
#ifndef HARVESTD_COMMON_H
#define HARVESTD_COMMON_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

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
    HV_ECLOSED,         /* peer closed before a complete response */
    HV_ECANCELLED,      /* work abandoned by us (shutdown) */
    HV_ENESTING,        /* document nesting deeper than we agree to parse */
    HV_ETLS,            /* TLS handshake or record failure */
    HV_ECERT,           /* the peer's certificate did not verify */
    HV_EBLOCKED,        /* the address guard refused every address of the host */
    HV_EREFUSED,        /* a server refused a command a connection needs (Redis's AUTH, SELECT) */
    HV_ENOTREADY,       /* a server cannot serve now but will (Redis loading its data...) */
    HV_EPROXY,          /* a proxy refused or broke the tunnel (detail: hv_conn_error()) */
    HV_ERR_LAST
};

/** Text for a libuv or harvestd error code; never NULL. */
const char *hv_strerror(int err);
/** Stable upper-case name (ECONNREFUSED, HV_ETOOBIG); never NULL. */
const char *hv_err_name(int err);
/** The argument of the detail families that name an error (connect_error_<error>...): its
 *  name in lower case without its first `skip` characters (ECONNABORTED with 1 is
 *  "connaborted", EAI_FAIL with 4 is "fail"), into `out`; returns `out`. */
const char *hv_err_name_arg(char *out, size_t cap, int err, size_t skip);

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

/*
 * ASCII classification and case folding. <ctype.h> follows the locale, and the bytes these
 * look at (markup, headers, URLs, robots.txt, input lines) must mean the same in every
 * locale; bytes 0x80 and above are never letters, digits or space here, and fold to
 * themselves.
 */

/** ASCII whitespace as HTML, CSS and the Encoding standard define it: space, \t, \n, \f,
 *  \r (no vertical tab). */
static inline int hv_ascii_is_space(unsigned char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\f' || c == '\r';
}

/** What isspace() accepts in the C locale: hv_ascii_is_space() plus the vertical tab. */
static inline int hv_ascii_is_ctype_space(unsigned char c)
{
    return hv_ascii_is_space(c) || c == '\v';
}

/** Space or horizontal tab: HTTP's optional whitespace, robots.txt's blanks. */
static inline int hv_ascii_is_blank(unsigned char c)
{
    return c == ' ' || c == '\t';
}

static inline int hv_ascii_is_alpha(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

static inline int hv_ascii_is_digit(unsigned char c)
{
    return c >= '0' && c <= '9';
}

static inline int hv_ascii_is_hex(unsigned char c)
{
    return hv_ascii_is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

static inline unsigned char hv_ascii_lower(unsigned char c)
{
    return (c >= 'A' && c <= 'Z') ? (unsigned char)(c + ('a' - 'A')) : c;
}

/** The value of hex digit `c`, or -1 if it is none. */
static inline int hv_ascii_hex_value(unsigned char c)
{
    if (hv_ascii_is_digit(c))
        return c - '0';
    return hv_ascii_is_hex(c) ? hv_ascii_lower(c) - 'a' + 10 : -1;
}

/** 1 if [a, a+alen) and [b, b+blen) hold the same bytes but for ASCII case. NUL bytes are
 *  ordinary bytes (unlike strncasecmp(), which stops at one). */
static inline int hv_ascii_case_eq(const char *a, size_t alen, const char *b, size_t blen)
{
    if (alen != blen)
        return 0;
    for (size_t i = 0; i < alen; i++)
        if (hv_ascii_lower((unsigned char)a[i]) != hv_ascii_lower((unsigned char)b[i]))
            return 0;
    return 1;
}

/** hv_ascii_case_eq() with the NUL-terminated `lit` ("content-type"). */
static inline int hv_ascii_case_is(const char *s, size_t len, const char *lit)
{
    return hv_ascii_case_eq(s, len, lit, strlen(lit));
}

/** 1 if [s, s+len) begins with the NUL-terminated `prefix`, but for ASCII case. */
static inline int hv_ascii_case_prefix(const char *s, size_t len, const char *prefix)
{
    size_t n = strlen(prefix);
    return len >= n && hv_ascii_case_eq(s, n, prefix, n);
}

/** Wall clock, milliseconds since the Unix epoch. */
int64_t hv_now_unix_ms(void);
/** Monotonic clock in milliseconds (independent of any loop). */
uint64_t hv_mono_ms(void);

/**
 * Format a size limit for machine-readable error texts: 2097152 -> "2_mib", 65536 -> "64_kib",
 * 1000 -> "1000_bytes". Writes at most `cap` bytes including the NUL.
 */
void hv_format_size(char *out, size_t cap, uint64_t bytes);

/** Format a message into `err` (`cap` bytes, always terminated when cap > 0) and return
 *  `code`: the one way a function reports "error, and what went wrong" to its caller. */
__attribute__((format(printf, 4, 5))) int hv_errf(char *err, size_t cap, int code,
                                                  const char *fmt, ...);

/*
 * Blocking file helpers. They block the calling thread: the daemon calls them only from
 * threadpool work (writer, bhost) or from commands that own no loop. EINTR is retried.
 */

/** Write all of `len` bytes: 0, or the UV_E* error of the write that failed (a write that
 *  takes nothing sets no errno, and is UV_EIO). */
int hv_write_all(int fd, const void *data, size_t len);

/** fsync the directory `dir`, so that names created, renamed or removed in it are durable:
 *  0 or a UV_E* error (opening it, or the fsync). */
int hv_fsync_dir(const char *dir);

/** Whether `path` can be opened for reading as a file (not a directory): 0, or the error with
 *  "cannot read WHAT PATH: errno text" in `err`. For files read by libraries whose own words
 *  would mislead (a directory reads as an empty config; mbedtls says "PK - Read/write of file
 *  failed"). */
int hv_check_readable(const char *what, const char *path, char *err, size_t errcap);

/** hv_fsync_dir() of the directory that holds `path` ("." for a bare name). */
int hv_fsync_parent(const char *path);

/** Rename `from` into `dir` as `name`, or the first free of `name.1` ... `name.9999`; never
 *  replaces a file (RENAME_NOREPLACE). 0 with the name used in *final (malloc'd; NULL: not
 *  wanted), or a UV_E* error (UV_EEXIST when every name is taken). */
int hv_rename_unique(const char *from, const char *dir, const char *name, char **final);

#endif
