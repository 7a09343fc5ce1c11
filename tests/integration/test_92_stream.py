"""The daemon as a consumer of a Redis stream (source = redis): a real redis-server of the
test's own on 127.0.0.1, the scripted origin, and harvestd daemons with their own spools.

Entries are added here with XADD (the enqueue command has its own tests, test_90); what is
checked is what the daemons make of them: one record per entry in out/BATCH.CONSUMER.jsonl,
acknowledgements only after the record is durable, the batch counters, the bound on entries
held, bad entries, taking over a dead daemon's entries, Redis going away, and a scripted
server whose replies are over the bounds of redis.h.
"""

import json
import os
import signal
import time
import urllib.request

import pytest

from harness import SANITIZER, SLOWDOWN, preload_env, vm_kib
from origin import free_port
from redisd import REDIS_SERVER, RedisServer, ScriptedRedis, flood

STREAM = "harvestd:urls"
GROUP = "harvestd"

pytestmark = pytest.mark.skipif(not REDIS_SERVER, reason="redis-server is not installed")


# ---------------------------------------------------------------------------- helpers


def pipeline(client, commands):
    """Send every command, then read every reply (one round trip for many XADDs)."""
    out = []
    for args in commands:
        out.append(b"*%d\r\n" % len(args))
        for a in args:
            data = str(a).encode()
            out.append(b"$%d\r\n%s\r\n" % (len(data), data))
    client.sock.sendall(b"".join(out))
    return [client._read() for _ in commands]


def xadd_lines(client, batch, urls, first_line=1, rules=None):
    """One entry per URL, line numbers from first_line. Returns {line: url}."""
    cmds, lines = [], {}
    for i, url in enumerate(urls):
        line = first_line + i
        cmd = ["XADD", STREAM, "*", "batch", batch, "line", line, "url", url]
        if rules:
            cmd += ["rules", rules]
        cmds.append(cmd)
        lines[line] = url
    for start in range(0, len(cmds), 1000):
        pipeline(client, cmds[start:start + 1000])
    return lines


def stream_config(redis, **directives):
    values = {"source": "redis", "redis_url": redis.url, "fsync": "always"}
    values.update(directives)
    return values


def batch_hash(client, batch):
    flat = client.call("HGETALL", "%s:batch:%s" % (STREAM, batch)) or []
    return {flat[i]: int(flat[i + 1]) if flat[i + 1].isdigit() else flat[i + 1]
            for i in range(0, len(flat), 2)}


def pending_total(client):
    try:
        return client.call("XPENDING", STREAM, GROUP)[0]
    except Exception:  # noqa: BLE001 - no group yet
        return 0


def pending_by_consumer(client):
    try:
        summary = client.call("XPENDING", STREAM, GROUP)
    except Exception:  # noqa: BLE001
        return {}
    return {name: int(n) for name, n in (summary[3] or [])}


def outputs(spool_root, batch):
    """The batch's output files in a spool: {path: [records]} (every line must be JSON)."""
    out = {}
    d = os.path.join(str(spool_root), "out")
    if not os.path.isdir(d):
        return out
    prefix = batch + "."
    for name in sorted(os.listdir(d)):
        if name.startswith(prefix) and name.endswith(".jsonl") and "." not in name[len(prefix):-6]:
            with open(os.path.join(d, name), "rb") as f:
                data = f.read()
            recs = []
            for raw in data.split(b"\n")[:-1]:
                recs.append(json.loads(raw))  # every written line is whole JSON
            out[os.path.join(d, name)] = recs
    return out


def all_records(spool_roots, batch):
    recs = []
    for root in spool_roots:
        for rs in outputs(root, batch).values():
            recs.extend(rs)
    return recs


def wait_for(predicate, timeout, what, daemons=()):
    deadline = time.monotonic() + timeout * SLOWDOWN
    while not predicate():
        for d in daemons:
            if not d.running():
                pytest.fail("harvestd exited (status %s) while waiting for %s\n%s"
                            % (d.popen.returncode, what, d.stderr_text()[-4000:]))
        if time.monotonic() > deadline:
            logs = "\n".join(d.stderr_text()[-3000:] for d in daemons)
            pytest.fail("timed out after %ss waiting for %s\n%s" % (timeout, what, logs))
        time.sleep(0.02)


def metrics(port):
    """The daemon's /metrics as {name: value} (series without labels)."""
    with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port, timeout=5) as r:
        text = r.read().decode()
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#") and "{" not in line:
            name, value = line.split()
            out[name] = float(value)
    return out


def check_keys_and_lines(recs, batch, lines):
    """Every record names its batch and line (right after requested_url), and its line's URL."""
    for r in recs:
        keys = list(r)
        assert keys[:3] == ["requested_url", "batch", "line"], keys
        assert r["batch"] == batch
        assert lines[r["line"]] == r["requested_url"], r


# ---------------------------------------------------------------------------- tests


def test_92_01_every_entry_gets_one_record_and_is_acknowledged(
        redis_server, start_daemon, spool, origin):
    c = redis_server.client()
    urls = [origin.url("/page?title=s%d" % i) for i in range(300)]
    lines = xadd_lines(c, "b1", urls)
    port = free_port()
    d = start_daemon(**stream_config(redis_server, redis_consumer="node-a",
                                     metrics_listen="127.0.0.1:%d" % port))
    wait_for(lambda: batch_hash(c, "b1").get("done", 0) == 300, 30, "300 acknowledgements", [d])
    assert pending_total(c) == 0
    h = batch_hash(c, "b1")
    assert h["ok"] == 300 and h.get("failed", 0) == 0
    m = metrics(port)
    assert m["harvestd_redis_up"] == 1
    assert m["harvestd_stream_entries_read_total"] == 300
    assert m["harvestd_stream_entries_acked_total"] == 300
    assert m["harvestd_stream_entries_held"] == 0
    d.send_signal(signal.SIGTERM)
    assert d.wait() == 0
    outs = outputs(spool.root, "b1")
    assert list(outs) == [os.path.join(str(spool.root), "out", "b1.node-a.jsonl")]
    recs = outs[os.path.join(str(spool.root), "out", "b1.node-a.jsonl")]
    assert sorted(r["line"] for r in recs) == list(range(1, 301))
    check_keys_and_lines(recs, "b1", lines)
    assert all(r["status"] == "ok" and r["title"] == "s%d" % (r["line"] - 1) for r in recs)
    ev = d.events("stream_closed")[-1]
    assert ev["acked"] == "300" and ev["unacked"] == "0"


def test_92_02_no_acknowledgement_before_the_record_is_synced(
        redis_server, start_daemon, spool, origin):
    # Every fsync of the stream's output fails: the records reach the file, but never become
    # durable, so no entry may be acknowledged; the daemon stops with a failure of its own
    # (exit 1) and leaves every entry pending for the next run.
    c = redis_server.client()
    xadd_lines(c, "b2", [origin.url("/page?title=u%d" % i) for i in range(10)])
    env = preload_env(HV_FAULT_FSYNC="EIO", HV_FAULT_FSYNC_PATH="b2.n.jsonl")
    path = os.path.join(str(spool.root), "out", "b2.n.jsonl")
    os.makedirs(os.path.dirname(path))
    open(path, "wb").close()  # there already: its creation (and that fsync) is not the test
    d = start_daemon(env=env, ready=False, **stream_config(redis_server, redis_consumer="n"))
    assert d.wait(20) == 1
    assert open(path, "rb").read().count(b"\n") >= 1  # written...
    assert pending_total(c) == 10                       # ...but not acknowledged
    assert batch_hash(c, "b2").get("done", 0) == 0
    err = d.stderr_text()
    assert "event=fatal" in err and "b2.n.jsonl" in err
    # Without the fault, the next run writes them again and acknowledges them.
    d = start_daemon(**stream_config(redis_server, redis_consumer="n"))
    wait_for(lambda: batch_hash(c, "b2").get("done", 0) == 10, 20, "the acknowledgements", [d])
    assert pending_total(c) == 0
    d.send_signal(signal.SIGTERM)
    assert d.wait() == 0


def test_92_03_bad_entries_get_failed_input_records_and_are_acknowledged(
        redis_server, start_daemon, spool, origin):
    c = redis_server.client()
    pipeline(c, [
        ["XADD", STREAM, "*", "batch", "bad", "line", 1],                       # no url
        ["XADD", STREAM, "*", "batch", "bad", "line", 2, "url", "not a url"],
        ["XADD", STREAM, "*", "batch", "bad", "line", 3, "url", origin.url("/page?title=r"),
         "rules", "no-such-rules"],
        ["XADD", STREAM, "*", "batch", "bad", "line", 4, "url", "ftp://x.test/"],
        ["XADD", STREAM, "*", "batch", "bad", "line", 5, "url", origin.url("/page?title=g")],
    ])
    d = start_daemon(**stream_config(redis_server, redis_consumer="n"))
    wait_for(lambda: batch_hash(c, "bad").get("done", 0) == 5, 20, "5 acknowledgements", [d])
    h = batch_hash(c, "bad")
    assert (h["ok"], h["failed"]) == (1, 4)
    assert pending_total(c) == 0
    d.send_signal(signal.SIGTERM)
    assert d.wait() == 0
    recs = {r["line"]: r for r in all_records([spool.root], "bad")}
    assert set(recs) == {1, 2, 3, 4, 5}
    assert (recs[1]["stage"], recs[1]["error_type"], recs[1]["error"]) == \
        ("input", "InvalidEntry", "entry_has_no_url")
    assert recs[1]["requested_url"] == ""
    assert (recs[2]["stage"], recs[2]["error_type"]) == ("input", "InvalidUrl")
    assert (recs[3]["stage"], recs[3]["error_type"], recs[3]["error"]) == \
        ("input", "InvalidEntry", "unknown_rules")
    assert (recs[4]["stage"], recs[4]["error_type"]) == ("input", "UnsupportedScheme")
    assert recs[5]["status"] == "ok" and recs[5]["title"] == "g"
    assert "rules=\"no-such-rules\"" in d.stderr_text()


def test_92_04_a_stream_key_of_another_type_is_a_clear_error(redis_server, start_daemon):
    c = redis_server.client()
    c.call("SET", STREAM, "not a stream")
    d = start_daemon(**stream_config(redis_server), ready=False)
    assert d.wait(20) == 1
    err = d.stderr_text()
    assert "redis_stream harvestd:urls at %s is not a stream" % redis_server.url in err
    assert "event=fatal" in err


def test_92_05_never_holds_more_entries_than_the_job_queue(
        redis_server, start_daemon, spool, origin):
    c = redis_server.client()
    n = 60
    xadd_lines(c, "bp", [origin.url("/page?title=p%d&delay=0.05" % i) for i in range(n)])
    d = start_daemon(**stream_config(redis_server, queue_size="4", concurrency="2",
                                     redis_consumer="small"))
    seen = []

    def sample():
        seen.append(pending_by_consumer(c).get("small", 0))
        return batch_hash(c, "bp").get("done", 0) == n

    wait_for(sample, 60, "every entry", [d])
    assert max(seen) <= 4, max(seen)
    assert max(seen) >= 2  # it did hold several at once
    d.send_signal(signal.SIGTERM)
    assert d.wait() == 0
    assert len(all_records([spool.root], "bp")) == n


def test_92_06_a_killed_daemon_reads_its_pending_entries_again(
        redis_server, start_daemon, spool, origin):
    c = redis_server.client()
    n = 80
    lines = xadd_lines(c, "rs", [origin.url("/page?title=k%d&delay=0.1" % i) for i in range(n)])
    cfg = stream_config(redis_server, concurrency="8", redis_consumer="same")
    d = start_daemon(**cfg)
    wait_for(lambda: batch_hash(c, "rs").get("done", 0) >= 10, 30, "some progress", [d])
    os.kill(d.pid, signal.SIGKILL)
    d.popen.wait()
    assert pending_total(c) > 0  # it died holding entries
    d2 = start_daemon(**cfg)
    wait_for(lambda: batch_hash(c, "rs").get("done", 0) == n, 60, "every entry", [d2])
    assert pending_total(c) == 0
    d2.send_signal(signal.SIGTERM)
    assert d2.wait() == 0
    recs = all_records([spool.root], "rs")
    check_keys_and_lines(recs, "rs", lines)
    assert {r["line"] for r in recs} == set(range(1, n + 1))
    assert d2.events("stream_pending_read")  # the restart read its old entries first


def test_92_07_entries_of_a_dead_daemon_are_taken_over(
        redis_server, start_daemon, harvestd, origin, tmp_path):
    c = redis_server.client()
    n = 40
    lines = xadd_lines(c, "to", [origin.url("/page?title=t%d&delay=0.2" % i) for i in range(n)])
    spool_a, spool_b = tmp_path / "spool-a", tmp_path / "spool-b"
    spool_a.mkdir()
    spool_b.mkdir()
    a = start_daemon(spool_dir=spool_a, **stream_config(redis_server, concurrency="4",
                                                        queue_size="40", redis_consumer="a"))
    wait_for(lambda: pending_by_consumer(c).get("a", 0) > 0 and
             batch_hash(c, "to").get("done", 0) >= 2, 20, "a at work", [a])
    os.kill(a.pid, signal.SIGKILL)
    a.popen.wait()
    held_by_a = pending_by_consumer(c).get("a", 0)
    assert held_by_a > 0
    b = start_daemon(spool_dir=spool_b, **stream_config(redis_server, concurrency="8",
                                                        redis_claim_idle="2s",
                                                        redis_consumer="b"))
    wait_for(lambda: batch_hash(c, "to").get("done", 0) == n, 60, "every entry", [b])
    assert pending_total(c) == 0
    b.send_signal(signal.SIGTERM)
    assert b.wait() == 0
    reclaimed = b.events("stream_reclaimed")
    assert len(reclaimed) >= held_by_a
    recs = all_records([spool_a, spool_b], "to")
    check_keys_and_lines(recs, "to", lines)
    assert {r["line"] for r in recs} == set(range(1, n + 1))
    # A line with two records was taken over from a.
    by_line = {}
    for r in recs:
        by_line.setdefault(r["line"], []).append(r)
    taken = {int(e["line"]) for e in reclaimed}
    assert all(line in taken for line, rs in by_line.items() if len(rs) > 1)


def test_92_08_redis_restarting_is_survived_and_nothing_is_lost(
        start_daemon, spool, origin, tmp_path):
    redis = RedisServer(tmp_path / "redis-aof", appendonly=True, fsync_always=True)
    redis.start()
    try:
        c = redis.client()
        n = 200
        lines = xadd_lines(c, "rr", [origin.url("/page?title=q%d&delay=0.02" % i)
                                     for i in range(n)])
        c.close()
        port = free_port()
        d = start_daemon(**stream_config(redis, concurrency="8", queue_size="50",
                                         redis_consumer="n", metrics_listen="127.0.0.1:%d" % port))
        c = redis.client()
        wait_for(lambda: batch_hash(c, "rr").get("done", 0) >= 20, 30, "some progress", [d])
        c.close()
        redis.kill()
        wait_for(lambda: "event=redis_down" in d.stderr_text(), 10, "the daemon noticing", [d])
        time.sleep(1.5)
        assert d.running()
        m = metrics(port)
        assert m["harvestd_redis_up"] == 0 and m["harvestd_redis_disconnects_total"] >= 1
        redis.restart()
        c = redis.client()
        wait_for(lambda: batch_hash(c, "rr").get("done", 0) == n, 60, "every entry", [d])
        assert pending_total(c) == 0
        d.send_signal(signal.SIGTERM)
        assert d.wait() == 0
        recs = all_records([spool.root], "rr")
        check_keys_and_lines(recs, "rr", lines)
        assert {r["line"] for r in recs} == set(range(1, n + 1))
        assert len(d.events("redis_up")) >= 4  # both connections, twice
    finally:
        redis.stop()


def test_92_09_spool_and_redis_together(redis_server, start_daemon, spool, origin):
    c = redis_server.client()
    xadd_lines(c, "both", [origin.url("/page?title=r%d" % i) for i in range(20)])
    d = start_daemon(**stream_config(redis_server, source="spool, redis", redis_consumer="n"))
    spool.drop("file.txt", [origin.url("/page?title=f%d" % i) for i in range(20)])
    # Named like stream batch "both"'s output of consumer "n": claimed under another name.
    spool.drop("both.n", [origin.url("/page?title=x")])
    wait_for(lambda: batch_hash(c, "both").get("done", 0) == 20 and spool.has_summary("file.txt")
             and spool.has_summary("both.n.1"), 30, "both sources", [d])
    d.send_signal(signal.SIGTERM)
    assert d.wait() == 0
    assert len(spool.records("file.txt")) == 20
    assert "batch" not in spool.records("file.txt")[0]  # spool records stay as they were
    assert len(all_records([spool.root], "both")) == 20


def test_92_10_configuration_errors_name_the_line(harvestd, spool, tmp_path):
    os.makedirs(str(spool.root), exist_ok=True)
    conf = tmp_path / "h.conf"
    conf.write_text("spool_dir = %s\nsource = redis\n" % spool.root)
    r = harvestd.command("--check-config", "-c", conf)
    assert r.returncode == 2
    assert "%s:2: source = redis needs redis_url" % conf in r.stderr
    conf.write_text("spool_dir = %s\nsource = redis\nredis_url = http://x/\n" % spool.root)
    r = harvestd.command("--check-config", "-c", conf)
    assert r.returncode == 2
    assert "%s:3: redis_url: 'http://x/' is not a redis://HOST[:PORT][/DB] URL" % conf in r.stderr
    conf.write_text("spool_dir = %s\nsource = kafka\n" % spool.root)
    r = harvestd.command("--check-config", "-c", conf)
    assert r.returncode == 2
    assert "source: 'kafka' is not a source" in r.stderr


def test_92_11_redis_unreachable_at_start_is_waited_for(start_daemon, spool, origin, tmp_path):
    redis = RedisServer(tmp_path / "redis-late")
    d = start_daemon(**stream_config(redis, redis_consumer="n"))
    wait_for(lambda: "event=redis_unreachable" in d.stderr_text(), 10, "the refusal", [d])
    redis.start()
    try:
        c = redis.client()
        xadd_lines(c, "late", [origin.url("/page?title=l%d" % i) for i in range(5)])
        wait_for(lambda: batch_hash(c, "late").get("done", 0) == 5, 30, "the entries", [d])
        d.send_signal(signal.SIGTERM)
        assert d.wait() == 0
    finally:
        redis.stop()


def test_92_11b_unreachable_redis_is_logged_at_the_default_level_once(start_daemon, spool, tmp_path):
    """A daemon started against a Redis that is not there says so at the default log level
    (before, only harvestd_redis_up 0 did): one warning per link, its retries at info."""
    redis = RedisServer(tmp_path / "redis-never")
    d = start_daemon(**stream_config(redis, redis_consumer="n", log_level="notice"))
    wait_for(lambda: len(d.events("redis_unreachable")) >= 2, 10, "the refusal of both links", [d])
    time.sleep(1.5)  # backoff 0.2, 0.4, 0.8 s: further attempts fail meanwhile
    warned = d.events("redis_unreachable")
    assert {w["link"] for w in warned} == {"read", "write"}, warned
    assert all(w["level"] == "warning" for w in warned), warned
    assert len(warned) == 2, "retries are not repeated at the default level: %r" % warned
    assert "ECONNREFUSED" in warned[0]["err"], warned[0]
    d.send_signal(signal.SIGTERM)
    assert d.wait() == 0


def test_92_12_a_slow_daemon_keeps_its_entries(redis_server, start_daemon, origin, tmp_path):
    # Pages take 3 s, longer than redis_claim_idle (2 s): a's entries would look idle to b,
    # but a touches them every 0.5 s, so b never takes one, and each line has one record.
    c = redis_server.client()
    n = 6
    xadd_lines(c, "slow", [origin.url("/page?title=w%d&delay=3" % i) for i in range(n)])
    spool_a, spool_b = tmp_path / "spool-a", tmp_path / "spool-b"
    spool_a.mkdir()
    spool_b.mkdir()
    cfg = dict(redis_claim_idle="2s", read_timeout="10s", total_timeout="20s")
    a = start_daemon(spool_dir=spool_a, **stream_config(redis_server, redis_consumer="a", **cfg))
    wait_for(lambda: pending_by_consumer(c).get("a", 0) == n, 10, "a holding every entry", [a])
    b = start_daemon(spool_dir=spool_b, **stream_config(redis_server, redis_consumer="b", **cfg))
    wait_for(lambda: batch_hash(c, "slow").get("done", 0) == n, 30, "every entry", [a, b])
    assert b.events("stream_reclaimed") == []
    assert a.events("stream_entry_taken") == []
    for d in (a, b):
        d.send_signal(signal.SIGTERM)
        assert d.wait() == 0
    recs = all_records([spool_a, spool_b], "slow")
    assert sorted(r["line"] for r in recs) == list(range(1, n + 1))


def test_92_13_a_page_that_crashes_the_parser_is_not_fetched_again(
        redis_server, start_daemon, spool, fresh_origin):
    # The poisoned page takes the daemon down (a failure of ours), its line is noted in
    # out/BATCH.CONSUMER.crashes, and the restart, with the fault still armed, records the
    # entry as ParserCrashed instead of fetching it into the same crash; it is acknowledged
    # like any other, and the note goes once the batch's output is closed.
    import resource
    import subprocess
    o = fresh_origin
    c = redis_server.client()
    marker = "poison-92-13"
    bad = o.url("/page?title=" + marker)
    urls = [o.url("/page?title=g%d" % i) for i in range(3)] + [bad]
    xadd_lines(c, "px", urls)
    env = {"HARVESTD_TEST_PARSE_ABORT": marker}
    cfg = stream_config(redis_server, redis_consumer="n", concurrency="1", per_host="1",
                        parse_jobs="1", flush_ms="20ms")
    note = os.path.join(str(spool.root), "out", "px.n.crashes")
    core = resource.getrlimit(resource.RLIMIT_CORE)
    resource.setrlimit(resource.RLIMIT_CORE, (0, core[1]))
    try:
        d = start_daemon(env=env, **cfg)
        try:
            d.popen.wait(20 * SLOWDOWN)
        except subprocess.TimeoutExpired:
            pytest.fail("the daemon did not abort on the poisoned page\n" + d.stderr_text()[-3000:])
        assert d.popen.returncode == -signal.SIGABRT, d.stderr_text()[-3000:]
        d.rc = d.popen.returncode
        assert open(note).read() == bad + "\n"
        fetched = len(o.find_request(marker))
        d = start_daemon(env=env, **cfg)
        wait_for(lambda: batch_hash(c, "px").get("done", 0) == 4, 20, "every entry", [d])
        wait_for(lambda: not os.path.exists(note), 20, "the note's removal", [d])
    finally:
        resource.setrlimit(resource.RLIMIT_CORE, core)
    assert len(o.find_request(marker)) == fetched
    d.send_signal(signal.SIGTERM)
    assert d.wait() == 0
    recs = {r["line"]: r for r in all_records([spool.root], "px")}
    assert (recs[4]["stage"], recs[4]["error_type"]) == ("parse", "ParserCrashed")
    assert all(recs[i]["status"] == "ok" for i in (1, 2, 3))
    assert pending_total(c) == 0


def test_92_14_entries_name_their_rules(redis_server, harvestd, spool, origin):
    # One batch's entries with two rule sets, in runs: each run of entries is analysed with
    # its own set (a batch has one set at a time: the output is closed and opened again with
    # the next), and an entry naming no set gets the default (default_rules).
    c = redis_server.client()
    urls = [origin.url("/page?title=r%d" % i) for i in range(7)]
    rules = ["one", "one", "two", "two", "", "one", "two"]
    pipeline(c, [["XADD", STREAM, "*", "batch", "rr", "line", i + 1, "url", u] +
                 (["rules", r] if r else []) for i, (u, r) in enumerate(zip(urls, rules))])
    conf = harvestd.daemon_config(spool.root, stream_config(redis_server, redis_consumer="n",
                                                            default_rules="one"))
    with open(conf, "a") as f:
        f.write('\n[rules "one"]\nfirst = title\n\n[rules "two"]\nsecond = title\n')
    d = harvestd.start_daemon(conf).wait_ready()
    wait_for(lambda: batch_hash(c, "rr").get("done", 0) == 7, 20, "every entry", [d])
    d.send_signal(signal.SIGTERM)
    assert d.wait() == 0
    recs = {r["line"]: r for r in all_records([spool.root], "rr")}
    for i, r in enumerate(rules):
        key = "second" if r == "two" else "first"
        assert recs[i + 1]["fields"] == {key: "r%d" % i}, recs[i + 1]
    assert len(d.events("stream_batch_open")) >= 4  # one, two, one, two


# Resident memory a daemon may reach while a server floods it (a plain build; sanitizer builds
# are not held to it): its own few megabytes, with room, and far below the flood.
FLOOD_RSS_KIB = 96 * 1024


def test_92_15_a_reply_over_the_bounds_breaks_the_connection_not_the_memory(start_daemon):
    # XREADGROUP is answered with "$99999999999" and then filler for as long as the daemon
    # reads (up to 1 GiB a time): the daemon refuses the reply at its header, logs the bound,
    # drops the connection and reconnects, and its memory does not follow the flood.
    answers = {"XREADGROUP": flood(b"$99999999999\r\n"),
               "XAUTOCLAIM": b"*3\r\n$3\r\n0-0\r\n*0\r\n*0\r\n",
               "EVAL": b":0\r\n"}
    with ScriptedRedis(answers) as server:
        d = start_daemon(**stream_config(server, redis_consumer="n"))
        peak = [0]

        def refused_three_times():
            peak[0] = max(peak[0], vm_kib(d.pid))
            if peak[0] > FLOOD_RSS_KIB and not SANITIZER:
                d.kill()
                pytest.fail("the daemon's RSS reached %d KiB\n%s"
                            % (peak[0], d.stderr_text()[-3000:]))
            return len([e for e in d.events("redis_reply_over_limit")
                        if e["link"] == "read"]) >= 3

        wait_for(refused_three_times, 20, "three refused reads", [d])
        d.send_signal(signal.SIGTERM)
        assert d.wait() == 0
    print("peak RSS while flooded: %d KiB; filler sent per read: %s" % (peak[0], server.floods))
    refused = d.events("redis_reply_over_limit")
    assert all(e["link"] == "read" and e["url"] == server.url and
               e["limit"] == "a bulk string longer than 1048576 bytes" for e in refused)
    downs = [e for e in d.events("redis_down") if e["link"] == "read"]
    assert len(downs) >= 3 and all(e["err"] == "HV_ETOOBIG" for e in downs)
    assert len([e for e in d.events("redis_up") if e["link"] == "read"]) >= 3  # reconnected
    assert len(server.floods) >= 3 and max(server.floods) < 64 << 20  # cut short each time
