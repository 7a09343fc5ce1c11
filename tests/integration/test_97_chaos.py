"""Chaos in a fleet on one Redis stream: three daemons (their own spools and consumer names,
`redis_claim_idle` 1 s, so that take-overs happen within the test) and the redis-server they
share are killed with SIGKILL at random moments and started again, Redis with its data (AOF,
`appendfsync always`), until the work is done. The work: a file of N lines put in with
`harvestd enqueue`, a batch whose name is 24 CJK characters and ".txt" (too long for a file
name once spelled) added with XADD, pages that crash the parser (HARVESTD_TEST_PARSE_ABORT) in
both, and entries added by hand that no batch can take (lines that are no line number, a batch
name with a NUL).

Redis restarted with its data loads it before it serves: its dataset has filler keys written
into the AOF's base and `key-load-delay` (a redis-server setting meant for tests) slows the
loading of each, so that a restart answers -LOADING for about a second and a half, which the
daemons must wait out like a connection refused.

What is checked once the work is done: no daemon exited but those the test killed and those
that aborted on a poisoned page (no exit 1 when Redis went away, no sanitizer report, no
handle left open); `harvestd status` says the enqueued batch is complete and the counts of the
other reach its lines; nothing is pending; `harvestd merge` gives exactly one record per line
of each batch, in line order, the CJK one included; a poisoned page's line has a failed record
(ParserCrashed, or Poisoned with its dead letter); the entries no batch can take are dead
letters, each once, with their fields, and were never fetched; every other line has an ok
record (or, were it delivered too often because its daemons kept being killed, a Poisoned one
and its dead letter: accounted for, and printed); and a line has two ok records only if it was
read again or taken over.

Two lengths: the short one (1,000 lines, 10 kills) runs with the suite; HARVESTD_CHAOS=long
(5,000 lines, 40 kills; `make chaos`) runs the long one. The seed of every random choice is
printed (pytest -s shows it): HARVESTD_TEST_SEED=N repeats a run's choices (not its timing).
"""

import json
import os
import random
import resource
import signal
import time

import pytest

from harness import SLOWDOWN, check_sanitizer
from redisd import REDIS_SERVER, RedisError, RedisServer, RespClient
from test_92_stream import pipeline, xadd_lines

pytestmark = pytest.mark.skipif(not REDIS_SERVER, reason="redis-server is not installed")

STREAM = "harvestd:urls"
GROUP = "harvestd"
DEAD = STREAM + ":dead"
CONSUMERS = ["node-0", "node-1", "node-2"]

MODES = {
    # lines enqueued, lines of the CJK batch, kills in all, of which Redis, minimum time the
    # daemons are left alone between two kills, maximum
    "short": dict(lines=1000, cjk_lines=100, kills=10, redis_kills=3, pause=(0.4, 1.4)),
    "long": dict(lines=5000, cjk_lines=400, kills=40, redis_kills=10, pause=(0.4, 1.6)),
}
MODE = os.environ.get("HARVESTD_CHAOS", "short")

# 24 CJK characters and ".txt": 76 bytes, 220 once spelled for a file name (test_96_01).
CJK = "\u6570\u636e\u6293\u53d6\u4efb\u52a1" * 4 + ".txt"
BATCH = "chaos.txt"
POISON = "chaos-poison"          # HARVESTD_TEST_PARSE_ABORT: a page holding it aborts the parser

# Filler keys in the AOF's base file, each loaded key-load-delay microseconds slower: a restart
# answers -LOADING for about 1.5 s (checked before the chaos starts).
FILLER_KEYS = 10_000
KEY_LOAD_DELAY_US = 50

# Fields of the entries added by hand that no batch can take: (batch, line or None for none).
UNPLACEABLE = [
    (BATCH, "0"), (BATCH, "-1"), (BATCH, "abc"), (BATCH, ""), (BATCH, " 16"),
    (BATCH, "18446744073709551616"), (BATCH, "9007199254740992"), (BATCH, None),
    (CJK, "x1"), (CJK, None), ("chaos.txt\x00b", "1"),
]


def daemon_config(harvestd, spool_dir, redis, consumer):
    return harvestd.daemon_config(spool_dir, {
        "source": "redis", "redis_url": redis.url, "redis_consumer": consumer,
        "redis_claim_idle": "1s", "concurrency": "8", "queue_size": "50",
        "fsync": "interval", "fsync_interval": "200ms", "log_level": "notice",
    }, name="%s.conf" % consumer)


def call(redis, *args):
    """One command on a connection of its own; None while Redis is down or loading."""
    try:
        with RespClient(redis.port, timeout=5) as c:
            return c.call(*args)
    except (OSError, RedisError):
        return None


def batch_counts(redis, batch):
    flat = call(redis, "HGETALL", "%s:batch:%s" % (STREAM, batch)) or []
    return {flat[i]: int(flat[i + 1]) for i in range(0, len(flat), 2) if flat[i + 1].isdigit()}


def xrange_all(redis, key):
    """[(id, {field: value})] of a stream (values decoded with surrogateescape)."""
    out = []
    with RespClient(redis.port) as c:
        for item in c.call("XRANGE", key, "-", "+") or []:
            f = item[1]
            out.append((item[0], {f[i]: f[i + 1] for i in range(0, len(f), 2)}))
    return out


def fill_and_rewrite(redis, n):
    """n filler keys, then an AOF rewrite, so that they are in the base file a restart loads
    first (key by key, each slowed by key-load-delay)."""
    with redis.client() as c:
        for start in range(0, n, 1000):
            pipeline(c, [["SET", "chaos:filler:%d" % i, "x" * 16]
                         for i in range(start, min(n, start + 1000))])
        c.call("BGREWRITEAOF")
        deadline = time.monotonic() + 30
        while True:
            info = c.call("INFO", "persistence")
            if ("aof_rewrite_in_progress:0" in info and "aof_rewrite_scheduled:0" in info
                    and "aof_last_bgrewrite_status:ok" in info):
                return
            assert time.monotonic() < deadline, "the AOF rewrite did not end:\n" + info
            time.sleep(0.05)


def loading_replies(redis):
    """After spawn(): how many -LOADING replies a client got before the server served (PING
    answered with PONG)."""
    seen = 0
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            with RespClient(redis.port, timeout=5) as c:
                if c.call("PING") == "PONG":
                    return seen
        except RedisError as e:
            seen += str(e).startswith("LOADING")
        except OSError:
            pass
        time.sleep(0.02)
    pytest.fail("redis-server did not serve again after a restart:\n" + redis.log_tail())


def read_outputs(spools):
    """Every record in every spool's out/*.jsonl, with the file it is in. Each file must end
    with a newline and hold only JSON objects (the daemons were stopped cleanly)."""
    recs = []
    for spool in spools:
        out = os.path.join(str(spool), "out")
        for name in sorted(os.listdir(out)) if os.path.isdir(out) else []:
            if not name.endswith(".jsonl"):
                continue
            with open(os.path.join(out, name), "rb") as f:
                data = f.read()
            assert data == b"" or data.endswith(b"\n"), "%s ends with a torn line" % name
            for raw in data.split(b"\n")[:-1]:
                rec = json.loads(raw)
                assert isinstance(rec, dict), raw[:300]
                recs.append((name, rec))
    return recs


def crash_notes(spool):
    """{note file: [lines]} of a spool's out/*.crashes."""
    out = os.path.join(str(spool), "out")
    notes = {}
    for name in sorted(os.listdir(out)) if os.path.isdir(out) else []:
        if name.endswith(".crashes"):
            with open(os.path.join(out, name), encoding="utf-8", errors="replace") as f:
                notes[name] = f.read().splitlines()
    return notes


class Fleet:
    """The three daemons: started, killed, restarted; a daemon that exits by itself is looked
    at (tend()): one that aborted on a poisoned page (its crash note names one) is started
    again, any other exit fails the test."""

    def __init__(self, harvestd, configs, spools, poison_urls):
        self.harvestd = harvestd
        self.configs = configs
        self.spools = spools
        self.poison_urls = poison_urls
        self.running = [None] * len(configs)
        self.every = []
        self.killed = []         # daemons the test killed
        self.aborted = []        # daemons that aborted on a poisoned page

    def start(self, i):
        d = self.harvestd.start_daemon(self.configs[i], env={"HARVESTD_TEST_PARSE_ABORT": POISON})
        self.running[i] = d
        self.every.append(d)
        return d

    def kill(self, i):
        d = self.running[i]
        os.kill(d.pid, signal.SIGKILL)
        d.popen.wait()
        if d.popen.returncode != -signal.SIGKILL:  # it had died of its own meanwhile
            self._died(i, d)
            return
        d.rc = d.popen.returncode
        self.killed.append(d)
        self.running[i] = None

    def tend(self):
        for i, d in enumerate(self.running):
            if d is not None and d.popen.poll() is not None:
                self._died(i, d)
                self.start(i)

    def _died(self, i, d):
        rc = d.popen.returncode
        d.rc = rc
        check_sanitizer(d.stderr_text())
        if rc != -signal.SIGABRT:
            pytest.fail("%s exited by itself with status %s\n%s"
                        % (CONSUMERS[i], rc, d.stderr_text()[-6000:]))
        notes = crash_notes(self.spools[i])
        noted = [line for lines in notes.values() for line in lines]
        assert noted and set(noted) <= self.poison_urls, \
            "%s aborted, but its crash notes name no poisoned page only: %r\n%s" % (
                CONSUMERS[i], notes, d.stderr_text()[-4000:])
        self.aborted.append(d)
        self.running[i] = None

    def events(self, event):
        return [e for d in self.every for e in d.events(event)]

    def kill_all(self):
        for d in self.every:
            d.kill()


def test_97_01_daemons_and_redis_killed_at_random_lose_nothing(harvestd, fresh_origin, tmp_path):
    """The fleet under SIGKILL (see the module's docstring for everything that is checked)."""
    mode = MODES[MODE]
    seed = int(os.environ.get("HARVESTD_TEST_SEED", time.time_ns() % 1_000_000))
    print("HARVESTD_TEST_SEED=%d HARVESTD_CHAOS=%s" % (seed, MODE))
    rnd = random.Random(seed)
    origin = fresh_origin
    began = time.monotonic()

    # The enqueued file: comments and blank lines in between (line numbers are the file's),
    # poisoned pages at random places.
    n = mode["lines"]
    poison_at = set(rnd.sample(range(n), 3))
    text, expected, line = [], {BATCH: {}, CJK: {}}, 0
    for i in range(n):
        if i % 250 == 0:
            text.append("# part %d" % (i // 250))
            line += 1
        if i % 333 == 0:
            text.append("")
            line += 1
        if i in poison_at:
            url = origin.url("/page?title=%s-%d" % (POISON, i))
        else:
            url = origin.url("/page?title=c%d&delay=%.3f" % (i, rnd.uniform(0.05, 0.25)))
        text.append(url)
        line += 1
        expected[BATCH][line] = url
    path = tmp_path / BATCH
    path.write_text("\n".join(text) + "\n")
    cjk_urls = [origin.url("/page?title=k%d&delay=%.3f" % (i, rnd.uniform(0.05, 0.25)))
                for i in range(mode["cjk_lines"])]
    cjk_urls[rnd.randrange(len(cjk_urls))] = origin.url("/page?title=%s-k" % POISON)
    poison_urls = {u for lines in expected.values() for u in lines.values() if POISON in u}
    poison_urls |= {u for u in cjk_urls if POISON in u}

    redis = RedisServer(tmp_path / "redis", appendonly=True, fsync_always=True,
                        options=["--key-load-delay", KEY_LOAD_DELAY_US,
                                 "--loading-process-events-interval-bytes", "1024"])
    core = resource.getrlimit(resource.RLIMIT_CORE)
    fleet = None
    try:
        resource.setrlimit(resource.RLIMIT_CORE, (0, core[1]))  # the aborts leave no cores
        redis.start()
        fill_and_rewrite(redis, FILLER_KEYS)
        # The premise: a restart loads the data for long enough to be seen loading.
        redis.kill()
        t = time.monotonic()
        seen = loading_replies(redis.spawn())
        print("redis-server loaded its data in %.2fs (%d LOADING replies)"
              % (time.monotonic() - t, seen))
        assert seen >= 3, "a restart of redis-server was not seen loading:\n" + redis.log_tail()

        with redis.client() as c:
            expected[CJK] = xadd_lines(c, CJK, cjk_urls)
            unplaceable = {}
            for k, (batch, value) in enumerate(UNPLACEABLE):
                url = origin.url("/page?title=unplaceable-%d" % k)
                fields = ["batch", batch] + (["line", value] if value is not None else [])
                fields += ["url", url]
                unplaceable[c.call("XADD", STREAM, "*", *fields)] = fields
        r = harvestd.command("enqueue", "--redis", redis.url, path, timeout=120)
        assert r.returncode == 0, r.stderr

        spools = [tmp_path / ("spool-%d" % i) for i in range(3)]
        configs = []
        for i, spool in enumerate(spools):
            spool.mkdir()
            configs.append(daemon_config(harvestd, spool, redis, CONSUMERS[i]))
        fleet = Fleet(harvestd, configs, spools, poison_urls)
        for i in range(3):
            fleet.start(i)

        def done():
            if batch_counts(redis, BATCH).get("done", 0) < n or \
                    batch_counts(redis, CJK).get("done", 0) < len(expected[CJK]):
                return False
            summary = call(redis, "XPENDING", STREAM, GROUP)
            return summary is not None and summary[0] == 0

        def pause(seconds):
            """The test's own timing between two kills; the fleet is tended meanwhile."""
            until = time.monotonic() + seconds
            while time.monotonic() < until:
                fleet.tend()
                time.sleep(0.05)

        def wait_until(predicate, timeout, what):
            deadline = time.monotonic() + timeout * SLOWDOWN
            while not predicate():
                fleet.tend()
                if time.monotonic() > deadline:
                    logs = "\n".join(d.stderr_text()[-3000:] for d in fleet.running if d)
                    pytest.fail("timed out after %ss waiting for %s (seed %d)\n%s"
                                % (timeout, what, seed, logs))
                time.sleep(0.05)

        # The plan: which kills, in which order (a Redis kill among the first three).
        plan = ["redis"] * mode["redis_kills"] + ["daemon"] * (mode["kills"] - mode["redis_kills"])
        rnd.shuffle(plan)
        if "redis" not in plan[:3]:
            j, first = plan.index("redis"), rnd.randrange(3)
            plan[j], plan[first] = plan[first], plan[j]
        kills = {"redis": 0, "redis_loading": 0}
        for what in plan:
            if done():
                break
            pause(rnd.uniform(*mode["pause"]))
            if what == "redis":
                redis.kill()
                kills["redis"] += 1
                pause(rnd.uniform(0.0, 1.0))
                redis.spawn()
                if rnd.random() < 0.3:  # again, while it loads
                    pause(rnd.uniform(0.1, 1.0))
                    redis.kill()
                    kills["redis_loading"] += 1
                    redis.spawn()
                wait_until(lambda: call(redis, "PING") == "PONG", 30, "Redis serving again")
                continue
            i = rnd.randrange(3)
            if fleet.running[i] is None:  # down since an earlier kill: back first
                fleet.start(i)
                pause(rnd.uniform(0.2, 1.0))
            if fleet.running[i] is None:
                continue
            fleet.kill(i)
            if rnd.random() < 0.6:
                fleet.start(i)
        chaos_s = time.monotonic() - began
        kills["daemon"] = len(fleet.killed)
        print("kills: %d of daemons, %d of Redis (%d more while it loaded), in %.1fs"
              % (kills["daemon"], kills["redis"], kills["redis_loading"], chaos_s))
        assert kills["daemon"] >= 3 and kills["redis"] >= 1, \
            "the work was done before it could be interrupted: %r" % kills
        # The operator brings every machine back.
        for i in range(3):
            if fleet.running[i] is None:
                fleet.start(i)
        wait_until(done, 180 if MODE == "long" else 120, "every entry acknowledged")
        for d in fleet.running:
            d.wait_ready()
            d.send_signal(signal.SIGTERM)
        for d in fleet.running:
            assert d.wait() == 0, d.stderr_text()[-3000:]
        for d in fleet.every:
            check_sanitizer(d.stderr_text())
            assert "event=redis_fatal" not in d.stderr_text(), d.stderr_text()[-5000:]
        print("done in %.1fs; aborts on poisoned pages: %d; daemons started: %d"
              % (time.monotonic() - began, len(fleet.aborted), len(fleet.every)))

        check_outcome(harvestd, redis, fleet, origin, spools, expected, unplaceable, n,
                      poison_urls, tmp_path, kills)
    finally:
        resource.setrlimit(resource.RLIMIT_CORE, core)
        if fleet is not None:
            fleet.kill_all()
        redis.kill()  # its data is of no more use
    print("HARVESTD_TEST_SEED=%d: %.1fs in all" % (seed, time.monotonic() - began))


def check_outcome(harvestd, redis, fleet, origin, spools, expected, unplaceable, n, poison_urls,
                  tmp_path, kills):
    """What the fleet left, once stopped: see the module's docstring."""
    # Redis: every batch done, nothing pending, the dead letters.
    r = harvestd.command("status", "--redis", redis.url, "--batch", BATCH, "--json")
    assert r.returncode == 0, r.stdout + r.stderr
    st = json.loads(r.stdout)
    b = st["batches"][0]
    assert b["complete"] and (b["added"], b["total"], b["done"], b["pending"]) == (n, n, n, 0), b
    assert b["ok"] + b["failed"] == n, b
    r = harvestd.command("status", "--redis", redis.url, "--batch", CJK, "--json")
    assert r.returncode == 3, r.stdout + r.stderr  # no total: it was not enqueued
    k = json.loads(r.stdout)["batches"][0]
    m = len(expected[CJK])
    assert (k["done"], k["pending"], k["ok"] + k["failed"]) == (m, 0, m), k
    assert st["pending"] == 0 and call(redis, "XPENDING", STREAM, GROUP)[0] == 0

    dead = xrange_all(redis, DEAD)
    assert st.get("dead_letters", 0) == len(dead), (st, len(dead))
    by_id = {}
    for _, f in dead:
        assert f["id"] not in by_id, "entry %s moved to the dead letters twice" % f["id"]
        by_id[f["id"]] = f
        assert f["consumer"] in CONSUMERS, f
    for entry_id, fields in unplaceable.items():
        f = by_id.get(entry_id)
        assert f is not None, "entry %s (%r) is no dead letter" % (entry_id, fields)
        reason = "batch_invalid" if "\x00" in fields[1] else "line_invalid"
        assert f["reason"] == reason, f
        own = {fields[i]: fields[i + 1] for i in range(0, len(fields), 2)}
        assert {key: f[key] for key in own} == own, (f, own)
    assert not origin.find_request("unplaceable-"), "an entry no batch can take was fetched"
    poisoned = {}
    for entry_id, f in by_id.items():
        if entry_id in unplaceable:
            continue
        assert f["reason"] == "poisoned", f
        line = int(f["line"])
        assert expected[f["batch"]][line] == f["url"], f
        poisoned[(f["batch"], line)] = f
    assert b.get("dead", 0) == sum(1 for key in poisoned if key[0] == BATCH), (b, poisoned)

    # The outputs: whole, every record of a line of its batch, duplicates only where read
    # again.
    recs = read_outputs(spools)
    again = {(e["batch"], int(e["line"]))
             for e in fleet.events("stream_reclaimed") + fleet.events("stream_redelivered")}
    ok_count, records_of = {}, {}
    for name, rec in recs:
        key = (rec.get("batch"), rec.get("line"))
        assert key[0] in expected and key[1] in expected[key[0]], (name, rec)
        assert rec["requested_url"] == expected[key[0]][key[1]], (name, rec)
        records_of.setdefault(key, []).append(rec)
        if rec["status"] == "ok":
            ok_count[key] = ok_count.get(key, 0) + 1
    twice = {key for key, c in ok_count.items() if c > 1}
    assert twice <= again, sorted(twice - again)[:20]

    # merge: exactly one record per line, in line order; each line's verdict.
    worn_out, verdicts = [], []
    for nth, (batch, lines) in enumerate(expected.items()):
        merged = tmp_path / ("merged-%d.jsonl" % nth)
        r = harvestd.command("merge", "--batch", batch, "--entries", len(lines), "-o", merged,
                             *spools)
        assert r.returncode == 0, r.stderr
        assert "; 0 of %d entries without a record)" % len(lines) in r.stderr, r.stderr
        assert "0 invalid lines, 0 torn lines" in r.stderr, r.stderr
        out = [json.loads(x) for x in merged.read_bytes().split(b"\n")[:-1]]
        assert [x["line"] for x in out] == sorted(lines), batch
        for x in out:
            key = (batch, x["line"])
            assert x["batch"] == batch and x["requested_url"] == lines[x["line"]], x
            if key in poisoned:
                assert any(rec.get("error_type") == "Poisoned" for rec in records_of[key]), \
                    (key, records_of[key])
            if x["requested_url"] in poison_urls:
                assert x["status"] == "failed" and \
                    x["error_type"] in ("ParserCrashed", "Poisoned"), x
                assert x["error_type"] != "Poisoned" or key in poisoned, x
                verdicts.append("%s:%d %s" % ("cjk" if batch == CJK else batch, x["line"],
                                              x["error_type"]))
                continue
            if x["status"] == "ok" or key in poisoned:
                if key in poisoned:
                    worn_out.append(key)  # delivered too often: its daemons kept being killed
                continue
            pytest.fail("line %d of %s has no ok record: %r" % (x["line"], batch, x))
    # A crash note left behind (its daemon had no more entries of the batch, or was stopped
    # before the batch went quiet) names only poisoned pages.
    for spool in spools:
        for name, noted in crash_notes(spool).items():
            assert set(noted) <= poison_urls, (spool, name, noted)
    not_ready = [e for e in fleet.events("redis_not_ready") if e.get("reply") == "LOADING"]
    print("poisoned pages: %s; lines read again or taken over: %d, with two ok records: %d; "
          "LOADING replies to the daemons: %d; lines delivered too often that were no poisoned "
          "page: %d %s" % (", ".join(verdicts), len(again), len(twice), len(not_ready),
                           len(worn_out), sorted(worn_out)[:10]))
    assert not_ready, "no daemon was ever answered -LOADING though Redis was restarted %d times" \
        % kills["redis"]
