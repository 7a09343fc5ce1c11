"""`harvestd enqueue` and `harvestd status` against a real redis-server (redisd.py) of each
test's own, on 127.0.0.1: the entries and the batch hash (streamkeys.h), reruns and an
enqueue killed half-way, standard input, usage errors, Redis failures (and a scripted server's
replies over the bounds of redis.h), and the progress that status reports from batch hashes
and pending entries the tests make themselves."""

import json
import os
import re
import signal
import socket
import subprocess
import time

import pytest

from harness import HARVESTD_BIN, SANITIZER, SLOWDOWN, check_sanitizer, launcher, vm_kib
from origin import free_port
from redisd import ScriptedRedis, flood

STREAM = "harvestd:urls"
GROUP = "harvestd"


def run(harvestd, *args, input=None, timeout=60):
    """Run harvestd with `args` (stdin: the bytes `input`, else /dev/null); the stderr check of
    every run applies. Returns a CompletedProcess with text stdout and stderr."""
    argv = [HARVESTD_BIN] + [str(a) for a in args]
    done = subprocess.run(argv, input=input if input is not None else b"",
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=harvestd.env,
                          timeout=timeout * SLOWDOWN)
    done.stdout = done.stdout.decode("utf-8", "replace")
    done.stderr = done.stderr.decode("utf-8", "replace")
    print("$ " + " ".join(argv) + "\n-> %d\nstdout: %s\nstderr: %s"
          % (done.returncode, done.stdout, done.stderr))
    check_sanitizer(done.stderr)
    return done


def enqueue(harvestd, server, *args, input=None):
    return run(harvestd, "enqueue", "--redis", server.url, *args, input=input)


def status(harvestd, server, *args):
    return run(harvestd, "status", "--redis", server.url, *args)


def write(tmp_path, name, data):
    path = tmp_path / name
    path.write_bytes(data if isinstance(data, bytes) else data.encode("utf-8"))
    return str(path)


def fields(flat):
    """A flat [k1, v1, k2, v2...] reply as a dict."""
    return dict(zip(flat[0::2], flat[1::2]))


def entries(client, stream=STREAM, page=10000):
    """Every entry of the stream, in order, as (id, fields)."""
    out, start = [], "-"
    while True:
        got = client.call("XRANGE", stream, start, "+", "COUNT", page)
        out += [(e[0], fields(e[1])) for e in got]
        if len(got) < page:
            return out
        start = "(" + got[-1][0]


def batch_hash(client, batch, stream=STREAM):
    return fields(client.call("HGETALL", "%s:batch:%s" % (stream, batch)))


def summary(batch, added, already, total, stream=STREAM):
    return ("harvestd: enqueued batch %s on %s: %d lines added (%d already there), total %d\n"
            % (batch, stream, added, already, total))


def assert_usage(done, what):
    assert done.returncode == 2, done
    assert done.stdout == ""
    assert done.stderr.startswith("harvestd: "), done.stderr
    assert what in done.stderr, done.stderr
    assert "Try 'harvestd %s --help'." % done.args[1] in done.stderr, done.stderr


# ------------------------------------------------------------------------------ enqueue


LINE_RULES_INPUT = (b"http://a.test/1\n"
                    b"\n"
                    b"# a comment\n"
                    b"   http://a.test/4   \n"
                    b"http://a.test/5\r\n"
                    b"\t\r\n"
                    b"  # an indented comment\n"
                    b"\thttp://a.test/8?q=1#frag\t\r\n"
                    b"not a url at all\n"
                    b"\n"
                    b"http://a.test/11")  # no newline at the end

LINE_RULES_EXPECTED = [(1, "http://a.test/1"), (4, "http://a.test/4"), (5, "http://a.test/5"),
                       (8, "http://a.test/8?q=1#frag"), (9, "not a url at all"),
                       (11, "http://a.test/11")]


def test_90_01_enqueue_line_rules(harvestd, redis_server, tmp_path):
    path = write(tmp_path, "urls.txt", LINE_RULES_INPUT)
    done = enqueue(harvestd, redis_server, path)
    assert done.returncode == 0, done
    assert done.stdout == summary("urls.txt", 6, 0, 6)
    assert done.stderr == ""
    with redis_server.client() as c:
        got = entries(c)
        assert [(int(f["line"]), f["url"]) for _, f in got] == LINE_RULES_EXPECTED
        for _, f in got:
            assert set(f) == {"batch", "line", "url"}, f  # no rules field without --rules
            assert f["batch"] == "urls.txt"
        assert batch_hash(c, "urls.txt") == {"added": "6", "total": "6", "rules": ""}
        assert c.call("SMEMBERS", STREAM + ":batches") == ["urls.txt"]
        assert c.call("TYPE", STREAM) == "stream"


def test_90_02_rerun_adds_nothing_and_rules_stick(harvestd, redis_server, tmp_path):
    path = write(tmp_path, "list", "".join("http://r.test/%d\n" % i for i in range(1, 1201)))
    done = enqueue(harvestd, redis_server, "--rules", "news", "--stream", "s", path)
    assert done.returncode == 0, done
    assert done.stdout == summary("list", 1200, 0, 1200, stream="s")
    with redis_server.client() as c:
        got = entries(c, "s")
        assert len(got) == 1200
        assert all(f["rules"] == "news" and f["batch"] == "list" for _, f in got)
        assert batch_hash(c, "list", "s") == {"added": "1200", "total": "1200", "rules": "news"}

        again = enqueue(harvestd, redis_server, "--rules", "news", "--stream", "s", path)
        assert again.returncode == 0, again
        assert again.stdout == summary("list", 0, 1200, 1200, stream="s")
        assert "resuming: 1200 lines already added" in again.stderr
        assert c.call("XLEN", "s") == 1200

        # A batch has one rules set: another, or none, is refused before anything is added.
        for other in (["--rules", "sport"], []):
            refused = enqueue(harvestd, redis_server, *other, "--stream", "s", path)
            assert refused.returncode == 2, refused
            assert refused.stdout == ""
            assert "batch list was enqueued with rules 'news'" in refused.stderr
            assert c.call("XLEN", "s") == 1200
            assert batch_hash(c, "list", "s")["rules"] == "news"

        # The same file under another batch name is another batch.
        other = enqueue(harvestd, redis_server, "--stream", "s", "--batch", "list-2", path)
        assert other.returncode == 0, other
        assert other.stdout == summary("list-2", 1200, 0, 1200, stream="s")
        assert sorted(c.call("SMEMBERS", "s:batches")) == ["list", "list-2"]
        assert batch_hash(c, "list-2", "s")["rules"] == ""


def wait_for(predicate, timeout, what, proc=None):
    deadline = time.monotonic() + timeout * SLOWDOWN
    while True:
        value = predicate()
        if value:
            return value
        if proc is not None and proc.poll() is not None:
            pytest.fail("harvestd exited (%s) while waiting for %s" % (proc.returncode, what))
        if time.monotonic() > deadline:
            pytest.fail("timed out waiting for %s" % what)
        time.sleep(0.002)


def start_enqueue(harvestd, server, tmp_path, *args):
    argv = [HARVESTD_BIN, "enqueue", "--redis", server.url] + [str(a) for a in args]
    err = open(tmp_path / "enqueue.stderr", "w+b")
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=err, env=harvestd.env)
    return proc, err


def stderr_of(proc, err):
    proc.wait(timeout=30 * SLOWDOWN)
    err.seek(0)
    text = err.read().decode("utf-8", "replace")
    err.close()
    print("enqueue -> %s\nstderr: %s" % (proc.returncode, text))
    check_sanitizer(text)
    return text


def url_of(i):
    return "http://big.test/%d/%s" % (i, "p" * (i % 50))


def test_90_03_killed_enqueue_then_rerun_adds_each_line_once(harvestd, redis_server, tmp_path):
    n = 200000
    # A blank line and a comment now and then: line numbers are physical, not URL counts.
    lines, expect = [], {}
    for i in range(1, n + 1):
        if i % 1000 == 0:
            lines.append("# comment %d" % i if i % 2000 == 0 else "")
        else:
            expect[i] = url_of(i)
            lines.append(url_of(i))
    path = write(tmp_path, "big.txt", "\n".join(lines) + "\n")
    with redis_server.client() as c:
        proc, err = start_enqueue(harvestd, redis_server, tmp_path, path)
        try:
            wait_for(lambda: c.call("XLEN", STREAM) > 0, 30, "the first entries", proc)
            # Well before the end, so that the rerun has work left.
            wait_for(lambda: c.call("XLEN", STREAM) >= 5000, 30, "5000 entries", proc)
            proc.send_signal(signal.SIGKILL)
        finally:
            if proc.poll() is None:
                proc.kill()
            stderr_of(proc, err)
        assert proc.returncode == -signal.SIGKILL
        had = c.call("XLEN", STREAM)
        assert 0 < had < len(expect), "the enqueue was not interrupted half-way (%d)" % had
        # Chunks are atomic: the count and the entries agree whenever the process died.
        h = batch_hash(c, "big.txt")
        assert int(h["added"]) == had
        assert "total" not in h

        done = enqueue(harvestd, redis_server, path)
        assert done.returncode == 0, done
        assert "resuming: %d lines already added" % had in done.stderr
        assert done.stdout == summary("big.txt", len(expect) - had, had, len(expect))

        got = entries(c)
        assert len(got) == len(expect)
        seen = {}
        for _, f in got:
            line = int(f["line"])
            assert line not in seen, "line %d added twice" % line
            seen[line] = f["url"]
            assert f["batch"] == "big.txt"
        assert seen == expect
        assert batch_hash(c, "big.txt") == {"added": str(len(expect)), "total": str(len(expect)),
                                            "rules": ""}


def test_90_04_concurrent_enqueue_is_refused_at_its_next_chunk(harvestd, redis_server, tmp_path):
    """Another enqueue of the batch (here: the test bumping `added`, as one would) makes the
    running one stop at its next chunk, without adding a line twice."""
    path = write(tmp_path, "race.txt", "".join(url_of(i) + "\n" for i in range(1, 200001)))
    with redis_server.client() as c:
        proc, err = start_enqueue(harvestd, redis_server, tmp_path, path)
        try:
            wait_for(lambda: c.call("XLEN", STREAM) > 0, 30, "the first entries", proc)
            c.call("HINCRBY", STREAM + ":batch:race.txt", "added", 1)
            proc.wait(timeout=30 * SLOWDOWN)
        finally:
            if proc.poll() is None:
                proc.kill()
            text = stderr_of(proc, err)
        assert proc.returncode == 1, text
        assert "another enqueue of the batch is running" in text
        assert int(batch_hash(c, "race.txt")["added"]) == c.call("XLEN", STREAM) + 1


def test_90_05_script_cache_flushed_mid_run(harvestd, redis_server, tmp_path):
    """SCRIPT FLUSH while enqueue runs: the next chunk's EVALSHA gets NOSCRIPT, and the chunk
    goes again with the script's text."""
    n = 100000
    path = write(tmp_path, "flush.txt", "".join(url_of(i) + "\n" for i in range(1, n + 1)))
    with redis_server.client() as c:
        proc, err = start_enqueue(harvestd, redis_server, tmp_path, path)
        try:
            wait_for(lambda: c.call("XLEN", STREAM) > 0, 30, "the first entries", proc)
            assert c.call("SCRIPT", "FLUSH") == "OK"
            proc.wait(timeout=30 * SLOWDOWN)
        finally:
            if proc.poll() is None:
                proc.kill()
            text = stderr_of(proc, err)
        assert proc.returncode == 0, text
        assert "cmdstat_eval:calls=" in c.call("INFO", "commandstats")  # the fallback ran
        lines = sorted(int(f["line"]) for _, f in entries(c))
        assert lines == list(range(1, n + 1))
        assert batch_hash(c, "flush.txt")["total"] == str(n)


def test_90_06_standard_input(harvestd, redis_server, tmp_path):
    done = enqueue(harvestd, redis_server, "--batch", "from-stdin", "-", input=LINE_RULES_INPUT)
    assert done.returncode == 0, done
    assert done.stdout == summary("from-stdin", 6, 0, 6)
    with redis_server.client() as c:
        assert [(int(f["line"]), f["url"]) for _, f in entries(c)] == LINE_RULES_EXPECTED
        assert {f["batch"] for _, f in entries(c)} == {"from-stdin"}

    refused = enqueue(harvestd, redis_server, "-", input=LINE_RULES_INPUT)
    assert_usage(refused, "standard input needs --batch NAME")


def test_90_07_options_in_both_spellings_and_db(harvestd, redis_server, tmp_path):
    path = write(tmp_path, "dir-name.txt", "http://db.test/1\nhttp://db.test/2\n")
    done = run(harvestd, "enqueue", "--redis=%s/3" % redis_server.url, "--stream=q",
               "--batch=b 1", "--rules=r", "--timeout=5s", "--", path)
    assert done.returncode == 0, done
    assert done.stdout == summary("b 1", 2, 0, 2, stream="q")
    with redis_server.client() as c:
        assert c.call("DBSIZE") == 0  # database 0 untouched
        c.call("SELECT", 3)
        assert c.call("XLEN", "q") == 2
        assert batch_hash(c, "b 1", "q") == {"added": "2", "total": "2", "rules": "r"}
    st = status(harvestd, redis_server, "--stream", "q")
    assert st.returncode == 0, st  # database 0 holds no batch: nothing incomplete
    assert st.stdout == "group harvestd: not created yet\n"


def test_90_08_usage_errors(harvestd, redis_server, tmp_path):
    path = write(tmp_path, "u.txt", "http://u.test/\n")
    url = redis_server.url
    cases = [
        (["enqueue", path], "--redis redis://HOST[:PORT][/DB] is required"),
        (["enqueue", "--redis", "http://127.0.0.1:1", path], "is not a redis://HOST[:PORT][/DB] URL"),
        (["enqueue", "--redis", "redis://127.0.0.1:99999", path], "is not a redis://"),
        (["enqueue", "--redis", "redis://p@127.0.0.1", path], "the part before '@' needs a ':'"),
        (["enqueue", "--redis", url], "a FILE to enqueue is needed"),
        (["enqueue", "--redis", url, path, path], "one FILE at a time"),
        (["enqueue", "--redis", url, "--frobnicate", path], "unknown option '--frobnicate'"),
        (["enqueue", "--redis", url, "-x", path], "unknown option '-x'"),
        (["enqueue", "--redis", url, path, "--batch"], "option '--batch' needs a value"),
        (["enqueue", "--redis", url, "--help=yes", path], "takes no value"),
        (["enqueue", "--redis", url, "--batch", "", path], "is not a batch name"),
        (["enqueue", "--redis", url, "--batch", "a\tb", path], "is not a batch name"),
        (["enqueue", "--redis", url, "--batch", "x" * 201, path], "is not a batch name"),
        (["enqueue", "--redis", url, "--stream", "", path], "--stream: a name"),
        (["enqueue", "--redis", url, "--timeout", "soon", path], "--timeout: 'soon'"),
        (["enqueue", "--redis", url, "--timeout", "0", path], "--timeout: '0'"),
        (["enqueue", "--redis", url, str(tmp_path / "missing.txt")],
         "cannot open '%s': no such file or directory" % (tmp_path / "missing.txt")),
        (["enqueue", "--redis", url, str(tmp_path)], "is a directory"),
        (["status"], "--redis redis://HOST[:PORT][/DB] is required"),
        (["status", "--redis", "redis://"], "is not a redis://"),
        (["status", "--redis", url, "extra"], "status takes no arguments ('extra')"),
        (["status", "--redis", url, "--batch", "a\nb"], "is not a batch name"),
        (["status", "--redis", url, "--json=1"], "takes no value"),
        (["status", "--redis", url, "--group", ""], "--group: a name"),
        (["status", "--redis", url, "--verbose"], "unknown option '--verbose'"),
    ]
    for args, message in cases:
        assert_usage(run(harvestd, *args), message)
    with redis_server.client() as c:
        assert c.call("DBSIZE") == 0

    for cmd in ("enqueue", "status"):
        helped = run(harvestd, cmd, "--help")
        assert helped.returncode == 0, helped
        assert helped.stdout.startswith("usage: harvestd %s --redis" % cmd)
        assert helped.stderr == ""


def test_90_09_connection_refused(harvestd, tmp_path):
    port = free_port()
    path = write(tmp_path, "u.txt", "http://u.test/\n")
    for args in (["enqueue", "--redis", "redis://127.0.0.1:%d" % port, path],
                 ["status", "--redis", "redis://127.0.0.1:%d" % port]):
        done = run(harvestd, *args)
        assert done.returncode == 1, done
        assert done.stdout == ""
        assert done.stderr == ("harvestd: redis: cannot connect to redis://127.0.0.1:%d: "
                               "connection refused (ECONNREFUSED)\n" % port)


def test_90_10_no_reply_in_time(harvestd, tmp_path):
    """A server that accepts connections (the kernel does, from the listen queue) but never
    answers: each command has --timeout to get its reply."""
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        url = "redis://127.0.0.1:%d" % listener.getsockname()[1]
        path = write(tmp_path, "u.txt", "http://u.test/\n")
        for args in (["enqueue", "--redis", url, "--timeout", "300ms", path],
                     ["status", "--redis", url, "--timeout", "300ms"]):
            started = time.monotonic()
            done = run(harvestd, *args)
            assert done.returncode == 1, done
            assert re.match(r"harvestd: redis: TYPE harvestd:urls: no reply within 300 ms "
                            r"\(redis://127\.0\.0\.1:\d+\)\n$", done.stderr), done.stderr
            assert time.monotonic() - started < 5 * SLOWDOWN
    finally:
        listener.close()


def test_90_11_wrong_types(harvestd, redis_server, tmp_path):
    path = write(tmp_path, "b", "http://w.test/1\nhttp://w.test/2\n")
    with redis_server.client() as c:
        c.call("SET", STREAM, "x")
        done = enqueue(harvestd, redis_server, path)
        assert done.returncode == 1, done
        assert done.stdout == ""
        assert done.stderr == ("harvestd: redis: harvestd:urls is a string, not a stream (%s)\n"
                               % redis_server.url)
        assert c.call("GET", STREAM) == "x"
        assert c.call("EXISTS", STREAM + ":batch:b") == 0

        c.call("DEL", STREAM)
        c.call("SET", STREAM + ":batch:b", "x")
        done = enqueue(harvestd, redis_server, path)
        assert done.returncode == 1, done
        assert "harvestd:urls:batch:b is a string, not a hash" in done.stderr
        assert c.call("EXISTS", STREAM) == 0

        c.call("DEL", STREAM + ":batch:b")
        c.call("RPUSH", STREAM + ":batches", "b")
        done = enqueue(harvestd, redis_server, path)
        assert done.returncode == 1, done
        assert "harvestd:urls:batches is a list, not a set" in done.stderr
        assert c.call("EXISTS", STREAM) == 0

        c.call("DEL", STREAM + ":batches")
        c.call("HSET", STREAM + ":batch:b", "added", "many")
        done = enqueue(harvestd, redis_server, path)
        assert done.returncode == 1, done
        assert "harvestd:urls:batch:b: field added is not a count: 'many'" in done.stderr
        assert c.call("EXISTS", STREAM) == 0

        c.call("DEL", STREAM + ":batch:b")
        done = enqueue(harvestd, redis_server, path)
        assert done.returncode == 0, done


def test_90_12_file_changed_since_the_batch_was_enqueued(harvestd, redis_server, tmp_path):
    path = write(tmp_path, "f", "http://f.test/1\nhttp://f.test/2\nhttp://f.test/3\n")
    assert enqueue(harvestd, redis_server, path).returncode == 0
    with redis_server.client() as c:
        for data, message in (("http://f.test/1\nhttp://f.test/2\n", "has only 2"),
                              ("http://f.test/1\nhttp://f.test/2\nhttp://f.test/3\nhttp://f.test/4\n",
                               "has more")):
            write(tmp_path, "f", data)
            done = enqueue(harvestd, redis_server, path)
            assert done.returncode == 1, done
            assert "the file changed since the batch was enqueued" in done.stderr
            assert message in done.stderr
            assert c.call("XLEN", STREAM) == 3
            assert batch_hash(c, "f")["total"] == "3"


def test_90_13_empty_file_and_overlong_line(harvestd, redis_server, tmp_path):
    empty = write(tmp_path, "empty", "\n# nothing\n\n")
    done = enqueue(harvestd, redis_server, empty)
    assert done.returncode == 0, done
    assert done.stdout == summary("empty", 0, 0, 0)
    long_line = "http://l.test/" + "x" * 20000
    path = write(tmp_path, "long", "http://l.test/1\n%s\nhttp://l.test/3\n" % long_line)
    done = enqueue(harvestd, redis_server, path)
    assert done.returncode == 0, done
    with redis_server.client() as c:
        got = [f for _, f in entries(c) if f["batch"] == "long"]
        assert [int(f["line"]) for f in got] == [1, 2, 3]
        # Added as the reader keeps it (a prefix longer than any URL): the daemon fails it.
        assert long_line.startswith(got[1]["url"]) and 8192 < len(got[1]["url"]) < len(long_line)
        assert batch_hash(c, "empty") == {"added": "0", "total": "0", "rules": ""}
    st = status(harvestd, redis_server, "--batch", "empty")
    assert st.returncode == 0, st
    assert st.stdout.startswith("batch empty: added 0 total 0 done 0 pending 0 ok 0 failed 0 "
                                "complete\n")


def test_90_14_rules_checked_against_the_daemons_config(harvestd, redis_server, tmp_path):
    """With -c CONFIG, --rules must name a [rules "NAME"] set of that file: a typo is a usage
    error before anything reaches Redis (the daemons would fail every entry with
    unknown_rules). Without -c the name is taken as given."""
    conf = write(tmp_path, "harvestd.conf", "spool_dir = /var/spool/harvestd\n"
                 "[rules \"books\"]\ntitle = h1\n[rules \"news\"]\nheadline = h2\n")
    path = write(tmp_path, "list", "http://r.test/1\nhttp://r.test/2\n")
    refused = enqueue(harvestd, redis_server, "-c", conf, "--rules", "bookz", path)
    assert_usage(refused, "harvestd: --rules 'bookz': %s has no [rules \"bookz\"] section "
                          "(it has 'books', 'news')\n" % conf)
    broken = write(tmp_path, "broken.conf", "concurrency = 8\nconcurrency = 9\n")
    refused_too = enqueue(harvestd, redis_server, "--config", broken, "--rules", "books", path)
    assert_usage(refused_too, "harvestd: -c: %s:2: concurrency: already set on line 1\n" % broken)
    with redis_server.client() as c:
        assert c.call("EXISTS", STREAM, STREAM + ":batches", STREAM + ":batch:list") == 0

    done = enqueue(harvestd, redis_server, "-c", conf, "--rules", "books", path)
    assert done.returncode == 0, done
    assert done.stdout == summary("list", 2, 0, 2)
    unchecked = enqueue(harvestd, redis_server, "--rules", "bookz", "--batch", "typo", path)
    assert unchecked.returncode == 0, unchecked
    with redis_server.client() as c:
        assert batch_hash(c, "list")["rules"] == "books"
        assert batch_hash(c, "typo")["rules"] == "bookz"


# ------------------------------------------------------------------------------ status


def make_batches(harvestd, server, tmp_path):
    """Batch "alpha" (10 lines) and "beta" (4 lines), then consumerA takes 5 entries (alpha's
    lines 1-5) and consumerB 7 (alpha 6-10, beta 1-2)."""
    alpha = write(tmp_path, "alpha", "".join("http://alpha.test/%d\n" % i for i in range(1, 11)))
    beta = write(tmp_path, "beta", "".join("http://beta.test/%d\n" % i for i in range(1, 5)))
    assert enqueue(harvestd, server, alpha).returncode == 0
    assert enqueue(harvestd, server, "--rules", "r", beta).returncode == 0
    with server.client() as c:
        assert c.call("XGROUP", "CREATE", STREAM, GROUP, "0") == "OK"
        got = c.call("XREADGROUP", "GROUP", GROUP, "consumerA", "COUNT", 5, "STREAMS", STREAM, ">")
        assert len(got[0][1]) == 5
        got = c.call("XREADGROUP", "GROUP", GROUP, "consumerB", "COUNT", 7, "STREAMS", STREAM, ">")
        assert len(got[0][1]) == 7
        c.call("HSET", STREAM + ":batch:beta", "done", 1, "ok", 1, "failed", 0)


# A consumer's idle time, as status prints it: whole seconds and tenths.
IDLE_TEXT = r" idle \d+\.\ds"


def without_idle(text):
    """status's text with each consumer's idle time taken out (it is the server's clock's)."""
    return re.sub(IDLE_TEXT + "$", "", text, flags=re.M)


def consumers_of(doc):
    """{name: pending} of a --json document, each idle_ms checked to be a count."""
    out = {}
    for name, c in doc["consumers"].items():
        assert set(c) == {"pending", "idle_ms"}, c
        assert isinstance(c["idle_ms"], int) and c["idle_ms"] >= 0, c
        out[name] = c["pending"]
    return out


def test_90_20_status_text_and_json(harvestd, redis_server, tmp_path):
    make_batches(harvestd, redis_server, tmp_path)
    st = status(harvestd, redis_server)
    assert st.returncode == 3, st
    assert st.stderr == ""
    consumer_lines = [line for line in st.stdout.splitlines() if line.startswith("consumer ")]
    assert len(consumer_lines) == 2 and all(re.search(IDLE_TEXT + "$", line)
                                            for line in consumer_lines), st.stdout
    assert without_idle(st.stdout) == (
        "batch alpha: added 10 total 10 done 0 pending 10 ok 0 failed 0 incomplete "
        "holders: consumerA=5 consumerB=5\n"
        "batch beta: added 4 total 4 done 1 pending 2 ok 1 failed 0 incomplete "
        "holders: consumerB=2\n"
        "group harvestd: pending 12 lag 2 consumers 2\n"
        "consumer consumerA: pending 5\n"
        "consumer consumerB: pending 7\n")

    st = status(harvestd, redis_server, "--json")
    assert st.returncode == 3, st
    assert st.stdout.count("\n") == 1
    doc = json.loads(st.stdout)
    assert consumers_of(doc) == {"consumerA": 5, "consumerB": 7}
    doc["consumers"] = consumers_of(doc)
    assert doc == {
        "stream": STREAM, "group": GROUP, "group_exists": True, "pending": 12, "lag": 2,
        "batches": [
            {"name": "alpha", "added": 10, "total": 10, "done": 0, "pending": 10, "ok": 0,
             "failed": 0, "complete": False, "holders": {"consumerA": 5, "consumerB": 5}},
            {"name": "beta", "added": 4, "total": 4, "done": 1, "pending": 2, "ok": 1,
             "failed": 0, "complete": False, "holders": {"consumerB": 2}},
        ],
        "consumers": {"consumerA": 5, "consumerB": 7},
    }

    # --batch: those only, in the order given; an unknown one is not complete.
    st = status(harvestd, redis_server, "--batch", "beta", "--batch", "nope", "--batch", "beta")
    assert st.returncode == 3, st
    lines = st.stdout.splitlines()
    assert lines[0].startswith("batch beta: added 4 total 4 done 1 pending 2 ")
    assert lines[1] == "batch nope: unknown"
    assert lines[2].startswith("group harvestd: pending 12")
    doc = json.loads(status(harvestd, redis_server, "--json", "--batch", "nope").stdout)
    assert doc["batches"] == [{"name": "nope", "unknown": True, "added": 0, "total": None,
                               "done": 0, "pending": 0, "ok": 0, "failed": 0,
                               "complete": False, "holders": {}}]

    # The daemons finish: every entry acknowledged, done = total.
    with redis_server.client() as c:
        ids = [e[0] for e in c.call("XPENDING", STREAM, GROUP, "-", "+", 100)]
        assert len(ids) == 12
        assert c.call("XACK", STREAM, GROUP, *ids) == 12
        c.call("HSET", STREAM + ":batch:alpha", "done", 10, "ok", 9, "failed", 1)
        c.call("HSET", STREAM + ":batch:beta", "done", 3, "ok", 3)
        st = status(harvestd, redis_server, "--batch", "alpha")
        assert st.returncode == 0, st
        # The consumers hold nothing now, and are still the group's.
        assert without_idle(st.stdout) == (
            "batch alpha: added 10 total 10 done 10 pending 0 ok 9 failed 1 complete\n"
            "group harvestd: pending 0 lag 2 consumers 2\n"
            "consumer consumerA: pending 0\n"
            "consumer consumerB: pending 0\n")
        assert status(harvestd, redis_server).returncode == 3  # beta: 3 of 4 done
        c.call("HSET", STREAM + ":batch:beta", "done", 4, "ok", 4)
        st = status(harvestd, redis_server, "--json")
        assert st.returncode == 0, st
        doc = json.loads(st.stdout)
        assert [b["complete"] for b in doc["batches"]] == [True, True]
        assert consumers_of(doc) == {"consumerA": 0, "consumerB": 0} and doc["pending"] == 0


def test_90_21_status_pages_through_many_pending_entries(harvestd, redis_server, tmp_path):
    """More pending entries than one XPENDING page (1000), of interleaved batches."""
    with redis_server.client() as c:
        for i in range(1, 2601):
            c.call("XADD", STREAM, "*", "batch", "odd" if i % 2 else "even", "line", i, "url", "u")
        for name in ("odd", "even"):
            c.call("HSET", STREAM + ":batch:" + name, "added", 1300, "total", 1300, "rules", "")
            c.call("SADD", STREAM + ":batches", name)
        c.call("XGROUP", "CREATE", STREAM, GROUP, "0")
        c.call("XREADGROUP", "GROUP", GROUP, "a:/spool", "COUNT", 2001, "STREAMS", STREAM, ">")
        c.call("XREADGROUP", "GROUP", GROUP, "b:/spool", "COUNT", 99, "STREAMS", STREAM, ">")
        # An entry deleted from the stream while pending is no batch's.
        first = c.call("XRANGE", STREAM, "-", "+", "COUNT", 1)[0][0]
        c.call("XDEL", STREAM, first)
    doc = json.loads(status(harvestd, redis_server, "--json").stdout)
    by_name = {b["name"]: b for b in doc["batches"]}
    assert by_name["even"]["pending"] == 1050
    assert by_name["even"]["holders"] == {"a:/spool": 1000, "b:/spool": 50}
    assert by_name["odd"]["pending"] == 1049
    assert by_name["odd"]["holders"] == {"a:/spool": 1000, "b:/spool": 49}
    assert consumers_of(doc) == {"a:/spool": 2001, "b:/spool": 99}
    assert doc["pending"] == 2100
    st = status(harvestd, redis_server)
    assert "batch even: added 1300 total 1300 done 0 pending 1050 ok 0 failed 0 incomplete " \
           "holders: a:/spool=1000 b:/spool=50\n" in st.stdout
    assert "(1 pending entries no longer in the stream)" in st.stdout


def test_90_22_status_before_the_group_exists(harvestd, redis_server, tmp_path):
    # Nothing at all: no batch, so none incomplete.
    st = status(harvestd, redis_server)
    assert st.returncode == 0, st
    assert st.stdout == "group harvestd: not created yet\n"
    doc = json.loads(status(harvestd, redis_server, "--json").stdout)
    assert doc == {"stream": STREAM, "group": GROUP, "group_exists": False, "pending": 0,
                   "lag": None, "batches": [], "consumers": {}}

    path = write(tmp_path, "early", "http://e.test/1\nhttp://e.test/2\n")
    assert enqueue(harvestd, redis_server, path).returncode == 0
    st = status(harvestd, redis_server, "--group", "later")
    assert st.returncode == 3, st
    assert st.stdout == ("batch early: added 2 total 2 done 0 pending 0 ok 0 failed 0 incomplete\n"
                         "group later: not created yet\n")
    with redis_server.client() as c:
        c.call("XGROUP", "CREATE", STREAM, "other", "0")  # a group, but not this one
        c.call("HSET", STREAM + ":batch:early", "done", 2, "ok", 2)
    st = status(harvestd, redis_server, "--group", "later")
    assert st.returncode == 0, st
    assert st.stdout.endswith("complete\ngroup later: not created yet\n")
    # Without a total (an enqueue still reading its file) a batch is never complete.
    with redis_server.client() as c:
        c.call("HDEL", STREAM + ":batch:early", "total")
    st = status(harvestd, redis_server, "--json")
    assert st.returncode == 3
    assert json.loads(st.stdout)["batches"][0]["total"] is None


def test_90_23_status_wrong_types(harvestd, redis_server, tmp_path):
    with redis_server.client() as c:
        c.call("SET", STREAM, "x")
        st = status(harvestd, redis_server)
        assert st.returncode == 1, st
        assert st.stdout == ""
        assert st.stderr == ("harvestd: redis: harvestd:urls is a string, not a stream (%s)\n"
                             % redis_server.url)
        c.call("DEL", STREAM)
        c.call("SADD", STREAM + ":batches", "b")
        c.call("RPUSH", STREAM + ":batch:b", "x")
        st = status(harvestd, redis_server, "--json")
        assert st.returncode == 1, st
        assert st.stdout == ""
        assert "harvestd:urls:batch:b is a list, not a hash" in st.stderr
        c.call("DEL", STREAM + ":batch:b")
        c.call("SET", STREAM + ":batches", "x")
        st = status(harvestd, redis_server)
        assert st.returncode == 1, st
        assert "harvestd:urls:batches is a string, not a set" in st.stderr


def test_90_24_redis_fixture_restart(redis_server):
    """The fixture itself: a killed server restarts on its port (nothing saved), stop() twice."""
    port = redis_server.port
    with redis_server.client() as c:
        assert c.call("SET", "k", "v") == "OK"
        with pytest.raises(Exception) as e:
            c.call("HGET", "k", "f")
        assert "WRONGTYPE" in str(e.value)
        assert c.call("GET", "missing") is None
        assert c.call("MGET", "k", "missing") == ["v", None]
    redis_server.kill()
    redis_server.restart()
    assert redis_server.port == port
    with redis_server.client() as c:
        assert c.call("EXISTS", "k") == 0
    redis_server.stop()
    redis_server.stop()
    assert not os.path.exists(os.path.join(redis_server.dir, "dump.rdb"))


# Resident memory `status` may reach while a server floods it (a plain build; sanitizer builds
# are not held to it): its own few megabytes, with room, and far below the flood.
FLOOD_RSS_KIB = 64 * 1024


def test_90_25_status_refuses_a_reply_over_the_bounds(harvestd, tmp_path):
    """A server that answers the first command (TYPE) with "$99999999999" and then filler for
    as long as it is read (up to 1 GiB): status stops at the header, says which bound the
    reply broke, exits 1, and its memory does not follow the flood (its peak RSS is measured
    by the harness's launcher; while it runs, a status past the bound is killed at once)."""
    wrapper = launcher()
    with ScriptedRedis({"TYPE": flood(b"$99999999999\r\n")}) as server:
        argv = [HARVESTD_BIN, "status", "--redis", server.url]
        out, err, rss = tmp_path / "status.out", tmp_path / "status.err", tmp_path / "status.rss"
        with open(out, "wb") as o, open(err, "wb") as e:
            proc = subprocess.Popen(([wrapper, str(rss)] if wrapper else []) + argv,
                                    stdin=subprocess.DEVNULL, stdout=o, stderr=e,
                                    env=harvestd.env, start_new_session=True)
        deadline = time.monotonic() + 30 * SLOWDOWN
        while proc.poll() is None:
            status_pid = proc.pid
            if wrapper:
                try:
                    with open("/proc/%d/task/%d/children" % (proc.pid, proc.pid)) as f:
                        status_pid = int(f.read().split()[0])
                except (OSError, IndexError, ValueError):
                    pass
            now = vm_kib(status_pid)
            if (now > FLOOD_RSS_KIB and not SANITIZER) or time.monotonic() > deadline:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
                pytest.fail("status at %d KiB after %.1f s: %s"
                            % (now, time.monotonic() - deadline + 30 * SLOWDOWN, err.read_text()))
            time.sleep(0.01)
    stderr = err.read_text()
    peak = int(rss.read_text()) if wrapper else 0
    print("$ %s\n-> %d, peak RSS %d KiB, filler sent: %s\nstderr: %s"
          % (" ".join(argv), proc.returncode, peak, server.floods, stderr))
    check_sanitizer(stderr)
    assert proc.returncode == 1
    assert out.read_text() == ""
    assert stderr == ("harvestd: redis: TYPE harvestd:urls: the reply is over harvestd's limit: "
                      "a bulk string longer than 1048576 bytes (%s)\n" % server.url)
    if wrapper and not SANITIZER:
        assert 0 < peak < FLOOD_RSS_KIB
    assert len(server.floods) == 1 and server.floods[0] < 64 << 20  # cut short


def test_90_26_status_reads_the_batch_set_a_page_at_a_time(harvestd, redis_server):
    """The set of batches is read with SSCAN, about 1000 names a reply, so that each reply
    stays within the bounds of redis.h however many batches a stream has had: every name once,
    in order."""
    names = ["batch-%04d" % i for i in range(2500)]
    with redis_server.client() as c:
        for start in range(0, len(names), 500):
            c.call("SADD", STREAM + ":batches", *names[start:start + 500])
        c.call("CONFIG", "RESETSTAT")
        doc = json.loads(status(harvestd, redis_server, "--json").stdout)
        stats = c.call("INFO", "commandstats")
    assert [b["name"] for b in doc["batches"]] == names
    sscans = re.search(r"cmdstat_sscan:calls=(\d+)", stats)
    assert sscans and int(sscans.group(1)) >= 3, stats
    assert "cmdstat_smembers" not in stats


def test_90_27_status_lists_every_consumer_of_the_group(harvestd, redis_server, start_daemon,
                                                        tmp_path):
    """Every consumer of the group is listed (XINFO CONSUMERS), with its pending count and idle
    time, those holding nothing included: a daemon that acknowledged all it read is still one
    of the group's consumers (status used to list only consumers holding entries: "consumers
    0" with daemons connected)."""
    path = write(tmp_path, "one", "not a url\n")  # recorded as failed at once: no request
    assert enqueue(harvestd, redis_server, path).returncode == 0
    with redis_server.client() as c:
        c.call("XGROUP", "CREATE", STREAM, GROUP, "0")
        assert c.call("XGROUP", "CREATECONSUMER", STREAM, GROUP, "standby") == 1
    created = time.monotonic()
    d = start_daemon(source="redis", redis_url=redis_server.url, redis_consumer="node-1")
    deadline = time.monotonic() + 10 * SLOWDOWN
    with redis_server.client() as c:
        while batch_hash(c, "one").get("done") != "1":
            assert d.running(), d.stderr_text()[-3000:]
            assert time.monotonic() < deadline, "the entry was not acknowledged"
            time.sleep(0.05)
    st = status(harvestd, redis_server)
    assert st.returncode == 0, st
    assert without_idle(st.stdout) == (
        "batch one: added 1 total 1 done 1 pending 0 ok 0 failed 1 complete\n"
        "group harvestd: pending 0 lag 0 consumers 2\n"
        "consumer node-1: pending 0\n"
        "consumer standby: pending 0\n"), st.stdout
    asked = time.monotonic()
    doc = json.loads(status(harvestd, redis_server, "--json").stdout)
    assert consumers_of(doc) == {"node-1": 0, "standby": 0}
    # "standby" has done nothing since it was made (before `created`).
    assert doc["consumers"]["standby"]["idle_ms"] >= int((asked - created) * 1000), doc
    assert d.stop() == 0


def test_90_28_status_refuses_consumers_of_the_wrong_shape(harvestd):
    """A server whose XINFO CONSUMERS reply is not a list of consumers, each a list of fields
    (hostile, or another protocol): status exits 1 naming the command and what is wrong,
    prints nothing, and never reads past the fault (the sanitizers watch each run)."""
    base = {"TYPE harvestd:urls": b"+stream\r\n", "TYPE": b"+none\r\n",
            "SSCAN": b"*2\r\n$1\r\n0\r\n*0\r\n", "XLEN": b":0\r\n",
            "XPENDING": b"*4\r\n:0\r\n$-1\r\n$-1\r\n*-1\r\n", "XINFO GROUPS": b"*0\r\n"}
    cases = [
        (b"$2\r\nno\r\n", "not an array (type 1)"),
        (b"*1\r\n:7\r\n", "consumer 1 is not a list of fields (type 3, 0 elements)"),
        (b"*1\r\n*3\r\n$4\r\nname\r\n$1\r\na\r\n$7\r\npending\r\n",
         "consumer 1 is not a list of fields (type 2, 3 elements)"),
        (b"*1\r\n*2\r\n*1\r\n$1\r\nx\r\n$1\r\na\r\n", "consumer 1: a field name of type 2"),
        (b"*1\r\n*2\r\n$7\r\npending\r\n:1\r\n", "consumer 1 has no name"),
        (b"*1\r\n*4\r\n$4\r\nname\r\n$1\r\na\r\n$7\r\npending\r\n:-3\r\n",
         "consumer 1 has no pending count"),
    ]
    for reply, why in cases:
        with ScriptedRedis(dict(base, **{"XINFO CONSUMERS": reply})) as server:
            st = status(harvestd, server)
        assert st.returncode == 1, st
        assert st.stdout == ""
        assert st.stderr == ("harvestd: redis: XINFO CONSUMERS: unexpected reply: %s (%s)\n"
                             % (why, server.url)), st.stderr
    # The same server with a well-formed reply: the consumer is shown.
    good = b"*1\r\n*6\r\n$4\r\nname\r\n$1\r\na\r\n$7\r\npending\r\n:0\r\n$4\r\nidle\r\n:1500\r\n"
    with ScriptedRedis(dict(base, **{"XINFO CONSUMERS": good})) as server:
        st = status(harvestd, server)
    assert st.returncode == 0, st
    assert st.stdout == "group harvestd: pending 0 consumers 1\nconsumer a: pending 0 idle 1.5s\n"
