"""Scaling out on one Redis stream, end to end with the commands a user runs: `harvestd
enqueue` a 10,000-line file, three daemons (their own spools) consume it while they are
killed with SIGKILL at random moments (some restarted at once, some later), `harvestd status`
says when the batch is complete, and `harvestd merge` gathers the outputs.

The seed of the random kills is printed (pytest -s shows it): HARVESTD_TEST_SEED=N repeats a
run.
"""

import json
import os
import random
import signal
import time

import pytest

from harness import SLOWDOWN
from redisd import REDIS_SERVER

pytestmark = pytest.mark.skipif(not REDIS_SERVER, reason="redis-server is not installed")

STREAM = "harvestd:urls"


def daemon_config(harvestd, spool_dir, redis, consumer):
    return harvestd.daemon_config(spool_dir, {
        "source": "redis", "redis_url": redis.url, "redis_consumer": consumer,
        "redis_claim_idle": "2s", "concurrency": "8", "queue_size": "100",
        "fsync": "interval", "fsync_interval": "200ms", "log_level": "notice",
    }, name="%s.conf" % consumer)


def status(harvestd, redis, batch):
    r = harvestd.command("status", "--redis", redis.url, "--batch", batch, "--json")
    assert r.returncode in (0, 3), r.stderr
    return r.returncode, json.loads(r.stdout)


def read_outputs(spools, batch):
    """Every record of the batch in every spool's out/ (each line must be one JSON object)."""
    recs = []
    for spool in spools:
        out = os.path.join(str(spool), "out")
        for name in sorted(os.listdir(out)) if os.path.isdir(out) else []:
            if not (name.startswith(batch + ".") and name.endswith(".jsonl")):
                continue
            with open(os.path.join(out, name), "rb") as f:
                data = f.read()
            assert data == b"" or data.endswith(b"\n"), "%s ends with a torn line" % name
            for raw in data.split(b"\n")[:-1]:
                recs.append(json.loads(raw))
    return recs


def logged_lines(daemons, event):
    lines = set()
    for d in daemons:
        for ev in d.events(event):
            lines.add(int(ev["line"]))
    return lines


def test_93_01_three_daemons_killed_at_random_lose_nothing(redis_server, harvestd, origin,
                                                             tmp_path):
    seed = int(os.environ.get("HARVESTD_TEST_SEED", time.time_ns() % 1_000_000))
    print("HARVESTD_TEST_SEED=%d" % seed)
    rnd = random.Random(seed)
    n = 10_000
    # Comments and blank lines in between: line numbers are the file's, not the URLs' order.
    text, by_line, line = [], {}, 0
    for i in range(n):
        if i % 1000 == 0:
            text.append("# part %d" % (i // 1000))
            line += 1
        if i % 777 == 0:
            text.append("")
            line += 1
        url = origin.url("/page?title=m%d&delay=%.3f" % (i, rnd.uniform(0.005, 0.04)))
        text.append(url)
        line += 1
        by_line[line] = url
    path = tmp_path / "big.txt"
    path.write_text("\n".join(text) + "\n")

    r = harvestd.command("enqueue", "--redis", redis_server.url, path, timeout=120)
    assert r.returncode == 0, r.stderr
    batch = "big.txt"

    spools = [tmp_path / ("spool-%d" % i) for i in range(3)]
    configs = []
    for i, spool in enumerate(spools):
        spool.mkdir()
        configs.append(daemon_config(harvestd, spool, redis_server, "node-%d" % i))
    running = [harvestd.start_daemon(c) for c in configs]
    every = list(running)
    kills = 0
    deadline = time.monotonic() + 240 * SLOWDOWN

    def complete():
        rc, _ = status(harvestd, redis_server, batch)
        return rc == 0

    while kills < 6 and time.monotonic() < deadline and not complete():
        time.sleep(rnd.uniform(0.7, 2.0))
        i = rnd.randrange(3)
        d = running[i]
        if d is None:
            running[i] = harvestd.start_daemon(configs[i])
            every.append(running[i])
            continue
        os.kill(d.pid, signal.SIGKILL)
        d.popen.wait()
        kills += 1
        if rnd.random() < 0.6:
            running[i] = harvestd.start_daemon(configs[i])
            every.append(running[i])
        else:
            running[i] = None
    assert kills >= 3, "the run ended before it could be interrupted"
    # The operator brings every machine back (their outputs are repaired at start-up).
    for i in range(3):
        if running[i] is None:
            running[i] = harvestd.start_daemon(configs[i])
            every.append(running[i])
    while not complete():
        assert time.monotonic() < deadline, "not complete in time: %s" % (
            status(harvestd, redis_server, batch),)
        for d in running:
            assert d.running(), d.stderr_text()[-3000:]
        time.sleep(0.3)
    for d in running:
        d.send_signal(signal.SIGTERM)
    for d in running:
        assert d.wait() == 0

    rc, st = status(harvestd, redis_server, batch)
    b = st["batches"][0]
    assert rc == 0 and b["complete"]
    assert (b["added"], b["total"], b["done"], b["pending"]) == (n, n, n, 0)
    assert b["ok"] + b["failed"] == n
    c = redis_server.client()
    assert c.call("XPENDING", STREAM, "harvestd")[0] == 0

    recs = read_outputs(spools, batch)
    assert {r["line"] for r in recs} == set(by_line)
    assert all(r["requested_url"] == by_line[r["line"]] and r["batch"] == batch for r in recs)
    ok_per_line = {}
    for r in recs:
        if r["status"] == "ok":
            ok_per_line[r["line"]] = ok_per_line.get(r["line"], 0) + 1
    again = logged_lines(every, "stream_reclaimed") | logged_lines(every, "stream_redelivered")
    twice = {line for line, k in ok_per_line.items() if k > 1}
    assert twice <= again, sorted(twice - again)[:20]

    merged = tmp_path / "merged.jsonl"
    r = harvestd.command("merge", "--batch", batch, "-o", merged, *spools)
    assert r.returncode == 0, r.stderr
    out = [json.loads(x) for x in merged.read_bytes().split(b"\n")[:-1]]
    assert [x["line"] for x in out] == sorted(by_line)
    assert [x["requested_url"] for x in out] == [by_line[k] for k in sorted(by_line)]
    assert all(x["status"] == "ok" for x in out), [x for x in out if x["status"] != "ok"][:3]
