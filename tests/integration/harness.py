"""The harness that runs harvestd for the integration tests.

Environment (set by `make integration`):
  HARVESTD_BIN        absolute path of the harvestd binary (required; every test that runs it is
                      skipped when it is missing)
  HARVESTD_TOOLS      directory of helper binaries built from tests/tools (optional: the tests
                      that run one look beside HARVESTD_BIN too, and are skipped without it)
  HARVESTD_SANITIZER  non-empty when the binary is built with sanitizers (also detected from the
                      binary's symbols): memory bounds are not asserted then, and the harness
                      waits longer

Every run of the binary goes through Harvestd.start()/run(): it writes the URL file into the
test's tmp_path, runs the binary with its output in a fresh file (through a small launcher that
measures its peak RSS, see LAUNCHER_SOURCE), parses the JSONL output (every line must be one JSON
object) and the summary line, and fails the test if stderr holds a sanitizer report or says a
handle was left open at exit (check_sanitizer; daemon runs and `command` are checked too). The
program's command line and stderr are printed, so pytest shows them when the test fails.

The spool daemon (`harvestd -c CONFIG`) has its own helpers at the end of this file: configs
written into tmp_path (DAEMON_DEFAULTS), Daemon (a running daemon: poll, signal, kill, parsed log
events) and Spool (a spool directory: drop files by rename, listings, outputs, summaries).
"""

import atexit
import calendar
import contextlib
import json
import os
import re
import shutil
import signal
import socket
import struct
import subprocess
import tempfile
import time
import urllib.parse
from typing import NamedTuple, Optional

import pytest

HARVESTD_BIN = os.environ.get("HARVESTD_BIN", "")
HARVESTD_TOOLS = os.environ.get("HARVESTD_TOOLS", "")


def _detect_sanitizer(path):
    """The sanitizers a binary was built with, from its symbol names ("" if none or unreadable)."""
    found = []
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError:
        return ""
    for symbol, name in ((b"__asan_init", "address"), (b"__ubsan_handle_", "undefined"),
                         (b"__tsan_init", "thread")):
        if symbol in data:
            found.append(name)
    return ",".join(found)


# Set by `make asan`; also detected from the binary, so a sanitizer build is never held to the
# memory bounds of a plain one.
SANITIZER = os.environ.get("HARVESTD_SANITIZER", "").strip() or _detect_sanitizer(HARVESTD_BIN)

# How much slower a sanitizer build may be; multiplies the harness's own waits.
SLOWDOWN = 3 if SANITIZER else 1

KEY_ORDER = ["requested_url", "url", "status", "http_status", "http_version", "title", "fields", "content_type",
             "charset", "bytes", "redirects", "attempts", "elapsed_ms", "fetched_at", "stage",
             "error_type", "error"]

SANITIZER_MARKERS = ["ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "runtime error:",
                     "ThreadSanitizer", "SUMMARY: UndefinedBehaviorSanitizer"]

# Short limits so a misbehaving origin costs seconds, not the program's defaults. A test that
# passes one of these options itself keeps its own value.
FAST_DEFAULTS = [("--connect-timeout", "2s"), ("--read-timeout", "3s"), ("--total-timeout", "10s")]

# Failures are retried by default (with seconds of backoff); tests that are not about retries
# want one attempt per URL. A test that passes --retries itself keeps its value. Likewise
# --allow-addresses, below.
# The test servers all listen on loopback, which the address guard refuses by default: every
# run allows loopback explicitly. Tests of the guard pass --allow-addresses themselves ("" for
# the default, no exception), daemons allow_addresses=None.
LOOPBACK_RANGES = "127.0.0.0/8, ::1/128"
ALWAYS_DEFAULTS = [("--retries", "0"), ("--allow-addresses", LOOPBACK_RANGES)]

SUMMARY_PREFIX = "harvestd: summary "

# RFC 3339 UTC with milliseconds, e.g. "2026-11-29T12:00:00.123Z".
FETCHED_AT_RE = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$")

MIB = 1024 * 1024


def parse_summary(stderr):
    """The last "harvestd: summary k=v ..." line of `stderr` as a dict (numbers converted), or
    None if there is none."""
    for line in reversed(stderr.splitlines()):
        if not line.startswith(SUMMARY_PREFIX):
            continue
        out = {}
        for tok in line[len(SUMMARY_PREFIX):].split():
            key, sep, value = tok.partition("=")
            if not sep:
                continue
            try:
                out[key] = int(value)
            except ValueError:
                try:
                    out[key] = float(value)
                except ValueError:
                    out[key] = value
        return out
    return None


def parse_records(data, complete=True):
    """Parse JSONL bytes. Every line must be valid UTF-8 holding one JSON object with a string
    requested_url and a status of "ok" or "failed". With complete=True the data must end with a
    newline (a finished run never leaves half a line)."""
    if not data:
        return []
    if complete:
        assert data.endswith(b"\n"), "output does not end with a newline: %r" % data[-200:]
    records = []
    for n, line in enumerate(data.split(b"\n")[:-1] if data.endswith(b"\n") else data.split(b"\n"), 1):
        try:
            text = line.decode("utf-8")
        except UnicodeDecodeError as e:
            pytest.fail("output line %d is not valid UTF-8 (%s): %r" % (n, e, line[:300]))
        try:
            rec = json.loads(text)
        except ValueError as e:
            pytest.fail("output line %d is not valid JSON (%s): %r" % (n, e, text[:300]))
        assert isinstance(rec, dict), "output line %d is not a JSON object: %r" % (n, text[:300])
        assert isinstance(rec.get("requested_url"), str), "line %d lacks requested_url: %r" % (n, rec)
        assert rec.get("status") in ("ok", "failed"), "line %d has a bad status: %r" % (n, rec)
        records.append(rec)
    return records


def check_sanitizer(stderr):
    """Fail the test if harvestd's stderr says it found a bug of its own while running: a
    sanitizer report, or a handle still open at exit (see check_leftover_handles). Every run
    of the binary is checked with this, whatever the test is about."""
    for marker in SANITIZER_MARKERS:
        if marker in stderr:
            at = stderr.index(marker)
            pytest.fail("sanitizer report in harvestd's stderr:\n" + stderr[max(0, at - 2000):at + 8000])
    check_leftover_handles(stderr)


def check_leftover_handles(stderr):
    """Fail the test if harvestd logged "event=leftover_handle type=..." (src/loop.c): at exit
    a handle was still open, which harvestd then closed itself so that its loop could close.
    Every handle has an owner that must close it on the way out, so this is a bug even when the
    run's output is right. The line is a warning, printed at every log level the tests use
    (notice by default, info for the daemon; never above warning)."""
    lines = stderr.splitlines()
    found = [i for i, line in enumerate(lines) if "leftover_handle" in line
             and (parse_log_line(line) or {}).get("event") == "leftover_handle"]
    if found:
        types = [parse_log_line(lines[i]).get("type", "?") for i in found]
        excerpt = "\n".join(lines[max(0, found[0] - 40):found[-1] + 10])
        pytest.fail("harvestd left %d handle%s open at exit (%s):\n%s"
                    % (len(found), "" if len(found) == 1 else "s", ", ".join(types), excerpt))


def assert_key_order(rec):
    keys = list(rec)
    unknown = [k for k in keys if k not in KEY_ORDER]
    assert not unknown, "unknown keys %r in %r" % (unknown, rec)
    assert keys == sorted(keys, key=KEY_ORDER.index), "keys out of order: %r" % keys


def by_url(records):
    """Map requested_url -> record; fails on duplicates."""
    out = {}
    for r in records:
        assert r["requested_url"] not in out, "duplicate record for %r" % r["requested_url"]
        out[r["requested_url"]] = r
    return out


def assert_ok(rec, title=None):
    assert rec["status"] == "ok", "expected ok, got %r" % rec
    for k in ("stage", "error_type", "error"):
        assert k not in rec, "ok record carries %s: %r" % (k, rec)
    if title is not None:
        assert rec.get("title") == title, rec


def assert_failed(rec, stage, error_type, error=None):
    assert rec["status"] == "failed", "expected a failure, got %r" % rec
    assert rec.get("stage") == stage, rec
    assert rec.get("error_type") == error_type, rec
    assert isinstance(rec.get("error"), str) and rec["error"], rec
    assert "title" not in rec, rec
    if error is not None:
        assert rec["error"] == error, rec


class Run(NamedTuple):
    rc: int
    records: list
    stderr: str
    summary: Optional[dict]
    maxrss_kib: int
    stdout: bytes
    elapsed: float
    out_path: str


# Peak RSS: a child's ru_maxrss includes the RSS of the process it was forked from, up to its
# exec() (Linux keeps the larger high-water mark across exec, and a vfork child reports its
# parent's). A child of the pytest process would report pytest's size. So harvestd is started
# by a tiny launcher, compiled here once, that forks it from its own small image, reaps it with
# wait4() and writes its ru_maxrss to a file. The launcher forwards SIGINT/SIGTERM/SIGHUP/
# SIGUSR1 to harvestd and exits with harvestd's status. Without a C compiler the harness runs
# harvestd directly and samples VmHWM from /proc while it runs.
LAUNCHER_SOURCE = r"""
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

static volatile pid_t child;
static const int forwarded[] = {SIGINT, SIGTERM, SIGHUP, SIGUSR1};

static void on_signal(int sig)
{
    if (child > 0)
        kill(child, sig);
}

int main(int argc, char **argv)
{
    sigset_t set, old;
    struct sigaction sa = {0};
    struct rusage ru;
    int status;
    size_t i;

    if (argc < 3)
        return 127;
    sigemptyset(&set);
    for (i = 0; i < sizeof(forwarded) / sizeof(forwarded[0]); i++)
        sigaddset(&set, forwarded[i]);
    sigprocmask(SIG_BLOCK, &set, &old);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    for (i = 0; i < sizeof(forwarded) / sizeof(forwarded[0]); i++)
        sigaction(forwarded[i], &sa, NULL);
    child = fork();
    if (child == 0) {
        for (i = 0; i < sizeof(forwarded) / sizeof(forwarded[0]); i++)
            signal(forwarded[i], SIG_DFL);
        sigprocmask(SIG_SETMASK, &old, NULL);
        execv(argv[2], argv + 2);
        perror("launcher: execv");
        _exit(127);
    }
    sigprocmask(SIG_SETMASK, &old, NULL);
    if (child < 0)
        return 126;
    while (wait4(child, &status, 0, &ru) < 0)
        if (errno != EINTR)
            return 126;
    FILE *f = fopen(argv[1], "w");
    if (f) {
        fprintf(f, "%ld\n", ru.ru_maxrss);
        fclose(f);
    }
    if (WIFSIGNALED(status)) {
        signal(WTERMSIG(status), SIG_DFL);
        raise(WTERMSIG(status));
        return 128 + WTERMSIG(status);
    }
    return WEXITSTATUS(status);
}
"""

_launcher_path = None


def launcher():
    """Path of the compiled launcher, or "" when there is no C compiler."""
    global _launcher_path
    if _launcher_path is None:
        _launcher_path = ""
        tmp = tempfile.mkdtemp(prefix="harvestd-launcher-")
        atexit.register(shutil.rmtree, tmp, True)
        src = os.path.join(tmp, "launcher.c")
        exe = os.path.join(tmp, "launcher")
        with open(src, "w") as f:
            f.write(LAUNCHER_SOURCE)
        cc = os.environ.get("CC") or "cc"
        try:
            done = subprocess.run([cc, "-O2", "-o", exe, src], stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, timeout=60)
            if done.returncode == 0:
                _launcher_path = exe
            else:
                print("harness: cannot build the launcher:\n" + done.stdout.decode(errors="replace"))
        except OSError as e:
            print("harness: cannot build the launcher: %s" % e)
    return _launcher_path


def vm_kib(pid, field="VmRSS"):
    """A size line of /proc/PID/status (VmRSS: resident now, VmHWM: its peak) in KiB; 0 when
    the process is gone."""
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return 0


def _vm_hwm_kib(pid):
    return vm_kib(pid, "VmHWM")


class Proc:
    """A running harvestd. wait() reaps it and returns a Run."""

    def __init__(self, harness, argv, out_path, stdout_path, stderr_path):
        self.harness = harness
        self.argv = argv
        self.out_path = out_path
        self.stdout_path = stdout_path
        self.stderr_path = stderr_path
        self.rss_path = stderr_path + ".maxrss"
        self.started = time.monotonic()
        self._stdout = open(stdout_path, "wb")
        self._stderr = open(stderr_path, "wb")
        wrapper = launcher()
        full = ([wrapper, self.rss_path] + argv) if wrapper else argv
        self.popen = subprocess.Popen(full, stdin=subprocess.DEVNULL, stdout=self._stdout,
                                      stderr=self._stderr, env=harness.env, start_new_session=True)
        self.pid = self.popen.pid
        self.sampled_hwm = 0
        self.result = None

    def send_signal(self, sig):
        """Signal harvestd (through the launcher, which forwards it)."""
        if self.popen.returncode is None:
            os.kill(self.pid, sig)

    def output_bytes(self):
        path = self.stdout_path if self.out_path == "-" else self.out_path
        try:
            with open(path, "rb") as f:
                return f.read()
        except FileNotFoundError:
            return b""

    def complete_lines(self):
        """Output lines written so far (only whole lines)."""
        data = self.output_bytes()
        return data[:data.rfind(b"\n") + 1].split(b"\n")[:-1] if b"\n" in data else []

    def poll_until(self, predicate, timeout, what):
        """Poll `predicate()` every 20 ms until it is true; fail after `timeout` seconds, or if
        the program exits first."""
        deadline = time.monotonic() + timeout * SLOWDOWN
        while not predicate():
            if self.popen.poll() is not None:
                pytest.fail("harvestd exited (status %s) while waiting for %s\n%s"
                            % (self.popen.returncode, what, self.stderr_text()[-5000:]))
            if time.monotonic() > deadline:
                pytest.fail("timed out after %.0fs waiting for %s" % (timeout, what))
            time.sleep(0.02)

    def stderr_text(self):
        with open(self.stderr_path, "rb") as f:
            return f.read().decode("utf-8", "replace")

    def _reap(self, timeout):
        deadline = time.monotonic() + timeout * SLOWDOWN
        while True:
            pid, status, rusage = os.wait4(self.pid, os.WNOHANG)
            if pid:
                self.popen.returncode = os.waitstatus_to_exitcode(status)
                return rusage
            if not launcher():
                self.sampled_hwm = max(self.sampled_hwm, _vm_hwm_kib(self.pid))
            if time.monotonic() > deadline:
                return None
            time.sleep(0.005)

    def wait(self, timeout=60, parse=True):
        if self.result is not None:
            return self.result
        rusage = self._reap(timeout)
        if rusage is None:
            self.kill()
            stderr = self.stderr_text()
            self.harness.dump(self.argv, stderr)
            pytest.fail("harvestd did not exit within %ss (killed)\n%s" % (timeout, stderr[-5000:]))
        elapsed = time.monotonic() - self.started
        rc = self.popen.returncode
        self._close_files()
        stderr = self.stderr_text()
        self.harness.dump(self.argv, stderr)
        check_sanitizer(stderr)
        assert rc >= 0, "harvestd killed by signal %d\n%s" % (-rc, stderr[-5000:])
        maxrss = self.sampled_hwm
        if launcher():
            with open(self.rss_path) as f:
                maxrss = int(f.read())
        print("harvestd exit status %d, peak RSS %d KiB, %.2fs" % (rc, maxrss, elapsed))
        with open(self.stdout_path, "rb") as f:
            stdout = f.read()
        records = []
        if parse:
            records = parse_records(self.output_bytes(), complete=True)
        summary = parse_summary(stderr)
        if parse and rc == 0:
            assert summary is not None, "no summary line on stderr"
            assert summary.get("records") == len(records), \
                "summary records=%r but the output holds %d records" % (summary.get("records"), len(records))
        self.result = Run(rc, records, stderr, summary, maxrss, stdout, elapsed, self.out_path)
        return self.result

    def kill(self):
        """Kill the launcher and harvestd (their own process group) and reap the launcher."""
        if self.popen.returncode is None:
            try:
                os.killpg(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            try:
                os.wait4(self.pid, 0)
            except ChildProcessError:
                pass
            self.popen.returncode = -9
        self._close_files()

    def _close_files(self):
        for f in (self._stdout, self._stderr):
            if not f.closed:
                f.close()


class Harvestd:
    """Runs the binary for one test; files live in the test's tmp_path."""

    def __init__(self, tmp_path):
        self.tmp_path = tmp_path
        self.n = 0
        self.procs = []
        self.env = dict(os.environ)
        self.env.setdefault("UBSAN_OPTIONS", "print_stacktrace=1")
        self.env.setdefault("ASAN_OPTIONS", "detect_leaks=1")

    def write_urls(self, urls, name=None):
        """Write the input file. `urls` is bytes (written as is) or a list of str/bytes lines,
        each ended with "\\n"."""
        self.n += 1
        path = self.tmp_path / (name or "urls-%d.txt" % self.n)
        if isinstance(urls, (bytes, bytearray)):
            data = bytes(urls)
        else:
            data = b"".join((u if isinstance(u, bytes) else u.encode("utf-8")) + b"\n" for u in urls)
        path.write_bytes(data)
        return str(path)

    def start(self, urls, *args, out=None, fast=True, input_path=None):
        if input_path is None:
            input_path = self.write_urls(urls)
        self.n += 1
        if out is None:
            out = str(self.tmp_path / ("out-%d.jsonl" % self.n))
        argv = [HARVESTD_BIN, "--once", input_path, "-o", out]
        if fast:
            for opt, value in FAST_DEFAULTS:
                if opt not in args:
                    argv += [opt, value]
        for opt, value in ALWAYS_DEFAULTS:
            if opt not in args and not (opt == "--allow-addresses" and
                                        "--allow-private-addresses" in args):
                argv += [opt, value]
        argv += [str(a) for a in args]
        proc = Proc(self, argv, out, str(self.tmp_path / ("stdout-%d" % self.n)),
                    str(self.tmp_path / ("stderr-%d" % self.n)))
        self.procs.append(proc)
        return proc

    def run(self, urls, *args, timeout=60, out=None, fast=True, parse=True, input_path=None):
        proc = self.start(urls, *args, out=out, fast=fast, input_path=input_path)
        return proc.wait(timeout=timeout, parse=parse)

    # ---- the spool daemon (Spool and Daemon are defined below)

    def daemon_config(self, spool_dir, directives=None, name=None):
        """Write a daemon config for `spool_dir`: DAEMON_DEFAULTS updated with `directives`
        (None leaves a directive out). Returns its path."""
        values = dict(DAEMON_DEFAULTS)
        values.update(directives or {})
        self.n += 1
        path = self.tmp_path / (name or "daemon-%d.conf" % self.n)
        return write_config(path, [("spool_dir", str(spool_dir))] + list(values.items()))

    def start_daemon(self, config, *args, env=None, user=None, wrapper=()):
        """Start `harvestd -c config args...`. `env` adds variables to the environment (the
        systemd ones are removed first); it may be a function of the Daemon (before exec) for
        values that depend on its stderr. `user` runs it as that uid (and gid). `wrapper` is
        put before the command line (e.g. a shell that sets a variable, then execs it)."""
        self.n += 1
        argv = list(wrapper) + [HARVESTD_BIN, "-c", str(config)] + [str(a) for a in args]
        base = dict(self.env)
        for key in ("NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID", "JOURNAL_STREAM",
                    "LISTEN_FDS", "LISTEN_PID"):
            base.pop(key, None)
        if callable(env):
            extra = env
            full_env = lambda d: {**base, **extra(d)}  # noqa: E731
        else:
            full_env = {**base, **(env or {})}
        d = Daemon(argv, str(self.tmp_path / ("daemon-stdout-%d" % self.n)),
                   str(self.tmp_path / ("daemon-stderr-%d" % self.n)), full_env, user)
        self.procs.append(d)
        return d

    def command(self, *args, timeout=20, env=None):
        """Run harvestd with `args` to completion (no input, e.g. --check-config): returns a
        CompletedProcess with text stdout and stderr."""
        argv = [HARVESTD_BIN] + [str(a) for a in args]
        full_env = {**self.env, **(env or {})}
        done = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, env=full_env, timeout=timeout * SLOWDOWN)
        done.stdout = done.stdout.decode("utf-8", "replace")
        done.stderr = done.stderr.decode("utf-8", "replace")
        print("$ " + " ".join(argv) + "\n-> %d\nstdout: %s\nstderr: %s" % (done.returncode, done.stdout, done.stderr))
        check_sanitizer(done.stderr)
        return done

    @staticmethod
    def dump(argv, stderr):
        # Captured by pytest and shown only when the test fails.
        print("$ " + " ".join(argv))
        print("---- harvestd stderr (%d bytes, last 20000 shown) ----" % len(stderr))
        print(stderr[-20000:])
        print("---- end of stderr ----")

    def cleanup(self):
        for p in self.procs:
            p.kill()


def tool_path(name):
    """build/tools/<name> (HARVESTD_TOOLS, else beside HARVESTD_BIN); skipped when it was not
    built (`make integration` builds every tests/tools/*.c)."""
    dirs = ([HARVESTD_TOOLS] if HARVESTD_TOOLS else []) + [os.path.join(os.path.dirname(HARVESTD_BIN), "tools")]
    for d in dirs:
        path = os.path.join(d, name)
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    if HARVESTD_TOOLS:
        pytest.fail("%s is not in HARVESTD_TOOLS=%s: `make integration` builds it" % (name, HARVESTD_TOOLS))
    pytest.skip("%s not built (HARVESTD_TOOLS is not set): run the suite with `make integration`" % name)


def parse_fetched_at(text):
    """Seconds since the epoch of an RFC 3339 "YYYY-MM-DDTHH:MM:SS.mmmZ" string."""
    assert FETCHED_AT_RE.match(text), "fetched_at %r is not RFC 3339 UTC with milliseconds" % text
    base = time.strptime(text[:19], "%Y-%m-%dT%H:%M:%S")
    return calendar.timegm(base) + int(text[20:23]) / 1000.0


def check_single_ok_record(rec, url, title, size, before, after):
    """The one ok record of a run over `url` (a /page of `size` bytes titled `title`) that ran
    between the times `before` and `after`: every field present and consistent."""
    assert_ok(rec, title)
    assert_key_order(rec)
    for key in ("requested_url", "url", "status", "http_status", "title", "content_type", "bytes",
                "elapsed_ms", "fetched_at"):
        assert key in rec, "ok record lacks %s: %r" % (key, rec)
    assert rec["requested_url"] == url
    assert rec["url"] == url
    assert rec["http_status"] == 200
    assert rec["content_type"].split(";")[0].strip().lower() == "text/html"
    assert rec["bytes"] == size
    assert rec.get("redirects", 0) == 0
    assert isinstance(rec["elapsed_ms"], int) and 0 <= rec["elapsed_ms"] <= (after - before) * 1000 + 50
    fetched = parse_fetched_at(rec["fetched_at"])
    assert before - 1 <= fetched <= after + 1, (rec["fetched_at"], before, after)


def count_by(records, key):
    out = {}
    for r in records:
        out[r.get(key)] = out.get(r.get(key), 0) + 1
    return out


# ---------------------------------------------------------------------------- the spool daemon
#
# `harvestd -c CONFIG` runs in the foreground until a signal. Daemon starts it directly (no
# launcher: its pid is harvestd's, so signals, SIGKILL and WATCHDOG_PID reach the daemon itself)
# in a session of its own, with stdout and stderr in files of the test's tmp_path. Spool is the
# test's view of a spool directory: dropping files the way users must (written elsewhere,
# renamed in), listings, outputs and summaries.

# Short limits and quick discovery so a daemon test costs seconds. A test passes its own value
# (or None to leave a directive out of the file).
DAEMON_DEFAULTS = {
    "rescan_interval": "500ms",
    "drain_timeout": "2s",
    "connect_timeout": "2s",
    "read_timeout": "3s",
    "total_timeout": "10s",
    "flush_ms": "50ms",
    "log_level": "info",
    "allow_addresses": LOOPBACK_RANGES,
}

SUMMARY_KEYS = {"batch", "records", "ok", "failed", "resumed", "error_types", "http_statuses",
                "body_bytes_total", "body_bytes_mean", "started_at", "finished_at", "elapsed_s",
                "pages_per_s", "ok_ratio", "ok_body_bytes_mean", "ok_body_bytes_median",
                "requests", "requests_per_s", "top_failing_hosts", "blocked_hosts"}

# The summaries' median of ok page sizes is estimated from buckets an eighth of a power of two
# wide (src/health.h): within this fraction of the true median.
MEDIAN_ERROR = 0.125


def host_key(url):
    """"scheme://host:port" of a normalised http(s) URL (as records give them), the port always
    written; None for anything else."""
    split = urllib.parse.urlsplit(url)
    if split.scheme not in ("http", "https") or not split.netloc:
        return None
    netloc = split.netloc.rpartition("@")[2]
    if netloc.startswith("["):
        host, _, rest = netloc.partition("]")
        host += "]"
        port = rest[1:] if rest.startswith(":") else ""
    else:
        host, _, port = netloc.partition(":")
    return "%s://%s:%s" % (split.scheme, host, port or (443 if split.scheme == "https" else 80))


def ok_page_sizes(records):
    """The sizes the health figures describe: ok pages downloaded (not 304s or from the store)."""
    return [r["bytes"] for r in records if r["status"] == "ok" and "bytes" in r
            and not r.get("not_modified") and not r.get("from_cache")]


def median(values):
    v = sorted(values)
    n = len(v)
    return v[n // 2] if n % 2 else (v[n // 2 - 1] + v[n // 2]) / 2


def check_median(estimate, sizes):
    """`estimate` is the median of `sizes` within the summaries' bound (exact when all agree)."""
    want = median(sizes)
    if min(sizes) == max(sizes) or want < 16:
        assert abs(estimate - want) <= 0.5, (estimate, want, sizes)
    else:
        assert abs(estimate - want) < want * MEDIAN_ERROR + 0.5, (estimate, want, sizes)


def top_failing_hosts(records, k=5):
    """[(host, failed, [error types tied for most common])] of the failed `records`, most
    failures first, ties by host: what the summaries list. None when some failure's host cannot
    be told from its record here (a failure with a URL but no `url` field)."""
    by_host = {}
    for r in records:
        if r["status"] != "failed":
            continue
        if "url" in r:
            key = host_key(r["url"])
        elif r.get("error_type") in ("InvalidUrl", "UnsupportedScheme"):
            continue
        else:
            return None
        if key is not None:
            by_host.setdefault(key, []).append(r["error_type"])
    if len(by_host) > 64:
        return None  # counts may be upper bounds past the table's 64 entries
    out = []
    for host, types in by_host.items():
        counts = count_by([{"t": t} for t in types], "t")
        most = max(counts.values())
        out.append((host, len(types), sorted(t for t, n in counts.items() if n == most)))
    out.sort(key=lambda e: (-e[1], e[0]))
    return out[:k]


def check_top_failing_hosts(listed, records):
    """The summary's top_failing_hosts (a list of {host, failed, error_type}) against the
    records."""
    assert isinstance(listed, list) and len(listed) <= 5, listed
    for e in listed:
        assert set(e) == {"host", "failed", "error_type"}, e
        assert e["failed"] >= 1 and e["error_type"], e
    assert [e["failed"] for e in listed] == sorted((e["failed"] for e in listed), reverse=True), listed
    want = top_failing_hosts(records)
    if want is None:
        return
    assert [(e["host"], e["failed"]) for e in listed] == [(h, n) for h, n, _ in want], (listed, want)
    for e, (_, _, types) in zip(listed, want):
        assert e["error_type"] in types, (e, types)

SPOOL_SUBDIRS = ("incoming", "active", "done", "rejected", "out")

LOG_PREFIX = "harvestd: "
LOG_FIELD_RE = re.compile(r'([A-Za-z_][\w.]*)=("(?:[^"\\]|\\.)*"|\S*)')


def parse_log_line(line):
    """The key=value fields of one log line ("harvestd: level=info event=x k=v k2=\"a b\"", or
    "<N>level=..." for the journal) as a dict of strings (quotes removed), or None when the line
    is not a log event."""
    if line.startswith(LOG_PREFIX):
        line = line[len(LOG_PREFIX):]
    elif re.match(r"^<\d>", line):
        line = line[3:]
    if not line.startswith("level="):
        return None
    out = {}
    for key, value in LOG_FIELD_RE.findall(line):
        if value.startswith('"') and value.endswith('"') and len(value) >= 2:
            value = value[1:-1]
        out.setdefault(key, value)
    return out


def write_config(path, directives):
    """Write an INI config: `directives` is a dict or a list of (name, value) pairs, one
    "name = value" line each; a value of None is left out."""
    items = directives.items() if isinstance(directives, dict) else directives
    with open(path, "w", encoding="utf-8") as f:
        f.write("# generated by the integration tests\n")
        for name, value in items:
            if value is not None:
                f.write("%s = %s\n" % (name, value))
    return str(path)


def url_lines(data):
    """The lines of an input file that produce a record, as harvestd reads them: blank lines
    and # comments dropped, surrounding whitespace trimmed (bytes in, str out, invalid UTF-8
    replaced)."""
    out = []
    for raw in data.split(b"\n"):
        line = raw.strip(b" \t\r")
        if line and not line.startswith(b"#"):
            out.append(line.decode("utf-8", "replace"))
    return out


class Spool:
    """A spool directory in the test's tmp_path. Subdirectories are harvestd's to create; the
    staging directory (a sibling, same file system) is where files are written before they are
    renamed into incoming/."""

    def __init__(self, root):
        self.root = str(root)
        self.staging = self.root + ".staging"
        self._staged = 0
        os.makedirs(self.root, exist_ok=True)
        os.makedirs(self.staging, exist_ok=True)

    def path(self, *parts):
        return os.path.join(self.root, *parts)

    def drop(self, name, urls):
        """Write `urls` (bytes as is, or a list of lines each ended with "\\n") to the staging
        directory and rename it into incoming/`name` (str or bytes). Returns the bytes dropped."""
        if isinstance(urls, (bytes, bytearray)):
            data = bytes(urls)
        else:
            data = b"".join((u if isinstance(u, bytes) else u.encode("utf-8")) + b"\n" for u in urls)
        os.makedirs(self.path("incoming"), exist_ok=True)
        self._staged += 1
        tmp = os.path.join(self.staging, "staged-%d" % self._staged)
        with open(tmp, "wb") as f:
            f.write(data)
        os.rename(tmp, os.path.join(os.fsencode(self.path("incoming")), os.fsencode(name)))
        return data

    def files(self, sub):
        """Sorted names in `sub` (e.g. "done"); [] when it does not exist."""
        try:
            return sorted(os.listdir(self.path(sub)))
        except FileNotFoundError:
            return []

    def listing(self):
        """Every subdirectory's names, for failure messages."""
        return {sub: self.files(sub) for sub in SPOOL_SUBDIRS}

    def output_bytes(self, name):
        try:
            with open(self.path("out", name + ".jsonl"), "rb") as f:
                return f.read()
        except FileNotFoundError:
            return b""

    def output_lines(self, name):
        """Complete lines of out/<name>.jsonl written so far."""
        data = self.output_bytes(name)
        return data[:data.rfind(b"\n") + 1].split(b"\n")[:-1] if b"\n" in data else []

    def records(self, name, complete=True):
        """Records of out/<name>.jsonl; with complete=False a torn last line is ignored (a
        running or killed daemon), every complete line must still be valid."""
        data = self.output_bytes(name)
        if not complete and b"\n" in data:
            data = data[:data.rfind(b"\n") + 1]
        elif not complete:
            data = b""
        return parse_records(data, complete=complete)

    def summary_path(self, name):
        return self.path("out", name + ".summary.json")

    def has_summary(self, name):
        return os.path.exists(self.summary_path(name))

    def summary(self, name):
        """out/<name>.summary.json parsed (None when absent)."""
        try:
            with open(self.summary_path(name), "rb") as f:
                data = f.read()
        except FileNotFoundError:
            return None
        try:
            return json.loads(data.decode("utf-8"))
        except ValueError as e:
            pytest.fail("summary of %r is not valid JSON (%s): %r" % (name, e, data[:500]))


def check_summary(summary, name, records, resumed=0):
    """The summary of a batch whose final output holds `records` (the latest record of each
    input line) is consistent with them; returns it."""
    assert summary is not None, "no summary for %r" % name
    assert set(summary) - {"recrawl"} == SUMMARY_KEYS, "summary keys: %r" % sorted(summary)
    assert summary["batch"] == name, summary
    ok = sum(1 for r in records if r["status"] == "ok")
    failed = len(records) - ok
    assert summary["records"] == len(records) + resumed, summary
    assert summary["ok"] == ok + resumed, summary
    assert summary["failed"] == failed, summary
    assert summary["resumed"] == resumed, summary
    assert sum(summary["error_types"].values()) == failed, summary
    assert summary["error_types"] == count_by([r for r in records if r["status"] == "failed"],
                                              "error_type"), summary
    if resumed == 0:
        statuses = count_by([r for r in records if "http_status" in r], "http_status")
        assert summary["http_statuses"] == {str(k): v for k, v in statuses.items()}, summary
        with_bytes = [r["bytes"] for r in records if "bytes" in r]
        assert summary["body_bytes_total"] == sum(with_bytes), summary
        assert summary["body_bytes_mean"] == (sum(with_bytes) // len(with_bytes) if with_bytes else 0), summary
        sizes = ok_page_sizes(records)
        if sizes:
            assert summary["ok_body_bytes_mean"] == sum(sizes) // len(sizes), summary
            check_median(summary["ok_body_bytes_median"], sizes)
        else:
            assert summary["ok_body_bytes_mean"] is None and summary["ok_body_bytes_median"] is None, summary
        check_top_failing_hosts(summary["top_failing_hosts"], records)
        # Every response came from a request of this run (answers from the store made none).
        answered = [r for r in records if "http_status" in r and not r.get("from_cache")]
        assert summary["requests"] >= len(answered), summary
    total = len(records) + resumed
    if total:
        assert abs(summary["ok_ratio"] - (ok + resumed) / total) <= 0.0005 + 1e-9, summary
    else:
        assert summary["ok_ratio"] is None, summary
    assert isinstance(summary["requests"], int) and summary["requests"] >= 0, summary
    assert isinstance(summary["requests_per_s"], (int, float)), summary
    # requests / elapsed, both printed rounded (elapsed_s to the millisecond, the rate to 0.1).
    e = summary["elapsed_s"]
    if e > 0.001:
        low, high = summary["requests"] / (e + 0.0005), summary["requests"] / (e - 0.0005)
        assert low - 0.05 <= summary["requests_per_s"] <= high + 0.05, summary
    started = parse_fetched_at(summary["started_at"])
    finished = parse_fetched_at(summary["finished_at"])
    assert started <= finished, summary
    assert isinstance(summary["elapsed_s"], (int, float)) and summary["elapsed_s"] >= 0, summary
    assert abs(summary["elapsed_s"] - (finished - started)) < 0.01, summary
    assert isinstance(summary["pages_per_s"], (int, float)) and summary["pages_per_s"] >= 0, summary
    return summary


def page_urls(origin, prefix, n, extra=""):
    """n URLs of /page with titles prefix0, prefix1..."""
    return [origin.url("/page?title=%s%d%s" % (prefix, i, extra)) for i in range(n)]


def wait_complete(daemon, spool, names, timeout=10):
    """Wait until every batch in `names` has its summary and its input is in done/."""
    names = list(names)
    daemon.poll_until(lambda: all(spool.has_summary(n) for n in names)
                      and set(names) <= set(spool.files("done")), timeout,
                      lambda: "summaries and done/ of %r (spool: %r)" % (names, spool.listing()))


def check_batch(spool, name, data):
    """out/<name>.jsonl holds one record per input line of `data` (bytes dropped) and the
    summary agrees; returns the records."""
    recs = spool.records(name)
    assert sorted(r["requested_url"] for r in recs) == sorted(url_lines(data)), \
        "records of %r do not match its input lines" % name
    for r in recs:
        assert_key_order(r)
    check_summary(spool.summary(name), name, recs)
    with open(spool.path("done", name), "rb") as f:
        assert f.read() == data, "done/%s differs from the file dropped" % name
    return recs


def title_of(url):
    """The title= of an origin URL."""
    return url.split("title=", 1)[1].split("&", 1)[0]


class Daemon:
    """A running `harvestd -c CONFIG`."""

    def __init__(self, argv, stdout_path, stderr_path, env, user=None):
        self.argv = argv
        self.stdout_path = stdout_path
        self.stderr_path = stderr_path
        self.started = time.monotonic()
        self._stdout = open(stdout_path, "wb")
        self._stderr = open(stderr_path, "wb")
        st = os.fstat(self._stderr.fileno())
        self.stderr_dev_ino = "%d:%d" % (st.st_dev, st.st_ino)
        if callable(env):
            env = env(self)
        kwargs = {}
        if user is not None:
            kwargs["user"] = user
            kwargs["group"] = user
            kwargs["extra_groups"] = []
        self.popen = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=self._stdout,
                                      stderr=self._stderr, env=env, start_new_session=True,
                                      **kwargs)
        self.pid = self.popen.pid
        self.rc = None
        print("$ " + " ".join(argv) + "   # pid %d" % self.pid)

    def running(self):
        return self.popen.poll() is None

    def send_signal(self, sig):
        if self.popen.poll() is None:
            os.kill(self.pid, sig)

    def stderr_text(self):
        with open(self.stderr_path, "rb") as f:
            return f.read().decode("utf-8", "replace")

    def stdout_text(self):
        with open(self.stdout_path, "rb") as f:
            return f.read().decode("utf-8", "replace")

    def events(self, event=None):
        """Parsed log lines (see parse_log_line), only those of `event` if given."""
        out = []
        for line in self.stderr_text().splitlines():
            fields = parse_log_line(line)
            if fields is not None and (event is None or fields.get("event") == event):
                out.append(fields)
        return out

    def poll_until(self, predicate, timeout, what):
        """Poll `predicate()` every 10 ms until it is true; fail after `timeout` seconds, or if
        the daemon exits first. `what` (a string, or a function returning one, called on
        failure) says what was awaited."""
        deadline = time.monotonic() + timeout * SLOWDOWN
        while not predicate():
            if callable(what) and (self.popen.poll() is not None or time.monotonic() > deadline):
                what = what()
            if self.popen.poll() is not None:
                self._close_files()
                pytest.fail("harvestd exited (status %s) while waiting for %s\n%s"
                            % (self.popen.returncode, what, self.stderr_text()[-5000:]))
            if time.monotonic() > deadline:
                pytest.fail("timed out after %.1fs waiting for %s\n%s"
                            % (timeout, what, self.stderr_text()[-3000:]))
            time.sleep(0.01)

    def catches(self, *signals):
        """Whether the daemon has handlers installed for all `signals` (SigCgt in /proc)."""
        try:
            with open("/proc/%d/status" % self.pid) as f:
                for line in f:
                    if line.startswith("SigCgt:"):
                        mask = int(line.split()[1], 16)
                        return all(mask & (1 << (s - 1)) for s in signals)
        except (OSError, ValueError):
            pass
        return False

    def wait_ready(self, timeout=10):
        """Wait for the start-up log line (written after the start-up scan) and for the
        daemon's signal handlers: READY=1 and that log line come slightly before them (see
        test_63_07), and a test that signals the daemon at once must not kill it instead."""
        self.poll_until(lambda: "event=start mode=daemon" in self.stderr_text(), timeout,
                        "the daemon's start-up")
        self.poll_until(lambda: self.catches(signal.SIGINT, signal.SIGTERM, signal.SIGHUP), timeout,
                        "the daemon's signal handlers")
        return self

    def wait(self, timeout=30):
        """Reap the daemon; fails (after killing it) if it is still running after `timeout`
        seconds, or was killed by a signal. Returns its exit status."""
        if self.rc is not None:
            return self.rc
        try:
            rc = self.popen.wait(timeout * SLOWDOWN)
        except subprocess.TimeoutExpired:
            self.kill()
            self._dump()
            pytest.fail("harvestd did not exit within %ss (killed)\n%s" % (timeout, self.stderr_text()[-5000:]))
        self._close_files()
        self.rc = rc
        self._dump()
        check_sanitizer(self.stderr_text())
        assert rc >= 0, "harvestd killed by signal %d\n%s" % (-rc, self.stderr_text()[-5000:])
        return rc

    def stop(self, sig=signal.SIGTERM, timeout=15):
        """Signal the daemon and reap it; returns its exit status."""
        self.send_signal(sig)
        return self.wait(timeout)

    def kill(self):
        """SIGKILL the daemon (its whole session) and reap it."""
        if self.popen.poll() is None:
            try:
                os.killpg(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.popen.wait()
        self._close_files()

    def _dump(self):
        print("$ " + " ".join(self.argv))
        text = self.stderr_text()
        print("---- harvestd stderr (%d bytes, last 20000 shown) ----" % len(text))
        print(text[-20000:])
        print("---- end of stderr ----")

    def _close_files(self):
        for f in (self._stdout, self._stderr):
            if not f.closed:
                f.close()


# ---------------------------------------------------------------------------- fault injection
#
# A shared object preloaded into harvestd (LD_PRELOAD), compiled at test time with `cc` like the
# launcher. Driven by the environment, so one build serves every test:
#   HV_FAULT_INOTIFY_INIT=ENAME       inotify_init1() fails with that errno
#   HV_FAULT_INOTIFY_ADD_WATCH=ENAME  inotify_add_watch() fails with that errno (ENOSPC: the
#                                     host's watch limit is used up)
#   HV_FAULT_FSYNC=ENAME              fsync() of a file whose path contains HV_FAULT_FSYNC_PATH
#                                     (any file when unset) fails with that errno
#   HV_FAULT_FSYNC_DELAY_MS=N         fsync() and fdatasync() of a file whose path contains
#                                     HV_FAULT_FSYNC_DELAY_PATH (any file when unset) sleep N ms
#                                     first (a slow disk); with HV_TRACE_FILE each such call
#                                     appends "fsync_held PATH" as it starts to wait
#   HV_FAULT_SYNC_ON_MAIN=abort       fsync() or fdatasync() called on the process's main
#                                     thread (harvestd's loop thread) prints "shim: sync on the
#                                     main thread: PATH" on stderr and aborts
#   HV_TRACE_FILE=PATH                appends "fsync PATH", "unlink PATH", "rename FROM TO" and
#                                     "renameat2 FROM TO" for each such call that succeeded, in
#                                     call order (fsync names the file through /proc/self/fd;
#                                     the tests' paths have no spaces)
# Every other call goes to the C library. preload_env() builds the variables to pass: under
# AddressSanitizer the ASan runtime must come first in LD_PRELOAD, or it refuses to start.

SHIM_SOURCE = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static const struct { const char *name; int value; } errnos[] = {
    {"ENOSPC", ENOSPC}, {"EMFILE", EMFILE}, {"ENFILE", ENFILE}, {"ENOMEM", ENOMEM},
    {"EACCES", EACCES}, {"ENOENT", ENOENT}, {"EIO", EIO},
};

/* The errno the variable `var` names, or 0 when it is not set. */
static int fault(const char *var)
{
    const char *v = getenv(var);
    if (v == NULL || v[0] == '\0')
        return 0;
    for (size_t i = 0; i < sizeof(errnos) / sizeof(errnos[0]); i++)
        if (strcmp(v, errnos[i].name) == 0)
            return errnos[i].value;
    return EIO;
}

static void *next(const char *name)
{
    void *f = dlsym(RTLD_NEXT, name);
    if (f == NULL)
        abort();
    return f;
}

static void trace(const char *op, const char *a, const char *b)
{
    const char *path = getenv("HV_TRACE_FILE");
    char line[8400];
    if (path == NULL || path[0] == '\0')
        return;
    int n = snprintf(line, sizeof(line), "%s %s%s%s\n", op, a, b != NULL ? " " : "",
                     b != NULL ? b : "");
    if (n <= 0 || (size_t)n >= sizeof(line))
        return;
    int saved = errno;
    int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    if (fd >= 0) {
        ssize_t w = write(fd, line, (size_t)n); /* one write: lines never interleave */
        (void)w;
        close(fd);
    }
    errno = saved;
}

int inotify_init1(int flags)
{
    int e = fault("HV_FAULT_INOTIFY_INIT");
    if (e != 0) {
        errno = e;
        return -1;
    }
    return ((int (*)(int))next("inotify_init1"))(flags);
}

int inotify_add_watch(int fd, const char *path, uint32_t mask)
{
    int e = fault("HV_FAULT_INOTIFY_ADD_WATCH");
    if (e != 0) {
        errno = e;
        return -1;
    }
    return ((int (*)(int, const char *, uint32_t))next("inotify_add_watch"))(fd, path, mask);
}

static void fd_path(int fd, char *path, size_t cap)
{
    char link[64];
    snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
    ssize_t n = readlink(link, path, cap - 1);
    path[n > 0 ? n : 0] = '\0';
}

/* What every sync of `path` meets first: the main-thread check, then the delay. */
static void before_sync(const char *path)
{
    const char *main_check = getenv("HV_FAULT_SYNC_ON_MAIN");
    if (main_check != NULL && strcmp(main_check, "abort") == 0 &&
        syscall(SYS_gettid) == getpid()) {
        char line[4200];
        int n = snprintf(line, sizeof(line), "shim: sync on the main thread: %s\n", path);
        if (n > 0 && write(2, line, (size_t)n) < 0)
            abort();
        abort();
    }
    const char *delay = getenv("HV_FAULT_FSYNC_DELAY_MS");
    const char *only = getenv("HV_FAULT_FSYNC_DELAY_PATH");
    if (delay != NULL && delay[0] != '\0' && (only == NULL || strstr(path, only) != NULL)) {
        long ms = strtol(delay, NULL, 10);
        struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
        trace("fsync_held", path, NULL);
        while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
            ;
    }
}

int fdatasync(int fd)
{
    char path[4096];
    fd_path(fd, path, sizeof(path));
    before_sync(path);
    return ((int (*)(int))next("fdatasync"))(fd);
}

int fsync(int fd)
{
    char path[4096];
    fd_path(fd, path, sizeof(path));
    before_sync(path);
    int e = fault("HV_FAULT_FSYNC");
    const char *only = getenv("HV_FAULT_FSYNC_PATH");
    if (e != 0 && (only == NULL || strstr(path, only) != NULL)) {
        errno = e;
        return -1;
    }
    int rc = ((int (*)(int))next("fsync"))(fd);
    if (rc == 0)
        trace("fsync", path, NULL);
    return rc;
}

int unlink(const char *path)
{
    int rc = ((int (*)(const char *))next("unlink"))(path);
    if (rc == 0)
        trace("unlink", path, NULL);
    return rc;
}

int rename(const char *from, const char *to)
{
    int rc = ((int (*)(const char *, const char *))next("rename"))(from, to);
    if (rc == 0)
        trace("rename", from, to);
    return rc;
}

int renameat2(int fromfd, const char *from, int tofd, const char *to, unsigned flags)
{
    int rc = ((int (*)(int, const char *, int, const char *, unsigned))next("renameat2"))(
        fromfd, from, tofd, to, flags);
    if (rc == 0)
        trace("renameat2", from, to);
    return rc;
}
"""

_shim = None  # (path, why it is missing)


def fault_shim():
    """Path of the compiled shim (see SHIM_SOURCE); skips the test, saying why, when it cannot
    be built (no C compiler)."""
    global _shim
    if _shim is None:
        tmp = tempfile.mkdtemp(prefix="harvestd-shim-")
        atexit.register(shutil.rmtree, tmp, True)
        src, lib = os.path.join(tmp, "shim.c"), os.path.join(tmp, "shim.so")
        with open(src, "w") as f:
            f.write(SHIM_SOURCE)
        cc = os.environ.get("CC") or "cc"
        try:
            done = subprocess.run([cc, "-O2", "-shared", "-fPIC", "-o", lib, src, "-ldl"],
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=60)
            _shim = (lib, "") if done.returncode == 0 else \
                ("", "cannot build the fault-injection shim:\n" + done.stdout.decode(errors="replace"))
        except OSError as e:
            _shim = ("", "no C compiler (%s) to build the fault-injection shim: %s" % (cc, e))
    if not _shim[0]:
        pytest.skip(_shim[1])
    return _shim[0]


def sanitizer_runtime():
    """Path of the ASan runtime the binary loads ("" when it is not an ASan build); skips the
    test when it is one but ldd does not name the runtime."""
    if "address" not in SANITIZER:
        return ""
    try:
        out = subprocess.run(["ldd", HARVESTD_BIN], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             timeout=30).stdout.decode(errors="replace")
    except OSError as e:
        pytest.skip("cannot run ldd to find the ASan runtime for LD_PRELOAD: %s" % e)
    for line in out.splitlines():
        parts = line.split()
        if parts and parts[0].startswith("libasan") and len(parts) >= 3 and parts[1] == "=>":
            return parts[2]
    pytest.skip("an ASan build, but ldd names no libasan to put first in LD_PRELOAD:\n" + out)


def preload_env(**variables):
    """Environment additions that preload the shim into harvestd (after the ASan runtime in an
    ASan build) with the shim's `variables` (HV_FAULT_*, HV_TRACE_FILE)."""
    libs = [lib for lib in (sanitizer_runtime(), fault_shim()) if lib]
    env = {"LD_PRELOAD": ":".join(libs)}
    env.update({k: str(v) for k, v in variables.items()})
    return env


def read_trace(path):
    """The calls a shim with HV_TRACE_FILE=path saw, as lists of words ([] before any)."""
    try:
        with open(path) as f:
            return [line.split() for line in f if line.strip()]
    except FileNotFoundError:
        return []


# ---------------------------------------------------------------------------- another user

NOBODY = 65534


def require_runs_as(uid):
    """Skip the test, saying why, unless harvestd can be run as `uid` (and the same gid): the
    binary and its directories must be open to that user."""
    try:
        probe = subprocess.run([HARVESTD_BIN, "--version"], user=uid, group=uid, extra_groups=[],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=10)
        why = "" if probe.returncode == 0 else repr(probe.stdout)
    except OSError as e:
        why = str(e)
    if why:
        pytest.skip("cannot run harvestd as uid %d: %s" % (uid, why))


def wait_listening(port, alive, timeout=10):
    """Wait until 127.0.0.1:port accepts connections; `alive()` false fails at once."""
    deadline = time.monotonic() + timeout * SLOWDOWN
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            pass
        assert alive(), "harvestd exited before listening on 127.0.0.1:%d" % port
        assert time.monotonic() < deadline, "nothing listens on 127.0.0.1:%d" % port
        time.sleep(0.01)


def refused_config(harvestd, spool, path, mode):
    """Give a configuration that must be refused to `--check-config` (mode "check") or to the
    daemon (any other mode): (exit status, stderr), having checked that nothing claimed it was
    fine and that the daemon did not start on its spool."""
    if mode == "check":
        done = harvestd.command("--check-config", "-c", path)
        assert "configuration OK" not in done.stdout
        return done.returncode, done.stderr
    d = harvestd.start_daemon(path)
    rc = d.wait(timeout=5)
    assert not os.path.exists(spool.path("incoming")), "the daemon started with a bad config"
    return rc, d.stderr_text()


# ---------------------------------------------------------------------------- a state store's file

# What tests change in a meta page of an LMDB 0.9 data.mdb on a 64-bit little-endian machine
# (src/storecheck.c): offset within the page, struct format.
LMDB_META = {"magic": (16, "<I"), "version": (20, "<I"), "page_size": (40, "<I"),
             "free_root": (80, "<Q"), "main_depth": (94, "<H"), "main_root": (128, "<Q"),
             "last_page": (136, "<Q"), "txnid": (144, "<Q")}


def lmdb_meta(path, which):
    """The LMDB_META fields of meta page `which` (0 or 1) of the data.mdb at `path`."""
    with open(path, "rb") as f:
        data = f.read(2 * 65536)
    base = which * struct.unpack_from("<I", data, LMDB_META["page_size"][0])[0]
    return {k: struct.unpack_from(fmt, data, base + off)[0] for k, (off, fmt) in LMDB_META.items()}


def lmdb_newest(path):
    """The meta page LMDB reads: the later transaction's (page 0 on a tie)."""
    return int(lmdb_meta(path, 0)["txnid"] < lmdb_meta(path, 1)["txnid"])


def lmdb_set_meta(path, which, **values):
    """Overwrite LMDB_META fields of meta page `which`."""
    page = lmdb_meta(path, 0)["page_size"]
    with open(path, "r+b") as f:
        for k, v in values.items():
            off, fmt = LMDB_META[k]
            f.seek(which * page + off)
            f.write(struct.pack(fmt, v))


def lmdb_leaf_pages(path):
    """The leaf pages of the entries in data.mdb, but for the root: page numbers."""
    with open(path, "rb") as f:
        data = f.read()
    newest = lmdb_meta(path, lmdb_newest(path))
    page = newest["page_size"]
    return [p for p in range(2, len(data) // page)
            if p != newest["main_root"] and data[p * page + 10] & 0x0f == 0x02]


def lmdb_damage_page(path, pgno, how):
    """Damage page `pgno` inside: "zero" it, or make its first node's value 16 MiB long
    ("size"), which reading runs past the end of the file."""
    page = lmdb_meta(path, 0)["page_size"]
    with open(path, "r+b") as f:
        if how == "zero":
            f.seek(pgno * page)
            f.write(b"\0" * page)
        else:
            f.seek(pgno * page + 16)
            node = struct.unpack("<H", f.read(2))[0]
            f.seek(pgno * page + node)
            f.write(struct.pack("<I", 0x00ffffff))



@contextlib.contextmanager
def small_tmpfs(path, size, harvestd):
    """`path` (made here) on a tmpfs of `size` ("64k") for the block, the test skipped where
    it cannot be mounted (root only); unmounted after, once the test's daemons are gone
    (harvestd.cleanup())."""
    def run(*argv):
        return subprocess.run(list(argv), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              timeout=30)
    os.makedirs(str(path))
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    try:
        done = run("mount", "-t", "tmpfs", "-o", "size=%s,mode=0755" % size, "tmpfs", str(path))
    except OSError as e:
        pytest.skip("cannot run mount: %s" % e)
    if done.returncode != 0:
        pytest.skip("cannot mount a tmpfs here: %s" % done.stdout.decode(errors="replace").strip())
    try:
        yield path
    finally:
        harvestd.cleanup()
        if run("umount", str(path)).returncode != 0:
            run("umount", "-l", str(path))
