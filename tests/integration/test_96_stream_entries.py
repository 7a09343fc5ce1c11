"""Stream entries nobody checked: added with XADD by hand or by another tool, with batch names
that `enqueue` would spell differently. A real redis-server of the test's own on 127.0.0.1;
what is checked is that no such entry can stop a daemon, and that merge finds its records."""

import json
import os
import resource
import signal
import subprocess

import pytest

from harness import SLOWDOWN

from redisd import REDIS_SERVER
from test_92_stream import batch_hash, stream_config, wait_for, xadd_lines

pytestmark = pytest.mark.skipif(not REDIS_SERVER, reason="redis-server is not installed")

# 24 CJK characters and ".txt": 76 bytes, 220 once spelled for a file name (%XX a byte).
CJK = "\u6570\u636e\u6293\u53d6\u4efb\u52a1" * 4 + ".txt"


def test_96_01_a_batch_name_too_long_for_a_file_name(redis_server, start_daemon, spool, origin,
                                                      harvestd, tmp_path):
    """The name's spelling with the default consumer (HOSTNAME:SPOOL_DIR) is longer than a file
    name may be: creating the output failed with ENAMETOOLONG, fatal, at every restart. The
    output name is now shortened with a hash of the whole name; the daemon goes on, and merge
    finds the output by the batch's name."""
    c = redis_server.client()
    lines = xadd_lines(c, CJK, [origin.url("/page?title=n%d" % i) for i in range(3)])
    xadd_lines(c, "plain", [origin.url("/page?title=p")])
    d = start_daemon(**stream_config(redis_server))
    wait_for(lambda: batch_hash(c, CJK).get("done", 0) == 3 and
             batch_hash(c, "plain").get("done", 0) == 1, 20, "every entry acknowledged", [d])
    assert batch_hash(c, CJK)["ok"] == 3
    names = [n for n in os.listdir(spool.path("out")) if n.endswith(".jsonl")]
    assert len(names) == 2, names
    for n in names:
        assert len(n.encode()) + len(".crashes") - len(".jsonl") <= 255, n
    assert d.stop() == 0
    merged = tmp_path / "merged.jsonl"
    r = harvestd.command("merge", "--batch", CJK, "-o", merged, spool.root)
    assert r.returncode == 0, r.stderr
    recs = [json.loads(x) for x in merged.read_bytes().split(b"\n")[:-1]]
    assert sorted(r["line"] for r in recs) == sorted(lines)
    assert all(r["batch"] == CJK and r["status"] == "ok" for r in recs)


def test_96_02_two_long_names_alike_but_for_their_end(redis_server, start_daemon, spool, origin):
    """Two 10 KB batch names that differ only at their end shared one output and one counter
    (S:batch:?). Each now has its own output and its own counts."""
    c = redis_server.client()
    a, b = "x" * 9999 + "a", "x" * 9999 + "b"
    xadd_lines(c, a, [origin.url("/page?title=a%d" % i) for i in range(2)])
    xadd_lines(c, b, [origin.url("/page?title=b")])
    d = start_daemon(**stream_config(redis_server, redis_consumer="n"))
    wait_for(lambda: batch_hash(c, a).get("done", 0) == 2 and batch_hash(c, b).get("done", 0) == 1,
             20, "each batch's own acknowledgements", [d])
    assert c.call("EXISTS", "harvestd:urls:batch:?") == 0
    outs = sorted(n for n in os.listdir(spool.path("out")) if n.endswith(".jsonl"))
    assert len(outs) == 2, outs
    counts = sorted(len(open(spool.path("out", n), "rb").read().splitlines()) for n in outs)
    assert counts == [1, 2]
    assert d.stop() == 0


def xrange_all(client, key):
    """[(id, {field: value})] of a stream, values as bytes decoded with surrogateescape."""
    out = []
    for item in client.call("XRANGE", key, "-", "+") or []:
        fields = item[1]
        out.append((item[0], {fields[i]: fields[i + 1] for i in range(0, len(fields), 2)}))
    return out


def test_96_03_entries_no_batch_can_take_go_to_the_dead_letters(redis_server, start_daemon, spool,
                                                               origin, harvestd, tmp_path):
    """Entries added by hand: a batch name with a NUL (it joined the batch named by what comes
    before the NUL), lines that are no line number (-1, abc, 2^64, " 16", none: all became
    line 0, and 2^64-1 became -1, which merge then dropped). Each is moved to S:dead with its
    reason and acknowledged, atomically; the daemon goes on; the batch of the good entry
    merges to exactly its one record."""
    c = redis_server.client()
    good = origin.url("/page?title=good")
    c.call("XADD", "harvestd:urls", "*", "batch", "plain", "line", "1", "url", good)
    c.call("XADD", "harvestd:urls", "*", "batch", b"plain\x00x", "line", "2", "url", good)
    bad_lines = ["-1", "abc", "18446744073709551616", "18446744073709551615", " 16", "0"]
    for v in bad_lines:
        c.call("XADD", "harvestd:urls", "*", "batch", "plain", "line", v, "url", good)
    c.call("XADD", "harvestd:urls", "*", "batch", "plain", "url", good)  # no line at all
    total = 2 + len(bad_lines) + 1
    d = start_daemon(**stream_config(redis_server, redis_consumer="n", log_level="notice"))
    wait_for(lambda: len(xrange_all(c, "harvestd:urls:dead")) == total - 1, 20,
             "the dead letters", [d])
    wait_for(lambda: batch_hash(c, "plain").get("done", 0) == 1, 20, "the good entry", [d])
    wait_for(lambda: (c.call("XPENDING", "harvestd:urls", "harvestd") or [0])[0] == 0, 20,
             "nothing pending", [d])
    dead = xrange_all(c, "harvestd:urls:dead")
    reasons = sorted(f["reason"] for _, f in dead)
    assert reasons == ["batch_invalid"] + ["line_invalid"] * (len(bad_lines) + 1), reasons
    for _, f in dead:
        assert f["consumer"] == "n" and f["url"] == good and f["id"]
    assert any(f.get("batch") == "plain\x00x" for _, f in dead)
    assert d.running()
    assert len(d.events("stream_dead_letter")) == total - 1
    assert d.stop() == 0
    merged = tmp_path / "merged.jsonl"
    r = harvestd.command("merge", "--batch", "plain", "-o", merged, spool.root)
    assert r.returncode == 0, r.stderr
    recs = [json.loads(x) for x in merged.read_bytes().split(b"\n")[:-1]]
    assert [(r["line"], r["status"]) for r in recs] == [(1, "ok")]
    st = harvestd.command("status", "--redis", redis_server.url)
    assert "dead_letters %d" % (total - 1) in st.stdout, st.stdout


def test_96_04_an_entry_that_keeps_killing_daemons_is_poisoned(redis_server, start_daemon, spool,
                                                               origin, harvestd):
    """A page that crashes the parser kills the daemon that fetches it; its entry stays
    pending and is delivered again, to a daemon without the first one's crash note (here: the
    note removed, as when another daemon takes the entry over), which dies too. Once delivered
    more often than redis_max_deliveries (2 here), the entry is not processed again: its line
    gets a failed record (Poisoned), the entry goes to the dead letters with its
    acknowledgement, and its batch counts it as done, failed and dead, which status shows."""
    c = redis_server.client()
    marker = "poison-me"
    bad = origin.url("/page?title=" + marker)
    xadd_lines(c, "px", [bad])
    env = {"HARVESTD_TEST_PARSE_ABORT": marker}
    cfg = stream_config(redis_server, redis_consumer="n", parse_jobs="1", flush_ms="20ms",
                        redis_max_deliveries="2")
    note = spool.path("out", "px.n.crashes")
    core = resource.getrlimit(resource.RLIMIT_CORE)
    resource.setrlimit(resource.RLIMIT_CORE, (0, core[1]))
    try:
        for _ in range(2):
            d = start_daemon(env=env, **cfg)
            try:
                d.popen.wait(20 * SLOWDOWN)
            except subprocess.TimeoutExpired:
                pytest.fail("the daemon did not abort on the page\n" + d.stderr_text()[-3000:])
            assert d.popen.returncode == -signal.SIGABRT, d.stderr_text()[-3000:]
            d.rc = d.popen.returncode
            os.unlink(note)
        assert len(origin.find_request(marker)) == 2
        d = start_daemon(env=env, **cfg)
        wait_for(lambda: batch_hash(c, "px").get("done", 0) == 1, 20, "the poisoned entry", [d])
    finally:
        resource.setrlimit(resource.RLIMIT_CORE, core)
    assert len(origin.find_request(marker)) == 2, "the poisoned page was fetched again"
    h = batch_hash(c, "px")
    assert (h.get("ok", 0), h["failed"], h["dead"]) == (0, 1, 1), h
    dead = xrange_all(c, "harvestd:urls:dead")
    assert [f["reason"] for _, f in dead] == ["poisoned"]
    assert dead[0][1]["url"] == bad and dead[0][1]["line"] == "1"
    assert len(d.events("stream_poisoned")) == 1
    # The daemon goes on with the next entries as usual.
    xadd_lines(c, "px", [origin.url("/page?title=g")], first_line=2)
    wait_for(lambda: batch_hash(c, "px").get("done", 0) == 2, 20, "the next entry", [d])
    assert d.stop() == 0
    recs = [json.loads(x) for n in os.listdir(spool.path("out")) if n.endswith(".jsonl")
            for x in open(spool.path("out", n), "rb").read().split(b"\n")[:-1]]
    last = {r["line"]: r for r in recs}
    assert (last[1]["error_type"], last[1]["error"]) == ("Poisoned", "delivered_too_often")
    assert last[2]["status"] == "ok"
    st = harvestd.command("status", "--redis", redis_server.url, "--batch", "px")
    assert " dead 1" in st.stdout and "dead_letters 1" in st.stdout, st.stdout
