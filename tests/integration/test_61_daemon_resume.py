"""The spool daemon's signals and restarts: SIGTERM/SIGINT drain and exit 0 leaving unfinished
batches in active/, a second signal stops at once, and a restart resumes them (torn last line
cut, URLs with an ok record skipped per occurrence, the rest fetched again and appended);
SIGKILL at random points of a large batch."""

import collections
import json
import os
import random
import resource
import signal
import subprocess
import time

import pytest

from harness import (SLOWDOWN, SPOOL_SUBDIRS, assert_failed, assert_ok, check_median,
                     check_summary, count_by, ok_page_sizes,
                     parse_records, preload_env, read_trace, title_of,
                     url_lines, wait_complete)


def ok_counts(records):
    return collections.Counter(r["requested_url"] for r in records if r["status"] == "ok")


def check_resumed_output(spool, name, data):
    """The final output of a batch that was interrupted: complete, valid, and for every input
    line value no more ok records than it has lines (exactly as many, the origin being
    reliable), every invalid line with a failed record, nothing else. Returns the records."""
    lines = collections.Counter(url_lines(data))
    recs = spool.records(name)
    assert {r["requested_url"] for r in recs} == set(lines), "records for URLs not in the input"
    oks = ok_counts(recs)
    for url, n in lines.items():
        if url.startswith("http://"):
            assert oks[url] == n, "%r: %d ok records for %d input lines" % (url, oks[url], n)
        else:
            assert oks[url] == 0
    return recs


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["term", "int"])
def test_61_01_signal_mid_batch_drains_then_restart_completes(start_daemon, spool, fresh_origin, sig):
    o = fresh_origin
    urls = [o.url("/slow-headers?delay=0.3&title=t%d" % i) for i in range(40)]
    dup = o.url("/slow-headers?delay=0.3&title=dup")
    lines = urls[:10] + [dup, "not a url"] + urls[10:20] + [dup] + urls[20:] + [dup]
    d = start_daemon(concurrency=4, per_host=4, drain_timeout="2s", flush_ms="20ms")
    data = spool.drop("slow.txt", lines)
    d.poll_until(lambda: len(spool.output_lines("slow.txt")) >= 8, 10, "the first records")
    sent = time.monotonic()
    d.send_signal(sig)
    rc = d.wait(timeout=10)
    took = time.monotonic() - sent
    assert rc == 0, "exit status %d after %s" % (rc, sig.name)
    assert took < 2 + 1.5 * SLOWDOWN, "exit %.1fs after %s with drain_timeout 2s" % (took, sig.name)
    # Unfinished: still in active/, no summary; what was written is whole lines.
    assert spool.files("active") == ["slow.txt"]
    assert spool.files("done") == [] and spool.files("incoming") == []
    assert not spool.has_summary("slow.txt")
    first = spool.records("slow.txt", complete=True)
    first_bytes = spool.output_bytes("slow.txt")
    assert 8 <= len(first) < len(lines), "not interrupted: %d records" % len(first)
    # The drain let every request already sent finish (0.3 s each, 2 s allowed), and no new
    # one started.
    downloads = [r for r in first if r.get("stage") != "input"]
    assert all(r["status"] == "ok" for r in downloads), downloads
    assert len(o.requests) == len(downloads), "%d requests, %d download records" % (len(o.requests), len(downloads))
    assert len(d.events("batch_interrupted")) == 1
    first_ok = ok_counts(first)

    # The restart resumes the batch.
    o.reset()
    d2 = start_daemon(concurrency=4, per_host=4, drain_timeout="2s", flush_ms="20ms")
    wait_complete(d2, spool, ["slow.txt"], timeout=20)
    final = spool.output_bytes("slow.txt")
    assert final.startswith(first_bytes), "the first run's records were rewritten"
    recs = check_resumed_output(spool, "slow.txt", data)
    for r in recs:
        if r["status"] == "ok":
            assert_ok(r, title_of(r["requested_url"]))
    # URLs that had an ok record were not fetched again; a duplicate line is fetched once per
    # occurrence that lacked its record.
    fetched = collections.Counter(o.url(r.target) for r in o.requests)
    for url, n in collections.Counter(lines).items():
        if url.startswith("http://"):
            assert fetched[url] == n - first_ok[url], "%r fetched %d times after the restart" % (url, fetched[url])
    second = parse_records(final[len(first_bytes):])
    resumed = sum(first_ok.values())
    s = check_summary(spool.summary("slow.txt"), "slow.txt", second, resumed=resumed)
    assert s["records"] == len(lines) and s["ok"] == len(lines) - 1 and s["failed"] == 1
    ev = d2.events("batch_resumed")
    assert len(ev) == 1 and ev[0]["batch"] == "slow.txt", ev
    assert int(ev[0]["ok"]) == resumed and int(ev[0]["records"]) == len(first), ev
    assert int(ev[0]["truncated_bytes"]) == 0, ev
    assert d2.stop() == 0


def test_61_02_second_signal_stops_at_once(start_daemon, spool, fresh_origin):
    o = fresh_origin
    held = [o.url("/hold?key=never&title=h%d" % i) for i in range(4)]
    quick = [o.url("/page?title=q%d" % i) for i in range(3)]
    d = start_daemon(concurrency=4, per_host=4, drain_timeout="5s", read_timeout="30s",
                     total_timeout="60s", flush_ms="20ms")
    data = spool.drop("held.txt", quick + held + [o.url("/page?title=after")])
    d.poll_until(lambda: len(o.find_request("key=never")) == 4, 5, "four held requests")
    d.poll_until(lambda: len(spool.output_lines("held.txt")) == 3, 5, "the quick records")
    d.send_signal(signal.SIGTERM)
    d.poll_until(lambda: "event=stopping" in d.stderr_text(), 2, "the drain to start")
    time.sleep(0.2)
    sent = time.monotonic()
    d.send_signal(signal.SIGTERM)
    rc = d.wait(timeout=10)
    took = time.monotonic() - sent
    assert rc == 0
    assert took < 1.5 * SLOWDOWN, "exit %.1fs after the second signal (drain_timeout 5s)" % took
    assert spool.files("active") == ["held.txt"] and not spool.has_summary("held.txt")
    first = spool.records("held.txt")
    assert sorted(r["title"] for r in first if r["status"] == "ok") == ["q0", "q1", "q2"]
    # The batch resumes: only what lacks an ok record is fetched.
    o.release("never")
    o.reset()
    d2 = start_daemon(flush_ms="20ms")
    wait_complete(d2, spool, ["held.txt"], timeout=10)
    check_resumed_output(spool, "held.txt", data)
    assert not o.find_request("title=q"), "URLs with an ok record were fetched again"
    assert len(o.find_request("key=never")) == 4
    assert spool.summary("held.txt")["resumed"] == 3
    assert d2.stop() == 0


def test_61_03_drain_timeout_bounds_the_shutdown(start_daemon, spool, fresh_origin):
    o = fresh_origin
    d = start_daemon(concurrency=4, per_host=4, drain_timeout="1s", read_timeout="30s",
                     total_timeout="60s")
    spool.drop("stuck.txt", [o.url("/hold?key=stuck&title=s%d" % i) for i in range(8)])
    d.poll_until(lambda: len(o.requests) == 4, 5, "four requests in flight")
    sent = time.monotonic()
    d.send_signal(signal.SIGTERM)
    rc = d.wait(timeout=10)
    took = time.monotonic() - sent
    assert rc == 0
    assert 0.8 <= took < 1 + 1.5 * SLOWDOWN, "exit %.1fs after SIGTERM with drain_timeout 1s" % took
    assert len(o.requests) == 4, "requests started after the signal"
    assert spool.files("active") == ["stuck.txt"] and not spool.has_summary("stuck.txt")
    assert [r for r in spool.records("stuck.txt") if r["status"] == "ok"] == []
    o.release("stuck")


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["term", "int"])
def test_61_04_idle_daemon_exits_0_and_ignores_sighup(start_daemon, spool, sig):
    d = start_daemon()
    d.send_signal(signal.SIGHUP)
    d.poll_until(lambda: "signal=HUP" in d.stderr_text(), 2, "the SIGHUP log line")
    time.sleep(0.2)
    assert d.running(), "SIGHUP stopped the daemon"
    sent = time.monotonic()
    assert d.stop(sig, timeout=5) == 0
    assert time.monotonic() - sent < 1 * SLOWDOWN


def test_61_05_resume_cuts_a_torn_line_and_skips_ok_urls(start_daemon, spool, fresh_origin):
    """A batch left in active/ by a crash, built by hand: its output has ok records (one URL
    ok twice of its three lines), a failed record and a torn last line."""
    o = fresh_origin
    u = [o.url("/page?title=r%d" % i) for i in range(6)]
    triple = o.url("/page?title=triple")
    lines = [u[0], triple, u[1], u[2], triple, u[3], "bad url", triple, u[4], u[5]]
    for sub in ("incoming", "active", "done", "rejected", "out"):
        os.makedirs(spool.path(sub))
    with open(spool.path("active", "crashed.txt"), "wb") as f:
        f.write(b"".join(x.encode() + b"\n" for x in lines))

    def rec(url, ok=True):
        if ok:
            r = {"requested_url": url, "url": url, "status": "ok", "http_status": 200,
                 "title": title_of(url), "bytes": 10}
        else:
            r = {"requested_url": url, "url": url, "status": "failed", "http_status": 503,
                 "stage": "download", "error_type": "HttpStatus", "error": "http_503"}
        return json.dumps(r, separators=(",", ":")).encode() + b"\n"

    prefix = rec(u[0]) + rec(triple) + rec(u[2], ok=False) + rec(triple) + rec(u[3])
    torn = rec(u[5])[:25]
    with open(spool.path("out", "crashed.txt.jsonl"), "wb") as f:
        f.write(prefix + torn)
    d = start_daemon(flush_ms="20ms")
    wait_complete(d, spool, ["crashed.txt"], timeout=10)
    final = spool.output_bytes("crashed.txt")
    assert final.startswith(prefix), "the valid records before the tear were changed"
    recs = check_resumed_output(spool, "crashed.txt", "\n".join(lines).encode())
    # Fetched: u1, u2 (its record failed), u4, u5 (torn), and triple once; not u0, u3.
    fetched = sorted(r.query["title"] for r in o.requests)
    assert fetched == ["r1", "r2", "r4", "r5", "triple"], fetched
    second = parse_records(final[len(prefix):])
    assert len(second) == len(lines) - 4
    latest = {r["requested_url"]: r for r in recs}
    assert_ok(latest[u[2]], "r2")  # the last record for a URL wins
    check_summary(spool.summary("crashed.txt"), "crashed.txt", second, resumed=4)
    ev = d.events("batch_resumed")
    assert len(ev) == 1 and int(ev[0]["truncated_bytes"]) == len(torn), ev
    assert int(ev[0]["records"]) == 5 and int(ev[0]["ok"]) == 4, ev
    assert d.stop() == 0


def test_61_06_completed_batch_left_in_active_is_moved_to_done(start_daemon, spool, fresh_origin):
    """A crash after the summary was written but before the input moved to done/: the restart
    only moves it."""
    for sub in ("incoming", "active", "done", "rejected", "out"):
        os.makedirs(spool.path(sub))
    url = fresh_origin.url("/page?title=x")
    with open(spool.path("active", "finished.txt"), "w") as f:
        f.write(url + "\n")
    out = b'{"requested_url":"%s","url":"%s","status":"ok","title":"x"}\n' % (url.encode(), url.encode())
    with open(spool.path("out", "finished.txt.jsonl"), "wb") as f:
        f.write(out)
    summary = b'{"batch":"finished.txt","records":1}\n'
    with open(spool.path("out", "finished.txt.summary.json"), "wb") as f:
        f.write(summary)
    d = start_daemon()
    d.poll_until(lambda: spool.files("done") == ["finished.txt"], 5, "finished.txt in done/")
    assert spool.files("active") == []
    assert spool.output_bytes("finished.txt") == out
    with open(spool.summary_path("finished.txt"), "rb") as f:
        assert f.read() == summary
    assert fresh_origin.requests == []
    assert d.stop() == 0


def test_61_07_restart_resumes_every_active_batch(start_daemon, spool, fresh_origin):
    o = fresh_origin
    d = start_daemon(max_active_batches=3, drain_timeout="1s", read_timeout="30s",
                     total_timeout="60s", flush_ms="20ms")
    data = {}
    for k in range(3):
        name = "b%d.txt" % k
        data[name] = spool.drop(name, [o.url("/page?title=b%d-%d" % (k, i)) for i in range(3)]
                                + [o.url("/hold?key=r%d&title=held%d" % (k, k))])
    d.poll_until(lambda: len(o.find_request("/hold")) == 3, 5, "three held requests")
    assert d.stop() == 0
    assert spool.files("active") == sorted(data)
    for k in range(3):
        o.release("r%d" % k)
    o.reset()
    d2 = start_daemon(max_active_batches=3, flush_ms="20ms")
    spool.drop("new.txt", [o.url("/page?title=new")])
    wait_complete(d2, spool, list(data) + ["new.txt"], timeout=10)
    for name, raw in data.items():
        check_resumed_output(spool, name, raw)
        assert spool.summary(name)["resumed"] == 3
    assert sorted(r.query["title"] for r in o.requests) == ["held0", "held1", "held2", "new"]
    assert sorted(e["batch"] for e in d2.events("batch_resumed")) == sorted(data)
    assert d2.stop() == 0


def test_61_08_sigkill_at_random_points_then_resume(start_daemon, spool, origin):
    """SIGKILL three times at random points of a 3000-line batch (fast origin), restart after
    each: the final output holds every input line's record, no URL has more ok records than
    input lines, every line is valid JSON, and the summary is written."""
    seed = int(os.environ.get("HARVESTD_TEST_SEED", time.time_ns() % 1000000))
    print("seed %d (set HARVESTD_TEST_SEED to replay)" % seed)
    rnd = random.Random(seed)
    # About 1500 records a second: a kill lands well inside the batch.
    lines = [origin.url("/page?title=k%d&delay=0.002" % i) for i in range(2800)]
    lines += [origin.url("/page?title=dup%d&delay=0.002" % i) for i in range(60)] * 3
    lines += ["invalid line %d" % i for i in range(20)]
    rnd.shuffle(lines)
    assert len(lines) == 3000
    directives = dict(concurrency=4, per_host=4, flush_ms="10ms", drain_timeout="1s", log_level="notice")
    d = start_daemon(**directives)
    data = spool.drop("big.txt", lines)
    truncated = []
    for k in range(3):
        target = rnd.randrange(200 + 900 * k, 800 + 900 * k)
        d.poll_until(lambda: len(spool.output_lines("big.txt")) >= target, 20,
                     "%d output lines before kill %d" % (target, k + 1))
        d.kill()
        assert spool.files("active") == ["big.txt"], "kill %d came too late: %r" % (k + 1, spool.listing())
        assert not spool.has_summary("big.txt")
        spool.records("big.txt", complete=False)  # every whole line is valid
        print("kill %d at %d lines (target %d)" % (k + 1, len(spool.output_lines("big.txt")), target))
        d = start_daemon(**directives)
        ev = d.events("batch_resumed")
        assert len(ev) == 1, ev
        truncated.append(int(ev[0]["truncated_bytes"]))
    wait_complete(d, spool, ["big.txt"], timeout=30)
    print("torn bytes cut at the restarts: %r" % truncated)
    recs = check_resumed_output(spool, "big.txt", data)
    for r in recs:
        if r["status"] == "ok":
            assert_ok(r, title_of(r["requested_url"]))
    s = spool.summary("big.txt")
    assert (s["records"], s["ok"], s["failed"]) == (3000, 2980, 20), s
    ev = d.events("batch_resumed")[0]
    assert s["resumed"] == int(ev["ok"]), (s, ev)
    assert s["error_types"] == {"InvalidUrl": 20}, s
    assert d.stop() == 0


def test_61_09_resumed_batches_respect_max_active_batches(start_daemon, spool, fresh_origin):
    """Three batches left in active/ and max_active_batches = 1: they resume one at a time."""
    o = fresh_origin
    for sub in ("incoming", "active", "done", "rejected", "out"):
        os.makedirs(spool.path(sub))
    names = ["r%d.txt" % k for k in range(3)]
    for k, name in enumerate(names):
        with open(spool.path("active", name), "w") as f:
            f.write(o.url("/hold?key=m%d&title=m%d" % (k, k)) + "\n")
        time.sleep(0.02)
    d = start_daemon(max_active_batches=1, rescan_interval="200ms")
    d.poll_until(lambda: len(o.find_request("/hold")) >= 1, 5, "a held request")
    time.sleep(0.5)
    held = sorted(r.query["key"] for r in o.find_request("/hold"))
    started = [e["batch"] for e in d.events("batch_start")]
    for k in range(3):
        o.release("m%d" % k)
    assert len(started) == 1 and len(held) == 1, \
        "with max_active_batches = 1, %d resumed batches run at once (%r), requests for %r" % (
            len(started), started, held)
    wait_complete(d, spool, names, timeout=10)
    assert d.stop() == 0


def test_61_10_a_page_that_crashes_the_parser_is_not_fetched_again(start_daemon, spool,
                                                                    fresh_origin):
    """A page that makes the parser abort (HARVESTD_TEST_PARSE_ABORT injects the abort a gumbo
    assertion would cause) takes the daemon down: a failure of ours is not a page's. Its line
    is noted in out/NAME.crashes on the way down, and the restart, with the fault still armed,
    records every occurrence of that line as ParserCrashed instead of fetching it into the
    same crash; the batch completes and the note goes. One parse worker: the page crashes it
    once, and the note holds that one line."""
    o = fresh_origin
    marker = "poison-61-10"
    bad = o.url("/page?title=" + marker)
    good = [o.url("/page?title=g%d" % i) for i in range(5)]
    lines = good[:2] + [bad] + good[2:] + [bad]
    env = dict(os.environ, HARVESTD_TEST_PARSE_ABORT=marker)
    note = spool.path("out", "poison.txt.crashes")
    core = resource.getrlimit(resource.RLIMIT_CORE)
    resource.setrlimit(resource.RLIMIT_CORE, (0, core[1]))  # no core file from the abort
    try:
        d = start_daemon(env=env, concurrency=1, per_host=1, parse_jobs=1, flush_ms="20ms")
        data = spool.drop("poison.txt", lines)
        try:
            d.popen.wait(20 * SLOWDOWN)  # the daemon's end is what is awaited: no poll_until
        except subprocess.TimeoutExpired:
            pytest.fail("the daemon did not abort on the poisoned page\n" + d.stderr_text()[-3000:])
        assert d.popen.returncode == -signal.SIGABRT, d.stderr_text()[-3000:]
        d.rc = d.popen.returncode
        assert spool.files("active") == ["poison.txt"]
        assert not spool.has_summary("poison.txt")
        with open(note) as f:
            noted = f.read()
        assert noted == bad + "\n", noted
        fetched = len(o.find_request(marker))
        d = start_daemon(env=env, flush_ms="20ms")
        wait_complete(d, spool, ["poison.txt"], timeout=10)
    finally:
        resource.setrlimit(resource.RLIMIT_CORE, core)
    recs = spool.records("poison.txt")
    assert {r["requested_url"] for r in recs} == set(url_lines(data))
    crashed = [r for r in recs if r["requested_url"] == bad]
    assert len(crashed) == 2, crashed
    for r in crashed:
        assert_failed(r, "parse", "ParserCrashed", "parser_crashed_on_this_page")
    oks = ok_counts(recs)
    for u in good:
        assert oks[u] == 1, (u, oks)
    assert len(o.find_request(marker)) == fetched  # not fetched again after the restart
    assert not os.path.exists(note)
    s = spool.summary("poison.txt")
    assert s["error_types"] == {"ParserCrashed": 2}, s
    assert len(d.events("parser_crash_noted")) == noted.count("\n")
    assert len(d.events("parser_crashed_before")) == 2
    assert d.stop() == 0


def test_61_11_completion_order(start_daemon, spool, fresh_origin, tmp_path):
    """A batch completes in one order, each step durable before the next: the output is
    fsynced, the crash note is removed, the summary is renamed into place, the input moves to
    done/ (last, so whoever waits for done/ finds the rest final). Seen in the calls themselves
    (the fault-injection shim's trace): a batch resumed with a crash note, and a batch whose
    summary an interruption left behind, with a stale note."""
    o = fresh_origin
    for sub in SPOOL_SUBDIRS:
        os.makedirs(spool.path(sub))
    noted, good = o.url("/page?title=noted"), o.url("/page?title=fine")
    with open(spool.path("active", "noted.txt"), "w") as f:
        f.write(good + "\n" + noted + "\n")
    with open(spool.path("out", "noted.txt.crashes"), "w") as f:
        f.write(noted + "\n")
    with open(spool.path("active", "summed.txt"), "w") as f:
        f.write(good + "\n")
    for suffix, text in ((".jsonl", '{"requested_url":"%s","status":"ok"}\n' % good),
                         (".summary.json", '{"batch":"summed.txt","records":1}\n'),
                         (".crashes", good + "\n")):
        with open(spool.path("out", "summed.txt" + suffix), "w") as f:
            f.write(text)
    trace = str(tmp_path / "calls.trace")
    d = start_daemon(env=preload_env(HV_TRACE_FILE=trace), flush_ms="20ms")
    wait_complete(d, spool, ["noted.txt", "summed.txt"], timeout=10)
    assert d.stop() == 0
    assert [f for f in spool.files("out") if f.endswith(".crashes")] == [], spool.listing()
    assert spool.summary("noted.txt")["error_types"] == {"ParserCrashed": 1}

    calls = read_trace(trace)
    out = os.path.realpath(spool.path("out"))

    def first(*call):
        found = [i for i, c in enumerate(calls) if c == list(call)]
        assert found, "no %r among the calls:\n%s" % (call, "\n".join(map(" ".join, calls)))
        return found[0]

    def synced(path, after, before):
        return any(c == ["fsync", os.path.realpath(path)] for c in calls[after + 1:before])

    fsyncs = [i for i, c in enumerate(calls)
              if c == ["fsync", os.path.join(out, "noted.txt.jsonl")]]
    note = first("unlink", spool.path("out", "noted.txt.crashes"))
    summary = first("rename", spool.path("out", ".noted.txt.summary.tmp"),
                    spool.path("out", "noted.txt.summary.json"))
    done = first("renameat2", spool.path("active", "noted.txt"), spool.path("done", "noted.txt"))
    order = "\n".join(map(" ".join, calls))
    assert fsyncs and fsyncs[-1] < note, "the output was not fsynced before the note went:\n" + order
    assert note < summary < done, "completion steps out of order:\n" + order
    assert synced(spool.path("out"), note, summary), "the note's removal is not synced first:\n" + order
    assert synced(spool.path("out"), summary, done), "the summary is not synced first:\n" + order
    assert synced(spool.path("done"), done, len(calls)), order

    stale = first("unlink", spool.path("out", "summed.txt.crashes"))
    moved = first("renameat2", spool.path("active", "summed.txt"), spool.path("done", "summed.txt"))
    assert stale < moved, "summed.txt moved to done/ before its stale note went:\n" + order


def test_61_12_resumed_summary_covers_the_whole_output(start_daemon, spool, fresh_origin):
    """SIGKILL mid-batch, restart: every figure of the summary and of the batch_done line
    covers the whole output, the ok records the first run wrote included (read back from the
    output), not only this run's. The output's final records are the last one of each
    requested URL (README, "Recovery")."""
    o = fresh_origin
    ok_lines = [o.url("/page?title=p%d&size=%d" % (i, 1000 + 150 * i)) for i in range(20)]
    failing = [o.url("/status/404?n=%d" % i) for i in range(4)] + ["invalid line %d" % i for i in range(2)]
    held = [o.url("/hold?key=resume12&title=h%d" % i) for i in range(6)]
    directives = dict(concurrency=8, per_host=8, flush_ms="20ms", read_timeout="30s",
                      total_timeout="60s")
    d = start_daemon(**directives)
    spool.drop("sum.txt", held + ok_lines + failing)
    d.poll_until(lambda: len(spool.output_lines("sum.txt")) == 26 and
                 len(o.find_request("key=resume12")) == 6, 10,
                 "every record but the held pages' in the output")
    d.kill()
    assert not spool.has_summary("sum.txt")
    o.release("resume12")
    d = start_daemon(**directives)
    wait_complete(d, spool, ["sum.txt"], timeout=10)

    records = spool.records("sum.txt")
    assert len(records) == 26 + 6 + 6  # the failed lines were tried again and appended
    final = list({r["requested_url"]: r for r in records}.values())
    assert len(final) == 32
    ok = [r for r in final if r["status"] == "ok"]
    failed = [r for r in final if r["status"] == "failed"]
    s = spool.summary("sum.txt")
    print(json.dumps(s, indent=1))
    assert (s["records"], s["ok"], s["failed"], s["resumed"]) == (32, 26, 6, 20), s
    assert s["ok_ratio"] == round(26 / 32, 3), s
    assert s["error_types"] == count_by(failed, "error_type") == {"HttpStatus": 4, "InvalidUrl": 2}, s
    statuses = count_by([r for r in final if "http_status" in r], "http_status")
    assert s["http_statuses"] == {str(k): v for k, v in statuses.items()} == {"200": 26, "404": 4}, s
    with_bytes = [r["bytes"] for r in final if "bytes" in r]
    assert s["body_bytes_total"] == sum(with_bytes), s
    assert s["body_bytes_mean"] == sum(with_bytes) // len(with_bytes), s
    sizes = ok_page_sizes(final)
    assert len(sizes) == 26
    assert s["ok_body_bytes_mean"] == sum(sizes) // len(sizes), s
    check_median(s["ok_body_bytes_median"], sizes)
    # This run's: 12 records (6 held pages, the 6 failed lines again) and their requests.
    assert s["requests"] >= 10, s

    done = d.events("batch_done")
    assert len(done) == 1, done
    e = done[0]
    assert (e["records"], e["ok"], e["failed"], e["resumed"]) == ("32", "26", "6", "20"), e
    assert e["http_statuses"] == "200:26,404:4", e
    assert e["error_type.HttpStatus"] == "4" and e["error_type.InvalidUrl"] == "2", e
    assert e["ok_ratio"] == "%.3f" % (26 / 32), e
    assert d.stop() == 0
