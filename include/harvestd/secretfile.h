/*
 * secretfile.h: reading a file that holds secrets (redis_password_file, a password;
 * proxy_credentials_file, proxies' users and passwords) with the checks such a file deserves,
 * apart from what its lines mean, so that each kind of file is checked the same way.
 *
 * The file must be a regular file that only its owner may read: one its group or others may
 * read is refused, saying so with its mode (a secret any local user could read is no secret).
 * The checks look at the file opened (fstat), not at a path looked at before, and the read is
 * bounded by the caller's buffer. What the lines mean (one line, a NUL byte, entries) is the
 * caller's to judge, and so is wiping the buffer once it is done with it.
 */
#ifndef HARVESTD_SECRETFILE_H
#define HARVESTD_SECRETFILE_H

#include <stddef.h>

/**
 * Read the first `cap` bytes of the file at `path` into `buf` (all of it when shorter), their
 * count into `*len`: a caller that asks for one byte more than it takes tells a longer file by
 * `*len == cap`. `what` names the kind of file in messages ("password file"). Refused, with a
 * message in `err`:
 *   "cannot read the WHAT PATH: no such file or directory"  (open, fstat or read failed)
 *   "the WHAT PATH is not a regular file"
 *   "the WHAT PATH is readable by its group and others (mode 0644): let only its owner read
 *    it (chmod 600)"  (or "by its group", "by others")
 * 0, or -1 with `buf` wiped. Blocking: for start-up and configuration checks, not the loop.
 */
int hv_secret_file_read(const char *path, const char *what, char *buf, size_t cap, size_t *len,
                        char *err, size_t errcap);

#endif
