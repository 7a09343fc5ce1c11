"""A slow disk must not stall the daemon: every fsync (files and directories) of a batch's
start and completion runs off the loop thread, in the batch host's threadpool work, and the
next batch is claimed once that work reports back.

Two views, through the fault-injection shim (harness.SHIM_SOURCE): with
HV_FAULT_SYNC_ON_MAIN=abort any fsync() or fdatasync() on the main thread (the loop's) aborts
the daemon; with HV_FAULT_FSYNC_DELAY_MS a completion's summary fsync is held for 2 s while
the test scrapes /metrics and watches another batch fetch."""

import os
import signal
import socket
import time

import pytest

from harness import check_batch, preload_env, read_trace, wait_complete, wait_listening
from origin import free_port
from redisd import REDIS_SERVER

HOLD_MS = 2000


def scrape_seconds(port):
    """Seconds one GET /metrics takes to be answered in full (the endpoint closes after it)."""
    t0 = time.monotonic()
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        data = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
    assert data.startswith(b"HTTP/1.1 200"), data[:200]
    return time.monotonic() - t0


def page_urls(origin, prefix, n, delay=0.0):
    return [origin.url("/page?title=%s%d&delay=%s" % (prefix, i, delay)) for i in range(n)]


def test_66_01_no_sync_on_the_loop_thread(start_daemon, spool, fresh_origin):
    """Batches started new, resumed with a torn output and a crash note, and found complete
    in active/, with every record synced at once and re-crawling's store committing: none of
    it syncs on the loop thread (the shim aborts the daemon if anything does)."""
    o = fresh_origin
    for sub in ("incoming", "active", "done", "rejected", "out"):
        os.makedirs(spool.path(sub))
    good, noted = o.url("/page?title=fine"), o.url("/page?title=noted")
    with open(spool.path("active", "resumed.txt"), "w") as f:
        f.write(good + "\n" + noted + "\n")
    with open(spool.path("out", "resumed.txt.jsonl"), "w") as f:
        f.write('{"requested_url":"%s","status":"ok"}\n{"requested_url":"torn' % good)
    with open(spool.path("out", "resumed.txt.crashes"), "w") as f:
        f.write(noted + "\n")
    with open(spool.path("active", "finished.txt"), "w") as f:
        f.write(good + "\n")
    with open(spool.path("out", "finished.txt.summary.json"), "w") as f:
        f.write('{"batch":"finished.txt","records":1}\n')
    d = start_daemon(env=preload_env(HV_FAULT_SYNC_ON_MAIN="abort"), fsync="always",
                     flush_ms="20ms", recrawl="conditional")
    wait_complete(d, spool, ["resumed.txt", "finished.txt"], timeout=10)
    spool.drop("fresh.txt", page_urls(o, "n", 5))
    wait_complete(d, spool, ["fresh.txt"], timeout=10)
    recs = spool.records("fresh.txt")
    assert len(recs) == 5 and all(r["status"] == "ok" for r in recs), recs
    assert spool.summary("resumed.txt")["error_types"] == {"ParserCrashed": 1}
    assert d.stop() == 0, d.stderr_text()[-3000:]
    assert "sync on the main thread" not in d.stderr_text()


@pytest.mark.skipif(not REDIS_SERVER, reason="redis-server is not installed")
def test_66_02_no_sync_on_the_loop_thread_for_the_stream(redis_server, start_daemon, spool,
                                                         origin):
    """The stream's outputs are created, synced, repaired at start-up and completed (crash
    note removed) off the loop too."""
    c = redis_server.client()
    out = spool.path("out")
    os.makedirs(out)
    with open(os.path.join(out, "old.n.jsonl"), "w") as f:
        f.write('{"requested_url":"x","status":"ok","batch":"old","line":1}\n{"torn')
    for i in range(20):
        c.call("XADD", "harvestd:urls", "*", "batch", "s1", "line", i + 1, "url",
               origin.url("/page?title=s%d" % i))
    d = start_daemon(env=preload_env(HV_FAULT_SYNC_ON_MAIN="abort"), source="redis",
                     redis_url=redis_server.url, redis_consumer="n", fsync="always")
    d.poll_until(lambda: int(dict(zip(*[iter(c.call("HGETALL", "harvestd:urls:batch:s1")
                                               or [])] * 2)).get("done", 0)) == 20,
                 15, "20 acknowledgements")
    assert d.stop() == 0, d.stderr_text()[-3000:]
    assert "sync on the main thread" not in d.stderr_text()
    with open(os.path.join(out, "old.n.jsonl")) as f:
        assert f.read().endswith("}\n"), "the torn line was not cut"
    assert d.events("output_repaired"), d.stderr_text()[-3000:]


def test_66_03_a_held_completion_sync_stalls_nothing(start_daemon, spool, fresh_origin, tmp_path):
    """A completion's summary fsync is held for 2 s: meanwhile /metrics answers at once and
    another batch goes on fetching and writing; the held batch completes after the hold."""
    o = fresh_origin
    port = free_port()
    trace = str(tmp_path / "calls.trace")
    env = preload_env(HV_FAULT_FSYNC_DELAY_MS=HOLD_MS, HV_FAULT_FSYNC_DELAY_PATH="quick.txt.summary",
                      HV_TRACE_FILE=trace)
    d = start_daemon(env=env, metrics_listen="127.0.0.1:%d" % port, flush_ms="20ms",
                     fsync="never", max_active_batches=2, per_host=2)
    wait_listening(port, d.running)
    long_raw = spool.drop("long.txt", page_urls(o, "l", 400, delay=0.02))
    d.poll_until(lambda: spool.output_bytes("long.txt"), 10, "long.txt under way")
    quick_raw = spool.drop("quick.txt", page_urls(o, "q", 2))

    def held():
        return any(c[:1] == ["fsync_held"] and "quick.txt.summary" in c[1]
                   for c in read_trace(trace))
    d.poll_until(held, 10, "the quick batch's summary fsync held")
    t_held = time.monotonic()
    before = len(spool.output_bytes("long.txt").splitlines())
    slowest = 0.0
    scrapes = 0
    while time.monotonic() - t_held < HOLD_MS / 1000.0 * 0.8:
        slowest = max(slowest, scrape_seconds(port))
        scrapes += 1
        time.sleep(0.1)
    during = len(spool.output_bytes("long.txt").splitlines()) - before
    assert scrapes >= 5 and slowest < 0.5, \
        "/metrics took %.3f s at worst over %d scrapes while a fsync was held" % (slowest, scrapes)
    assert not spool.has_summary("quick.txt"), "the summary appeared while its fsync was held"
    assert during >= 5, "only %d records of long.txt were written while a fsync was held" % during
    wait_complete(d, spool, ["quick.txt", "long.txt"], timeout=30)
    check_batch(spool, "quick.txt", quick_raw)
    check_batch(spool, "long.txt", long_raw)
    assert d.stop() == 0


def test_66_04_sigterm_waits_for_a_held_completion(start_daemon, spool, fresh_origin, tmp_path):
    """SIGTERM while a completion's fsync is held: the daemon stops taking work at once but
    exits only after the completion reported (summary in place, input in done/), exit 0."""
    o = fresh_origin
    trace = str(tmp_path / "calls.trace")
    env = preload_env(HV_FAULT_FSYNC_DELAY_MS=HOLD_MS, HV_FAULT_FSYNC_DELAY_PATH="held.txt.summary",
                      HV_TRACE_FILE=trace)
    d = start_daemon(env=env, flush_ms="20ms")
    raw = spool.drop("held.txt", page_urls(o, "h", 3))
    d.poll_until(lambda: any(c[:1] == ["fsync_held"] for c in read_trace(trace)), 10,
                 "the summary's fsync held")
    t0 = time.monotonic()
    d.send_signal(signal.SIGTERM)
    assert d.wait() == 0, d.stderr_text()[-3000:]
    waited = time.monotonic() - t0
    assert waited >= HOLD_MS / 1000.0 * 0.5, "exited %.3f s after SIGTERM, before the held fsync" % waited
    check_batch(spool, "held.txt", raw)
    assert spool.has_summary("held.txt")
    assert spool.files("done") == ["held.txt"] and spool.files("active") == []
