"""The daemon's configuration file: errors name the file and line and exit 2 (whether the daemon
starts or --check-config checks), --check-config, and command-line overrides."""

import os
import re
import shlex
import subprocess
import time

import pytest

from harness import HARVESTD_BIN, SLOWDOWN, refused_config

REPO = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))

# (id, the offending line, expected message after "FILE:LINE: ")
BAD_LINES = [
    ("unknown-key", "frobnicate = 1", "unknown directive 'frobnicate'"),
    ("not-a-number", "concurrency = abc", "concurrency: 'abc' is not a whole number"),
    ("zero-concurrency", "concurrency = 0", "concurrency: '0' is out of range"),
    ("negative", "per_host = -1", "per_host: '-1' is not a whole number"),
    ("not-a-size", "max_bytes = lots", "max_bytes: 'lots' is not a size"),
    ("not-a-duration", "connect_timeout = soon", "connect_timeout: 'soon' is not a duration"),
    ("bad-unit", "read_timeout = 5 parsecs", "read_timeout: '5 parsecs' is not a duration"),
    ("rescan-too-fast", "rescan_interval = 10ms", "rescan_interval: '10ms' is out of range"),
    ("zero-batches", "max_active_batches = 0", "max_active_batches: '0' is out of range"),
    ("bad-fsync", "fsync = sometimes", "fsync: 'sometimes' is not never, interval or always"),
    ("bad-bool", "insecure = maybe", "insecure: 'maybe' is not yes or no"),
    ("bad-level", "log_level = loud", "log_level: 'loud' is not one of"),
    ("no-equals", "concurrency", "syntax error"),
    ("too-long", "# " + "x" * 197, "line too long"),
    ("too-long-value", "user_agent = " + "u" * 186, "line too long"),
]


def write(path, lines, newline_at_end=True):
    text = "\n".join(lines) + ("\n" if newline_at_end else "")
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
    return str(path)


def good_lines(spool):
    return ["# a daemon configuration", "", "spool_dir = %s" % spool.root, "; another comment",
            "drain_timeout = 5s", "   concurrency = 8", "log_level = info"]


def assert_config_error(done_or_daemon_rc, stderr, path, line, message):
    with open(path, encoding="utf-8") as f:
        text = f.read()
    assert done_or_daemon_rc == 2, "exit status %r for %s:\n%s\nstderr: %s" % (done_or_daemon_rc, path, text, stderr)
    prefix = "%s:%d: " % (path, line)
    assert prefix + message in stderr, "expected %r in stderr:\n%s" % (prefix + message, stderr)
    assert "configuration OK" not in stderr


@pytest.mark.parametrize("mode", ["daemon", "check"])
@pytest.mark.parametrize("bad,message", [c[1:] for c in BAD_LINES], ids=[c[0] for c in BAD_LINES])
def test_62_01_bad_line_names_file_and_line(harvestd, spool, tmp_path, bad, message, mode):
    lines = good_lines(spool)
    lines.insert(5, bad)
    path = write(tmp_path / "d.conf", lines)
    rc, stderr = refused_config(harvestd, spool, path, mode)
    assert_config_error(rc, stderr, path, 6, message)


@pytest.mark.parametrize("mode", ["daemon", "check"])
def test_62_02_missing_spool_dir(harvestd, tmp_path, mode):
    lines = ["# no such spool", "spool_dir = %s" % (tmp_path / "nowhere"), "concurrency = 4"]
    path = write(tmp_path / "d.conf", lines)
    with open(tmp_path / "a-file", "w") as f:
        f.write("not a directory\n")
    path2 = write(tmp_path / "d2.conf", ["spool_dir = %s" % (tmp_path / "a-file")])
    for p, line, spool_dir in ((path, 2, tmp_path / "nowhere"), (path2, 1, tmp_path / "a-file")):
        if mode == "check":
            done = harvestd.command("--check-config", "-c", p)
            rc, stderr = done.returncode, done.stderr
        else:
            d = harvestd.start_daemon(p)
            rc = d.wait(timeout=5)
            stderr = d.stderr_text()
        assert_config_error(rc, stderr, p, line, "spool_dir: %s is not a directory" % spool_dir)
    assert not os.path.exists(tmp_path / "nowhere"), "spool_dir was created"


@pytest.mark.parametrize("mode", ["daemon", "check"])
def test_62_02b_spool_dir_not_set_or_missing_with_recrawl(harvestd, tmp_path, mode):
    """A config without spool_dir names the file and says the directive is not set (it said
    "default: spool_dir: ..."); with re-crawling on, a missing spool is said as such, not as
    the state store that would be in it ("cannot create the state store .../state")."""
    if os.path.exists("/var/spool/harvestd"):
        pytest.skip("/var/spool/harvestd exists on this machine: the default would be used")
    unset = write(tmp_path / "unset.conf", ["concurrency = 4"])
    recrawl = write(tmp_path / "recrawl.conf", ["recrawl = conditional",
                                                "spool_dir = %s" % (tmp_path / "nowhere")])
    for path, expected in ((unset, "%s: spool_dir is not set, and its default "
                                   "/var/spool/harvestd is not a directory" % unset),
                           (recrawl, "%s:2: spool_dir: %s is not a directory" % (recrawl, tmp_path / "nowhere"))):
        if mode == "check":
            done = harvestd.command("--check-config", "-c", path)
            rc, stderr = done.returncode, done.stderr
        else:
            d = harvestd.start_daemon(path)
            rc = d.wait(timeout=5)
            stderr = d.stderr_text()
        assert rc == 2, stderr
        assert expected in stderr, stderr
        assert "state store" not in stderr, stderr
    assert not os.path.exists(tmp_path / "nowhere")


def test_62_03_line_length_limit_is_198_characters(harvestd, spool, tmp_path):
    longest = "# " + "x" * 196
    assert len(longest) == 198
    ok = harvestd.command("--check-config", "-c", write(tmp_path / "ok.conf", good_lines(spool) + [longest]))
    assert ok.returncode == 0, ok.stderr
    ua = "user_agent = " + "u" * 185
    assert len(ua) == 198
    ok = harvestd.command("--check-config", "-c", write(tmp_path / "ua.conf", good_lines(spool) + [ua]))
    assert ok.returncode == 0, ok.stderr
    # 199 characters: an error, also on a last line without a newline.
    for name, newline in (("nl.conf", True), ("no-nl.conf", False)):
        path = write(tmp_path / name, good_lines(spool) + [longest + "y"], newline_at_end=newline)
        done = harvestd.command("--check-config", "-c", path)
        assert_config_error(done.returncode, done.stderr, path, 8, "line too long")


def test_62_04_unknown_section_is_an_error(harvestd, spool, tmp_path):
    # With a directive in it: the error names the section (at its header or its first line).
    path = write(tmp_path / "d.conf", good_lines(spool) + ["[main]", "concurrency = 4"])
    done = harvestd.command("--check-config", "-c", path)
    assert done.returncode == 2, done.stderr
    assert re.search(r"^harvestd: %s:(8|9): unknown section \[main\]( \(known: .*\))?$" % re.escape(path), done.stderr, re.M), done.stderr
    # An empty section is no less unknown.
    path = write(tmp_path / "empty.conf", good_lines(spool) + ["[extra]", "# nothing in it"])
    done = harvestd.command("--check-config", "-c", path)
    assert_config_error(done.returncode, done.stderr, path, 8, "unknown section [extra]")


def test_62_05_check_config_ok_and_touches_nothing(harvestd, spool, tmp_path):
    os.makedirs(spool.path("incoming"))
    spool.drop("waiting.txt", [b"http://127.0.0.1:1/"])
    path = write(tmp_path / "d.conf", good_lines(spool))
    started = time.monotonic()
    done = harvestd.command("--check-config", "-c", path)
    assert done.returncode == 0, done.stderr
    assert "configuration OK" in done.stdout
    assert time.monotonic() - started < 2 * SLOWDOWN
    assert sorted(os.listdir(spool.root)) == ["incoming"], "--check-config changed the spool"
    assert spool.files("incoming") == ["waiting.txt"]


def test_62_06_missing_config_file(harvestd, tmp_path):
    for args in (["-c", tmp_path / "none.conf"], ["--check-config", "-c", tmp_path / "none.conf"]):
        done = harvestd.command(*args)
        assert done.returncode == 2
        assert "cannot read config file %s" % (tmp_path / "none.conf") in done.stderr, done.stderr


def test_62_07_command_line_overrides_the_file(harvestd, spool, tmp_path, fresh_origin):
    o = fresh_origin
    path = write(tmp_path / "d.conf", ["spool_dir = %s" % (tmp_path / "nowhere"), "concurrency = 1",
                                       "allow_addresses = 127.0.0.1",
                                       "per_host = 1", "log_level = info", "rescan_interval = 300ms"])
    # The file alone is refused (no spool); the command line fixes it.
    assert harvestd.command("--check-config", "-c", path).returncode == 2
    done = harvestd.command("--check-config", "-c", path, "--spool-dir", spool.root)
    assert done.returncode == 0 and "configuration OK" in done.stdout, done.stderr
    # A bad value on the command line is refused too.
    done = harvestd.command("--check-config", "-c", path, "--spool-dir", spool.root, "--concurrency", "abc")
    assert done.returncode == 2 and "concurrency: 'abc' is not a whole number" in done.stderr, done.stderr

    d = harvestd.start_daemon(path, "--spool_dir", spool.root, "--concurrency=3", "--per-host", "3").wait_ready()
    start = d.events("start")[0]
    assert (start["concurrency"], start["per_host"]) == ("3", "3"), start
    spool.drop("held.txt", [o.url("/hold?key=o&title=h%d" % i) for i in range(6)])
    d.poll_until(lambda: len(o.requests) >= 3, 5, "three requests at once")
    time.sleep(0.3)
    assert len(o.requests) == 3 and o.max_inflight == 3, "%d requests in flight" % o.max_inflight
    o.release("o")
    d.poll_until(lambda: spool.has_summary("held.txt"), 5, "the batch to complete")
    assert d.stop() == 0


def test_62_08_comments_blanks_and_units_are_accepted(harvestd, spool, tmp_path):
    lines = ["# comment", "; comment", "", "   ", "spool_dir = %s" % spool.root,
             "max_bytes = 1m", "page_queue_bytes = 512k", "connect_timeout = 1500ms",
             "read_timeout = 2", "total_timeout = 1m", "keepalive_timeout = 1h", "flush_ms = 20",
             "drain_timeout = 3s", "fsync = always", "fsync_interval = 250ms", "insecure = no",
             "user_agent = test agent/1.0 (spaces allowed)", "max_active_batches = 2",
             "\tper_host = 2", "log_level = warning",
             "concurrency = 7  # a comment after a value", "queue_size = 64 ; so is this",
             "header = X-Tag: #1 # the first '#' is the value's"]
    path = write(tmp_path / "d.conf", lines)
    done = harvestd.command("--check-config", "-c", path)
    assert done.returncode == 0, done.stderr
    assert "configuration OK" in done.stdout
    assert "header = X-Tag: #1  # %s:23" % path in done.stdout.splitlines(), done.stdout


# ---------------------------------------------------------------------------- request headers

# (id, lines after good_lines(), line of the error counted from 1, expected message)
BAD_HEADERS = [
    ("no-colon", ["header = Authorization Bearer s3cret"], 8, "header: expected 'Name: value' (no ':')"),
    ("bad-name", ["header = X Trace: s3cret"], 8,
     "header: 'X Trace' is not a header name (letters, digits and !#$%&'*+-.^_`|~ only)"),
    ("host", ["header = Host: s3cret.test"], 8, "header: 'Host' cannot be configured: harvestd sends the URL's host"),
    ("connection", ['[host "a.test"]', "header = Connection: close"], 9,
     "header: 'Connection' cannot be configured: harvestd manages its connections"),
    ("user-agent", ["header = User-Agent: s3cret"], 8,
     "header: 'User-Agent' cannot be configured: set user_agent instead (robots.txt is matched against it)"),
    ("proxy-authorization", ["header = Proxy-Authorization: Basic s3cret"], 8,
     "header: 'Proxy-Authorization' cannot be configured: proxy credentials are never sent to a server"),
    ("if-modified-since", ["header = If-Modified-Since: s3cret"], 8,
     "header: 'If-Modified-Since' cannot be configured: re-crawling sends it (recrawl = conditional)"),
    ("control", ["header = Cookie: a=s3cret\x01"], 8, "header: 'Cookie': control character 0x01 in its value"),
    ("twice", ["header = Cookie: a=1", '[host "a.test"]', "header = Cookie: b=2", "[host \"A.TEST\"]",
               "header = cookie: s3cret"], 12, "header: 'cookie' is already set (line 10), in the [host \"a.test\"] headers"),
    ("too-many", ["header = X-%d: %d" % (i, i) for i in range(33)], 40, "header: more than 32 global headers"),
]


@pytest.mark.parametrize("mode", ["daemon", "check"])
@pytest.mark.parametrize("lines,line,message", [c[1:] for c in BAD_HEADERS], ids=[c[0] for c in BAD_HEADERS])
def test_62_09_bad_header_names_file_and_line(harvestd, spool, tmp_path, lines, line, message, mode):
    path = write(tmp_path / "h.conf", good_lines(spool) + lines)
    rc, stderr = refused_config(harvestd, spool, path, mode)
    assert_config_error(rc, stderr, path, line, message)
    assert "s3cret" not in stderr


def test_62_10_bad_header_on_the_command_line(harvestd, spool, tmp_path):
    path = write(tmp_path / "d.conf", good_lines(spool))
    for value, message in (("Cookie", "header: expected 'Name: value' (no ':')"),
                           ("Cookie: a=s3cret\r\nX-Injected: 1", "header: 'Cookie': control character 0x0d in its value"),
                           ("Transfer-Encoding: chunked", "header: 'Transfer-Encoding' cannot be configured")):
        done = harvestd.command("--check-config", "-c", path, "--header", value)
        assert done.returncode == 2, done
        assert "harvestd: " + message in done.stderr, done.stderr
        assert "s3cret" not in done.stderr and "configuration OK" not in done.stdout
    done = harvestd.command("--check-config", "-c", path, "--header", "X-A: 1", "--header", "x-a: 2")
    assert done.returncode == 2 and "header: 'x-a' is already set (the command line)" in done.stderr, done.stderr


def test_62_11_check_config_lists_headers_with_secrets_masked(harvestd, spool, tmp_path):
    path = write(tmp_path / "h.conf", good_lines(spool) + [
        "header = Accept-Language: de-CH",
        "header = Cookie: session=s3cret",
        '[host "api.example.org"]',
        "header = Authorization: Bearer s3cret",
        "header = X-Api-Key: s3cret",
        "header = Accept-Language: fr"])
    done = harvestd.command("--check-config", "-c", path, "--header", "Authorization: Basic czNjcmV0")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "harvestd: configuration OK: %s" % path,
        "# request headers (secret values shown as ***)",
        "header = Accept-Language: de-CH  # %s:8" % path,
        "header = Cookie: ***  # %s:9" % path,
        "header = Authorization: ***  # command line",
        '[host "api.example.org"]',
        "header = Authorization: ***  # %s:11" % path,
        "header = X-Api-Key: ***  # %s:12" % path,
        "header = Accept-Language: fr  # %s:13" % path,
    ], done.stdout
    assert "s3cret" not in done.stdout + done.stderr and "czNjcmV0" not in done.stdout + done.stderr


def test_62_12_daemon_sends_headers_and_logs_no_secret(harvestd, spool, tmp_path, fresh_origin):
    """The daemon (debug logging) sends the file's headers and the command line's; no secret
    value reaches its log."""
    o = fresh_origin
    path = harvestd.daemon_config(spool.root, {"log_level": "debug"})
    with open(path, "a", encoding="utf-8") as f:
        f.write("header = Cookie: consent=s3cret\n[host \"127.0.0.1\"]\nheader = Authorization: Bearer s3cret\n")
    d = harvestd.start_daemon(path, "--header", "X-Api-Key: s3cret-too").wait_ready()
    spool.drop("h.txt", [o.url("/redirect/1")])
    d.poll_until(lambda: spool.has_summary("h.txt"), 10, "the batch to complete")
    assert d.stop() == 0
    (rec,) = spool.records("h.txt")
    assert rec["status"] == "ok", rec
    reqs = o.snapshot()["requests"]
    assert len(reqs) == 2
    for r in reqs:
        assert (r.header("cookie"), r.header("authorization"), r.header("x-api-key")) == \
            ("consent=s3cret", "Bearer s3cret", "s3cret-too"), r.headers
    assert "s3cret" not in d.stderr_text()



@pytest.mark.parametrize("mode", ["daemon", "check"])
def test_62_14_a_key_set_twice_names_both_lines(harvestd, spool, tmp_path, mode):
    """A directive given twice (in either spelling) would let the last one win unseen: it is an
    error naming the second line and the first, whether the daemon starts or --check-config
    checks; so is a [host] key given twice for one host."""
    path = write(tmp_path / "d.conf", good_lines(spool) + ["max_bytes = 1m", "concurrency = 16"])
    rc, stderr = refused_config(harvestd, spool, path, mode)
    assert_config_error(rc, stderr, path, 9, "concurrency: already set on line 6")
    path = write(tmp_path / "h.conf", good_lines(spool) + [
        '[host "a.test"]', "per_host = 1", '[host "b.test"]', "per_host = 2", '[host "A.test"]',
        "per-host = 3"])
    rc, stderr = refused_config(harvestd, spool, path, mode)
    assert_config_error(rc, stderr, path, 13, 'per_host: already set on line 9, in [host "a.test"]')


# ---------------------------------------------------------------------------- make run


def test_62_13_make_run_passes_args_after_the_config():
    """`make run ARGS='...'`: the daemon's command line is the development config followed by
    ARGS, so that they override it (a metrics port, a log level). `make -n` prints the commands
    without running any: nothing is installed, built or dropped into var/."""
    if not HARVESTD_BIN:
        pytest.skip("HARVESTD_BIN is not set")
    build = os.path.relpath(os.path.dirname(HARVESTD_BIN), REPO)
    if build.startswith(".."):
        pytest.skip("HARVESTD_BIN is not inside the source tree")
    args = "--metrics-listen 127.0.0.1:9500 --log-level debug"
    done = subprocess.run(["make", "-n", "-C", REPO, "--no-print-directory", "run",
                           "BUILD=%s" % build, "ARGS=%s" % args],
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=60)
    out = done.stdout.decode(errors="replace")
    assert done.returncode == 0, out
    daemon = [shlex.split(line) for line in out.splitlines()
              if line.startswith("./%s/harvestd -c " % build)]  # not the manual's generation
    assert daemon == [["./%s/harvestd" % build, "-c", "conf/harvestd-dev.conf"] + args.split()], out
