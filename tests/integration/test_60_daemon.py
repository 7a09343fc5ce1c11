"""The spool daemon (`harvestd -c CONFIG`): discovery, claiming, outputs, summaries, done/ and
rejected/, names, several batches at once."""

import json
import os
import shutil
import subprocess
import tempfile
import time

import pytest

from harness import (HARVESTD_BIN, SLOWDOWN, Spool, assert_failed, assert_ok, by_url,
                     check_batch, check_summary, page_urls, title_of, wait_complete, write_config)


def test_60_01_three_files_dropped_at_once(start_daemon, spool, origin):
    d = start_daemon()
    dropped = {}
    urls = {"batch-%d.txt" % n: page_urls(origin, "f%d-" % n, 4 + n) for n in range(3)}
    for name, u in urls.items():
        dropped[name] = spool.drop(name, u)
    wait_complete(d, spool, urls)
    for name, u in urls.items():
        recs = check_batch(spool, name, dropped[name])
        for r in recs:
            assert_ok(r, title_of(r["requested_url"]))
        assert spool.summary(name)["ok"] == len(u)
    assert spool.files("incoming") == []
    assert spool.files("active") == []
    assert spool.files("rejected") == []
    assert spool.files("done") == sorted(urls)
    assert spool.files("out") == sorted([n + ".jsonl" for n in urls] + [n + ".summary.json" for n in urls]), \
        "out/ holds something else (a temporary file left behind?)"
    d.poll_until(lambda: len(d.events("batch_done")) == 3, 2, "three batch_done events")
    assert sorted(e["batch"] for e in d.events("batch_done")) == sorted(urls)
    assert d.stop() == 0


def test_60_02_start_up_scan_creates_the_subdirectories(start_daemon, spool, origin):
    # Only spool_dir/incoming exists, holding a file before the daemon starts; with a rescan
    # interval of an hour only the start-up scan can find it.
    os.makedirs(spool.path("incoming"))
    data = spool.drop("early.txt", page_urls(origin, "early", 3))
    d = start_daemon(rescan_interval="1h", fsync="never")
    for sub in ("incoming", "active", "done", "rejected", "out"):
        assert os.path.isdir(spool.path(sub)), "%s/ was not created" % sub
    wait_complete(d, spool, ["early.txt"], timeout=5)
    check_batch(spool, "early.txt", data)
    assert d.stop() == 0


def test_60_03_inotify_finds_a_new_file_at_once(start_daemon, spool, origin):
    d = start_daemon(rescan_interval="1h")
    data = spool.drop("new.txt", page_urls(origin, "new", 2))
    dropped = time.monotonic()
    wait_complete(d, spool, ["new.txt"], timeout=3)
    assert time.monotonic() - dropped < 2 * SLOWDOWN
    check_batch(spool, "new.txt", data)
    assert d.stop() == 0


def test_60_04_periodic_rescan_finds_what_inotify_missed(start_daemon, spool, origin):
    # incoming/ replaced by a new directory: the watch still points at the old one, so only
    # the periodic rescan (by path) can see a file dropped into the new one. The scan that
    # the move itself triggers (20 ms later) is let pass first.
    d = start_daemon(rescan_interval="300ms")
    os.rename(spool.path("incoming"), spool.path("incoming.old"))
    os.mkdir(spool.path("incoming"))
    time.sleep(0.15)
    data = spool.drop("missed.txt", page_urls(origin, "missed", 2))
    wait_complete(d, spool, ["missed.txt"], timeout=5)
    check_batch(spool, "missed.txt", data)
    assert d.stop() == 0


def test_60_05_file_dropped_while_another_runs(start_daemon, spool, fresh_origin):
    o = fresh_origin
    held = [o.url("/hold?key=A&title=held%d" % i) for i in range(3)]
    quick_a = o.url("/page?title=quickA")
    d = start_daemon(flush_ms="20ms")
    data_a = spool.drop("a.txt", held + [quick_a])
    d.poll_until(lambda: len(o.find_request("key=A")) == 3, 5, "the held requests of a.txt")
    # Records are appended as they complete: a.txt's finished record is there while it runs.
    d.poll_until(lambda: len(spool.output_lines("a.txt")) == 1, 5, "a.txt's first record")
    assert spool.records("a.txt", complete=False)[0]["requested_url"] == quick_a
    assert spool.files("active") == ["a.txt"]

    data_b = spool.drop("b.txt", page_urls(o, "b", 5))
    wait_complete(d, spool, ["b.txt"], timeout=5)
    check_batch(spool, "b.txt", data_b)
    assert not spool.has_summary("a.txt"), "a.txt completed while its requests were held"
    assert spool.files("active") == ["a.txt"]

    o.release("A")
    wait_complete(d, spool, ["a.txt"], timeout=5)
    recs = check_batch(spool, "a.txt", data_a)
    assert sorted(r["title"] for r in recs) == ["held0", "held1", "held2", "quickA"]
    assert d.stop() == 0


@pytest.mark.parametrize("limit", [2, None], ids=["two", "default-four"])
def test_60_06_max_active_batches(start_daemon, spool, fresh_origin, limit):
    o = fresh_origin
    n = limit or 4
    d = start_daemon(max_active_batches=limit, rescan_interval="200ms")
    data = {}
    for k in range(n + 1):
        data["h%d.txt" % k] = spool.drop("h%d.txt" % k, [o.url("/hold?key=k%d&title=h%d" % (k, k))])
        time.sleep(0.02)  # distinct mtimes: files are claimed oldest first
    names = sorted(data)
    d.poll_until(lambda: len(spool.files("active")) == n, 5, "%d batches active" % n)
    d.poll_until(lambda: len(o.find_request("/hold")) == n, 5, "%d held requests" % n)
    time.sleep(0.6)  # three rescans: the last file must still wait
    assert spool.files("active") == names[:n]
    assert spool.files("incoming") == names[n:]
    assert len(o.find_request("/hold")) == n
    o.release("k0")
    d.poll_until(lambda: spool.files("active") == names[1:], 5,
                 "the last file claimed once h0.txt finished")
    for k in range(1, n + 1):
        o.release("k%d" % k)
    wait_complete(d, spool, data, timeout=5)
    for name, raw in data.items():
        check_batch(spool, name, raw)
    assert d.stop() == 0


def test_60_07_two_daemons_never_take_the_same_file(harvestd, spool, origin):
    """Claim race: two daemons on one spool, files present at their start-up and dropped while
    they run; every file is processed exactly once, by one of them."""
    config = harvestd.daemon_config(spool.root, {"rescan_interval": "200ms", "max_active_batches": 4})
    os.makedirs(spool.path("incoming"))
    data = {}
    for n in range(10):
        name = "pre-%02d.txt" % n
        data[name] = spool.drop(name, page_urls(origin, "pre%d-" % n, 3))
    daemons = [harvestd.start_daemon(config) for _ in range(2)]
    for d in daemons:
        d.wait_ready()
    for n in range(20):
        name = "race-%02d.txt" % n
        data[name] = spool.drop(name, page_urls(origin, "race%d-" % n, 3 + n % 3))
    daemons[0].poll_until(lambda: all(spool.has_summary(n) for n in data)
                          and set(spool.files("done")) == set(data), 20,
                          lambda: "all 30 batches (spool: %r)" % (spool.listing(),))
    for d in daemons:
        assert d.running()
    # Each file once: no suffixed name anywhere, one output and summary per file.
    assert spool.files("done") == sorted(data)
    assert spool.files("out") == sorted([n + ".jsonl" for n in data] + [n + ".summary.json" for n in data])
    assert spool.files("active") == [] and spool.files("incoming") == [] and spool.files("rejected") == []
    for name, raw in data.items():
        recs = check_batch(spool, name, raw)
        by_url(recs)  # no URL twice
        for r in recs:
            assert_ok(r, title_of(r["requested_url"]))
    rcs = [d.stop() for d in daemons]
    assert rcs == [0, 0]
    started = [e["batch"] for d in daemons for e in d.events("batch_start")]
    assert sorted(started) == sorted(data), "batches started: %r" % sorted(started)
    done = [e["batch"] for d in daemons for e in d.events("batch_done")]
    assert sorted(done) == sorted(data), "batches done: %r" % sorted(done)
    print("batches per daemon: %r" % [len(d.events("batch_done")) for d in daemons])


def test_60_08_binary_file_is_rejected(start_daemon, spool, origin):
    d = start_daemon()
    spool.drop("image.png", b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
    spool.drop("late-nul.txt", origin.url("/page?title=x").encode() + b"\n" * 3 + b"abc\x00def\n")
    good = spool.drop("good.txt", page_urls(origin, "good", 2))
    wait_complete(d, spool, ["good.txt"], timeout=5)
    d.poll_until(lambda: len(spool.files("rejected")) == 4, 5, "two rejected files with reasons")
    assert spool.files("rejected") == ["image.png", "image.png.reason", "late-nul.txt", "late-nul.txt.reason"]
    with open(spool.path("rejected", "image.png.reason")) as f:
        assert f.read() == "binary file: NUL byte at offset 8\n"
    offset = len(origin.url("/page?title=x")) + 3 + 3
    with open(spool.path("rejected", "late-nul.txt.reason")) as f:
        assert f.read() == "binary file: NUL byte at offset %d\n" % offset
    for name in ("image.png", "late-nul.txt"):
        assert not os.path.exists(spool.path("out", name + ".jsonl")), "%s got an output" % name
        assert not spool.has_summary(name)
    assert spool.files("done") == ["good.txt"]
    check_batch(spool, "good.txt", good)
    d.poll_until(lambda: len(d.events("rejected")) == 2, 2, "two rejected events")
    rejected = sorted(e["file"] for e in d.events("rejected"))
    assert rejected == ["image.png", "late-nul.txt"], d.events("rejected")
    # Another file of the same name is rejected beside the first, which is kept.
    spool.drop("image.png", b"GIF89a\x01\x00\x00")
    d.poll_until(lambda: len(spool.files("rejected")) == 6, 5, "the second image.png rejected")
    assert spool.files("rejected") == ["image.png", "image.png.1", "image.png.1.reason", "image.png.reason",
                                       "late-nul.txt", "late-nul.txt.reason"]
    with open(spool.path("rejected", "image.png.1.reason")) as f:
        assert f.read() == "binary file: NUL byte at offset 7\n"
    with open(spool.path("rejected", "image.png.reason")) as f:
        assert f.read() == "binary file: NUL byte at offset 8\n"
    with open(spool.path("rejected", "image.png.1"), "rb") as f:
        assert f.read() == b"GIF89a\x01\x00\x00"
    assert d.stop() == 0


def test_60_09_empty_file_completes_with_an_empty_output(start_daemon, spool):
    d = start_daemon()
    spool.drop("empty.txt", b"")
    spool.drop("only-comments.txt", b"# nothing here\n\n   \n#http://127.0.0.1/x\n")
    wait_complete(d, spool, ["empty.txt", "only-comments.txt"], timeout=5)
    for name in ("empty.txt", "only-comments.txt"):
        assert spool.output_bytes(name) == b""
        assert os.path.exists(spool.path("out", name + ".jsonl")), "no (empty) output for %s" % name
        s = check_summary(spool.summary(name), name, [])
        assert (s["records"], s["ok"], s["failed"], s["body_bytes_total"]) == (0, 0, 0, 0)
        assert s["error_types"] == {} and s["http_statuses"] == {}
    assert spool.files("rejected") == []
    assert d.stop() == 0


def test_60_10_invalid_lines_get_input_records(start_daemon, spool, origin):
    good = origin.url("/page?title=fine")
    lines = [b"not a url", b"ftp://example.org/file", b"", b"# comment", good,
             b"http://127.0.0.1/a\x01b", b"http://127.0.0.1/\xff\xfe", b"  " + good.encode() + b"  \r",
             b"http://127.0.0.1:99999/"]
    d = start_daemon()
    data = spool.drop("mixed.txt", lines)
    wait_complete(d, spool, ["mixed.txt"], timeout=5)
    recs = check_batch(spool, "mixed.txt", data)
    assert len(recs) == 7
    ok = [r for r in recs if r["status"] == "ok"]
    assert [r["requested_url"] for r in ok] == [good, good]
    for r in ok:
        assert_ok(r, "fine")
    failed = {r["requested_url"]: r for r in recs if r["status"] == "failed"}
    assert_failed(failed["not a url"], "input", "InvalidUrl")
    assert_failed(failed["ftp://example.org/file"], "input", "UnsupportedScheme")
    assert_failed(failed["http://127.0.0.1/a\x01b"], "input", "InvalidUrl")
    assert_failed(failed["http://127.0.0.1:99999/"], "input", "InvalidUrl")
    bad_utf8 = [r for u, r in failed.items() if u.startswith("http://127.0.0.1/\ufffd")]
    assert len(bad_utf8) == 1
    assert_failed(bad_utf8[0], "input", "InvalidUrl")
    s = spool.summary("mixed.txt")
    assert s["error_types"] == {"InvalidUrl": 4, "UnsupportedScheme": 1}
    assert s["http_statuses"] == {"200": 2}
    assert d.stop() == 0


def test_60_11_names_with_spaces_and_non_ascii(start_daemon, spool, origin):
    names = ["my urls.txt", "  leading and trailing  ", "ünïcødé €ürö 日本.txt", "quote\"and\\back'slash.txt"]
    d = start_daemon()
    data = {n: spool.drop(n, page_urls(origin, "n%d-" % i, 2)) for i, n in enumerate(names)}
    wait_complete(d, spool, names, timeout=5)
    for name in names:
        check_batch(spool, name, data[name])
    # A name that is not UTF-8 (file names are bytes): processed, the summary's batch shows
    # U+FFFD for the bad bytes.
    raw = b"latin1-\xe9t\xe9.txt"
    spool.drop(raw, page_urls(origin, "latin", 1))
    out, done = os.fsencode(spool.path("out")), os.fsencode(spool.path("done"))
    d.poll_until(lambda: os.path.exists(os.path.join(out, raw + b".summary.json"))
                 and os.path.exists(os.path.join(done, raw)), 5, "the non-UTF-8 name's summary")
    with open(os.path.join(out, raw + b".summary.json"), "rb") as f:
        s = json.loads(f.read().decode("utf-8"))
    assert s["batch"] == raw.decode("utf-8", "replace"), s
    assert s["records"] == 1 and s["ok"] == 1
    assert d.stop() == 0


def test_60_12_dotfiles_tmp_files_and_fifos_are_ignored(start_daemon, spool, origin):
    d = start_daemon(rescan_interval="200ms")
    ignored = [".hidden", ".urls.txt", "upload.tmp", "x.txt.tmp"]
    for name in ignored:
        spool.drop(name, page_urls(origin, "ign", 1))
    os.mkfifo(spool.path("incoming", "pipe"))
    os.mkdir(spool.path("incoming", "subdir"))
    data = spool.drop("sentinel.txt", page_urls(origin, "sentinel", 1))
    wait_complete(d, spool, ["sentinel.txt"], timeout=5)
    check_batch(spool, "sentinel.txt", data)
    time.sleep(0.6)  # three more rescans
    assert spool.files("incoming") == sorted(ignored + ["pipe", "subdir"])
    assert spool.files("active") == []
    assert spool.files("done") == ["sentinel.txt"]
    # The same files under ordinary names are taken.
    os.rename(spool.path("incoming", "upload.tmp"), spool.path("incoming", "upload.txt"))
    os.rename(spool.path("incoming", ".hidden"), spool.path("incoming", "hidden"))
    wait_complete(d, spool, ["upload.txt", "hidden"], timeout=5)
    assert spool.files("incoming") == sorted([".urls.txt", "x.txt.tmp", "pipe", "subdir"])
    assert d.stop() == 0


def test_60_13_unreadable_file_is_rejected(harvestd, tmp_path, origin):
    """A file the daemon cannot open goes to rejected/ with the reason. Root reads any file, so
    as root the daemon runs as nobody on a spool of its own (outside tmp_path, whose parents
    only root may enter), and the file belongs to root with mode 0600."""
    nobody = 65534
    as_root = os.geteuid() == 0
    base = tempfile.mkdtemp(prefix="harvestd-spool-") if as_root else str(tmp_path)
    try:
        if as_root:
            os.chmod(base, 0o755)
            try:
                probe = subprocess.run([HARVESTD_BIN, "--version"], user=nobody, group=nobody,
                                       extra_groups=[], stdout=subprocess.PIPE,
                                       stderr=subprocess.STDOUT, timeout=10)
            except OSError as e:
                pytest.skip("cannot run harvestd as nobody: %s" % e)
            if probe.returncode != 0:
                pytest.skip("cannot run harvestd as nobody: %r" % probe.stdout)
        spool = Spool(os.path.join(base, "spool"))
        for sub in ("incoming", "active", "done", "rejected", "out"):
            os.makedirs(spool.path(sub), exist_ok=True)
        config = write_config(os.path.join(base, "d.conf"),
                              {"spool_dir": spool.root, "rescan_interval": "200ms", "log_level": "info"})
        if as_root:
            for dirpath, _, filenames in os.walk(base):
                os.chown(dirpath, nobody, nobody)
                for f in filenames:
                    os.chown(os.path.join(dirpath, f), nobody, nobody)
        spool.drop("secret.txt", page_urls(origin, "secret", 1))
        os.chmod(spool.path("incoming", "secret.txt"), 0o600 if as_root else 0o000)
        d = harvestd.start_daemon(config, user=nobody if as_root else None).wait_ready()
        d.poll_until(lambda: "secret.txt.reason" in spool.files("rejected"), 5, "secret.txt rejected")
        assert spool.files("rejected") == ["secret.txt", "secret.txt.reason"]
        with open(spool.path("rejected", "secret.txt.reason")) as f:
            reason = f.read()
        assert reason == "unreadable: Permission denied\n", reason
        assert not spool.has_summary("secret.txt")
        assert not os.path.exists(spool.path("out", "secret.txt.jsonl"))
        # The daemon goes on with the next file.
        good = spool.drop("good.txt", page_urls(origin, "good", 1))
        wait_complete(d, spool, ["good.txt"], timeout=5)
        check_batch(spool, "good.txt", good)
        assert d.stop() == 0
    finally:
        harvestd.cleanup()
        if as_root:
            shutil.rmtree(base, ignore_errors=True)


def test_60_14_name_collision_gets_a_numeric_suffix(start_daemon, spool, origin):
    d = start_daemon()
    first = spool.drop("urls.txt", page_urls(origin, "first", 2))
    wait_complete(d, spool, ["urls.txt"], timeout=5)
    second = spool.drop("urls.txt", page_urls(origin, "second", 3))
    wait_complete(d, spool, ["urls.txt.1"], timeout=5)
    third = spool.drop("urls.txt", page_urls(origin, "third", 1))
    wait_complete(d, spool, ["urls.txt.2"], timeout=5)
    for name, raw, prefix in (("urls.txt", first, "first"), ("urls.txt.1", second, "second"),
                              ("urls.txt.2", third, "third")):
        recs = check_batch(spool, name, raw)
        assert all(r["title"].startswith(prefix) for r in recs), recs
    # A name taken by a batch still running (active/) is not reused either.
    held = spool.drop("busy.txt", [origin.url("/hold?key=busy-first&title=busy")])
    d.poll_until(lambda: spool.files("active") == ["busy.txt"], 5, "busy.txt active")
    other = spool.drop("busy.txt", page_urls(origin, "other", 2))
    wait_complete(d, spool, ["busy.txt.1"], timeout=5)
    check_batch(spool, "busy.txt.1", other)
    assert spool.files("active") == ["busy.txt"]
    origin.release("busy-first")
    wait_complete(d, spool, ["busy.txt"], timeout=5)
    check_batch(spool, "busy.txt", held)
    # A name taken only by a leftover output in out/ is not reused either.
    with open(spool.path("out", "stale.txt.jsonl"), "wb") as f:
        f.write(b'{"requested_url":"x","status":"failed"}\n')
    stale = spool.drop("stale.txt", page_urls(origin, "stale", 1))
    wait_complete(d, spool, ["stale.txt.1"], timeout=5)
    check_batch(spool, "stale.txt.1", stale)
    assert spool.output_bytes("stale.txt") == b'{"requested_url":"x","status":"failed"}\n'
    assert d.stop() == 0


def test_60_15_summary_counts_outcomes(start_daemon, spool, origin):
    # Only failures that are final at once (nothing a retry would try again).
    lines = [origin.url("/page?title=a&size=1000"), origin.url("/page?title=b&size=3000"),
             origin.url("/status/404"), origin.url("/status/410"), origin.url("/redirect/2"),
             origin.url("/notitle"), origin.url("/garbage"), "nope"]
    d = start_daemon()
    data = spool.drop("counts.txt", lines)
    wait_complete(d, spool, ["counts.txt"], timeout=8)
    recs = by_url(check_batch(spool, "counts.txt", data))
    s = spool.summary("counts.txt")
    assert (s["records"], s["ok"], s["failed"], s["resumed"]) == (8, 3, 5, 0), s
    assert s["error_types"] == {"HttpStatus": 2, "MissingTitle": 1, "ProtocolError": 1, "InvalidUrl": 1}, s
    assert s["http_statuses"] == {"200": 4, "404": 1, "410": 1}, s
    assert recs[lines[0]]["bytes"] == 1000 and recs[lines[1]]["bytes"] == 3000
    assert s["body_bytes_total"] >= 4000
    with_bytes = [r["bytes"] for r in recs.values() if "bytes" in r]
    assert s["body_bytes_mean"] == sum(with_bytes) // len(with_bytes)
    assert d.stop() == 0


@pytest.mark.parametrize("hosts", ["same-host", "two-hosts"])
def test_60_16_small_batch_is_not_starved_by_a_large_one(start_daemon, spool, fresh_origin, other_origin, hosts):
    """Fairness: room for 4 requests in all (and per host); the large batch alone would need
    about 25 s, the small one dropped after it started must finish in about one round of
    requests, whether it asks the large batch's host (the per-host limit is shared) or
    another one (the global limit is)."""
    d = start_daemon(concurrency=4, per_host=4, drain_timeout="1s", flush_ms="20ms", log_level="notice")
    large = [fresh_origin.url("/slow-headers?delay=0.25&title=L%d" % i) for i in range(400)]
    spool.drop("large.txt", large)
    d.poll_until(lambda: len(spool.output_lines("large.txt")) >= 8, 10, "large.txt under way")
    o = fresh_origin if hosts == "same-host" else other_origin
    small = spool.drop("small.txt", [o.url("/slow-headers?delay=0.25&title=S%d" % i) for i in range(4)])
    dropped = time.monotonic()
    d.poll_until(lambda: spool.has_summary("small.txt"), 4,
                 lambda: "small.txt to complete: %d of its records and %d of large.txt's after %.1fs"
                 % (len(spool.output_lines("small.txt")), len(spool.output_lines("large.txt")),
                    time.monotonic() - dropped))
    took = time.monotonic() - dropped
    wait_complete(d, spool, ["small.txt"], timeout=2)
    check_batch(spool, "small.txt", small)
    assert not spool.has_summary("large.txt")
    assert took < 3 * SLOWDOWN, "small.txt took %.1fs behind large.txt" % took
    assert fresh_origin.max_inflight <= 4 and other_origin.max_inflight <= 4
    assert d.stop() == 0
    assert spool.files("active") == ["large.txt"]


def test_60_17_summary_appears_only_with_the_complete_output(start_daemon, spool, origin):
    """The summary's appearance means the output is complete: read the output the moment the
    summary shows up (polled every millisecond), it already holds every record."""
    urls = page_urls(origin, "c", 600)
    d = start_daemon(concurrency=8, per_host=8, flush_ms="5ms", log_level="notice")
    spool.drop("watched.txt", urls)
    summary = spool.summary_path("watched.txt")
    deadline = time.monotonic() + 20 * SLOWDOWN
    while not os.path.exists(summary):
        assert time.monotonic() < deadline, "no summary after 20 s"
        assert d.running()
        time.sleep(0.001)
    at_appearance = spool.output_bytes("watched.txt")
    recs = spool.records("watched.txt")
    assert at_appearance.count(b"\n") == len(urls), \
        "the summary appeared with %d of %d records written" % (at_appearance.count(b"\n"), len(urls))
    with open(summary, "rb") as f:
        s = json.loads(f.read())
    assert s["records"] == len(urls) == len(recs)
    assert [f for f in spool.files("out") if f.startswith(".")] == [], "temporary files left in out/"
    assert d.stop() == 0
