"""Internal failures of the daemon: a full disk under out/ stops it with status 1, the batch
stays in active/ without a summary, and resumes once there is room."""

import os
import re
import subprocess

import pytest

from harness import (assert_ok, parse_records, parse_summary, small_tmpfs, title_of,
                     wait_complete)


def run(*argv):
    return subprocess.run(list(argv), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=30)


@pytest.fixture
def small_out(spool, harvestd):
    """spool/out on a 64 KiB tmpfs (root only); unmounted after the test, once its daemons
    are gone."""
    with small_tmpfs(spool.path("out"), "64k", harvestd) as out:
        yield out


def test_64_01_disk_full_stops_the_daemon_and_keeps_the_batch(start_daemon, spool, origin, small_out):
    """ENOSPC writing out/ (a 64 KiB tmpfs; about 250 bytes a record, so 1000 records do not
    fit): exit status 1 with the cause logged, the batch left in active/ without a summary.
    Twice (the way the daemon goes down varies with what is in flight), then with room again
    the last batch resumes and completes."""
    aside = spool.path("..", "set-aside")
    os.makedirs(aside)
    directives = dict(concurrency=8, per_host=8, flush_ms="20ms", fsync="always", log_level="notice")
    for attempt in range(2):
        name = "full-%d.txt" % attempt
        lines = [origin.url("/page?title=%s-%d&pad=%s" % (name, i, "p" * 40)) for i in range(1000)]
        d = start_daemon(**directives)
        data = spool.drop(name, lines)
        rc = d.wait(timeout=30)
        stderr = d.stderr_text()
        assert rc == 1, "attempt %d: exit status %d after ENOSPC" % (attempt, rc)
        assert "no space left on device" in stderr.lower(), stderr[-3000:]
        assert spool.files("active") == [name]
        assert spool.files("done") == [] and spool.files("rejected") == []
        assert not spool.has_summary(name)
        leftovers = [f for f in spool.files("out") if f != name + ".jsonl"]
        assert leftovers == [], "out/ holds %r" % leftovers
        spool.records(name, complete=False)  # what was written is valid, but for a torn tail
        assert len(spool.output_lines(name)) < len(lines)
        if attempt < 1:
            os.unlink(spool.path("out", name + ".jsonl"))
            os.rename(spool.path("active", name), os.path.join(aside, name))

    # With room again, the restart resumes the batch and completes it.
    done = run("mount", "-o", "remount,size=4m", small_out)
    assert done.returncode == 0, done.stdout
    d2 = start_daemon(**directives)
    wait_complete(d2, spool, [name], timeout=20)
    recs = spool.records(name)
    oks = {}
    for r in recs:
        assert_ok(r, title_of(r["requested_url"]))
        oks[r["requested_url"]] = oks.get(r["requested_url"], 0) + 1
    assert set(oks) == set(lines) and set(oks.values()) == {1}, "URLs with duplicate ok records"
    s = spool.summary(name)
    assert (s["records"], s["ok"], s["failed"]) == (1000, 1000, 0), s
    assert s["resumed"] > 0
    assert d2.stop() == 0
    assert spool.files("done") == [name]
    with open(spool.path("done", name), "rb") as f:
        assert f.read() == data


def test_64_02_no_room_for_the_summary(start_daemon, spool, fresh_origin, small_out):
    """The output fits but the summary does not: no summary (not even a partial or temporary
    one), the batch stays in active/, exit status 1; the restart writes the summary without
    fetching anything again."""
    o = fresh_origin
    filler = os.path.join(small_out, ".filler")
    with open(filler, "wb") as f:
        f.write(b"\0" * (60 * 1024))  # one 4 KiB page left: for the output
    lines = [o.url("/page?title=s%d" % i) for i in range(2)]
    d = start_daemon()
    data = spool.drop("tight.txt", lines)
    rc = d.wait(timeout=15)
    stderr = d.stderr_text()
    assert rc == 1, "exit status %d" % rc
    assert "no space left on device" in stderr.lower(), stderr[-3000:]
    assert spool.files("active") == ["tight.txt"] and spool.files("done") == []
    assert not spool.has_summary("tight.txt")
    assert sorted(os.listdir(small_out)) == [".filler", "tight.txt.jsonl"], \
        "out/ holds %r" % sorted(os.listdir(small_out))
    first = spool.records("tight.txt")
    assert sorted(r["requested_url"] for r in first) == sorted(lines)
    os.unlink(filler)
    o.reset()
    d2 = start_daemon()
    wait_complete(d2, spool, ["tight.txt"], timeout=10)
    assert o.requests == [], "URLs with an ok record were fetched again"
    assert spool.records("tight.txt") == first
    s = spool.summary("tight.txt")
    assert (s["records"], s["ok"], s["resumed"]) == (2, 2, 2), s
    assert d2.stop() == 0
    with open(spool.path("done", "tight.txt"), "rb") as f:
        assert f.read() == data


def test_64_03_disk_full_with_failure_records_only(start_daemon, spool, origin, small_out):
    """The same with records that need no parse (every URL answers 404): exit status 1, the
    batch kept; then it resumes (nothing is skipped: no ok record) and completes."""
    lines = [origin.url("/status/404?n=%d&pad=%s" % (i, "p" * 60)) for i in range(1000)]
    directives = dict(concurrency=8, per_host=8, flush_ms="20ms", log_level="notice")
    d = start_daemon(**directives)
    spool.drop("404.txt", lines)
    rc = d.wait(timeout=30)
    stderr = d.stderr_text()
    assert rc == 1, "exit status %d after ENOSPC" % rc
    assert "no space left on device" in stderr.lower(), stderr[-3000:]
    assert spool.files("active") == ["404.txt"] and not spool.has_summary("404.txt")
    spool.records("404.txt", complete=False)
    assert run("mount", "-o", "remount,size=4m", small_out).returncode == 0
    d2 = start_daemon(**directives)
    wait_complete(d2, spool, ["404.txt"], timeout=20)
    recs = spool.records("404.txt")
    latest = {r["requested_url"]: r for r in recs}
    assert set(latest) == set(lines)
    assert all(r["status"] == "failed" and r["http_status"] == 404 for r in recs)
    s = spool.summary("404.txt")
    assert (s["records"], s["ok"], s["failed"], s["resumed"]) == (1000, 0, 1000, 0), s
    assert s["error_types"] == {"HttpStatus": 1000} and s["http_statuses"] == {"404": 1000}, s
    assert d2.stop() == 0


def test_64_04_the_failure_is_reported_as_log_events(start_daemon, spool, fresh_origin, small_out):
    """Under the journal (JOURNAL_STREAM names stderr) every line the failing daemon writes is
    a log event with its priority prefix, the cause included, so none is lost or mis-filed."""
    with open(os.path.join(small_out, ".filler"), "wb") as f:
        f.write(b"\0" * (60 * 1024))
    d = start_daemon(env=lambda daemon: {"JOURNAL_STREAM": daemon.stderr_dev_ino})
    spool.drop("j.txt", [fresh_origin.url("/page?title=j")])
    assert d.wait(timeout=15) == 1
    lines = [line for line in d.stderr_text().splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("<3>")]
    assert errors and any("no space left on device" in line.lower() for line in errors), lines
    stray = [line for line in lines if not re.match(r"^<[0-7]>level=\w+ event=\S", line)]
    assert stray == [], "stderr lines that are not log events: %r" % stray


def test_64_05_once_on_a_full_disk_prints_no_summary(harvestd, origin, small_out):
    """`--once` writing to the 64 KiB tmpfs: exit status 1 with the cause, and no summary line,
    whose counts would include records that never reached the file."""
    lines = [origin.url("/page?title=once-%d&pad=%s" % (i, "p" * 40)) for i in range(1000)]
    out = os.path.join(small_out, "once.jsonl")
    run = harvestd.run(lines, "--concurrency", "8", "--per-host", "8", out=out, parse=False,
                       timeout=30)
    assert run.rc == 1, "exit status %d after ENOSPC" % run.rc
    assert "no space left on device" in run.stderr.lower(), run.stderr[-3000:]
    assert "the output is incomplete" in run.stderr, run.stderr[-3000:]
    assert parse_summary(run.stderr) is None, "a summary line for an incomplete output"
    with open(out, "rb") as f:
        data = f.read()
    written = parse_records(data[:data.rfind(b"\n") + 1])  # a torn tail is the disk's
    assert 0 < len(written) < len(lines)
