"""A running daemon batch's progress, wherever one looks: the per-batch gauges of /metrics
(labelled by batch, escaped, capped, gone when the batch ends), the batch_progress log lines
every progress_interval, and systemd's STATUS=. The batches hold some of their requests at the
origin (/hold) until the test releases them, so that what each view shows mid-batch is known
exactly rather than raced against."""

import re
import subprocess
import time

import pytest

from harness import SLOWDOWN, parse_log_line, wait_complete, wait_listening
from origin import free_port
from test_63_daemon_systemd import NotifySocket
from test_70_observability import Metrics, get
from test_71_run_health import PROMTOOL

BATCH_FAMILIES = ("harvestd_batch_lines_read", "harvestd_batch_input_lines",
                  "harvestd_batch_lines_done", "harvestd_batch_records",
                  "harvestd_batch_pages_per_second", "harvestd_batch_eta_seconds")

# Held requests wait for the test, not for a timeout.
HOLDING = dict(read_timeout="30s", total_timeout="60s")


@pytest.fixture
def notify_socket():
    s = NotifySocket()
    yield s
    s.close()


def unescape(value):
    """A label value as the text format escapes it, read back."""
    return re.sub(r'\\(.)', lambda m: "\n" if m.group(1) == "n" else m.group(1), value)


def scrape(port):
    r = get(port)
    assert r.status == 200, r.raw[:300]
    return Metrics(r.body.decode("utf-8"))


def batch_series(m):
    """{batch: {family or family/status: value}} of every harvestd_batch_* sample."""
    out = {}
    for (name, labels), v in m.samples.items():
        if not name.startswith("harvestd_batch_"):
            continue
        labels = dict(labels)
        key = name + ("/" + labels["status"] if "status" in labels else "")
        out.setdefault(unescape(labels["batch"]), {})[key] = v
    return out


def promtool_clean(text, tmp_path):
    if not PROMTOOL:
        return
    path = tmp_path / "scrape.txt"
    path.write_text(text, encoding="utf-8")
    with open(path, "rb") as f:
        p = subprocess.run([PROMTOOL, "check", "metrics"], stdin=f, capture_output=True, timeout=30)
    assert p.returncode == 0 and not p.stdout.strip() and not p.stderr.strip(), \
        "promtool check metrics:\n%s%s\n%s" % (p.stdout.decode(), p.stderr.decode(), text)


def held_batch(o, tag, quick, held):
    """`quick` pages, then `held` lines each for the keys TAG-1 and TAG-2 (in that order)."""
    lines = [o.url("/page?title=%s-q%d" % (tag, i)) for i in range(quick)]
    for k in (1, 2):
        lines += [o.url("/hold?key=%s-%d&title=%s-h%d-%d" % (tag, k, tag, k, i)) for i in range(held)]
    return lines


def test_67_01_metrics_per_batch_gauges_move_then_go(start_daemon, spool, fresh_origin, tmp_path):
    o = fresh_origin
    port = free_port()
    d = start_daemon(metrics_listen="127.0.0.1:%d" % port, concurrency=16, per_host=16, **HOLDING)
    wait_listening(port, d.running)
    spool.drop("prog.txt", held_batch(o, "m", 6, 2))

    def seen():
        return batch_series(scrape(port)).get("prog.txt", {})

    d.poll_until(lambda: seen().get("harvestd_batch_records/ok") == 6 and
                 len(o.find_request("key=m-")) == 4, 10,
                 lambda: "6 ok records of prog.txt on /metrics, 4 held requests (%r)" % seen())
    m = scrape(port)
    promtool_clean(m.text, tmp_path)
    b = batch_series(m)["prog.txt"]
    assert b["harvestd_batch_lines_read"] == 10, b
    assert b["harvestd_batch_input_lines"] == 10, b  # a small file is read whole at once
    assert b["harvestd_batch_lines_done"] == 6, b
    assert b["harvestd_batch_records/failed"] == 0, b
    assert b["harvestd_batch_pages_per_second"] > 0, b
    assert b["harvestd_batch_eta_seconds"] >= 0, b
    assert m.value("harvestd_batches_unlabelled") == 0

    o.release("m-1")
    d.poll_until(lambda: seen().get("harvestd_batch_records/ok") == 8, 10,
                 lambda: "8 ok records of prog.txt on /metrics (%r)" % seen())
    assert seen()["harvestd_batch_lines_done"] == 8

    o.release("m-2")
    wait_complete(d, spool, ["prog.txt"], timeout=10)
    m = scrape(port)
    assert batch_series(m) == {}, "series of a batch that ended:\n%s" % m.text
    for family in BATCH_FAMILIES:
        assert m.types.get(family) == "gauge", family  # the families stay, empty
    assert d.stop() == 0


def test_67_02_batch_labels_are_escaped_cut_and_capped(start_daemon, spool, fresh_origin, tmp_path):
    """Batch names come from outside: quotes, backslashes, newlines, control bytes, invalid
    UTF-8 and long names all make valid labels (promtool agrees), each batch its own series;
    past 16 running batches the others are only counted."""
    o = fresh_origin
    port = free_port()
    d = start_daemon(metrics_listen="127.0.0.1:%d" % port, concurrency=40, per_host=40,
                     max_active_batches=20, **HOLDING)
    wait_listening(port, d.running)
    long_name = "L" * 70 + ".txt"
    long_name2 = "L" * 70 + ".csv"  # the same label once cut: told apart
    odd = {b'we"ird\\name.txt': 'we"ird\\name.txt',
           b"new\nline.txt": "new\nline.txt",
           b"ctl\x01byte.txt": "ctl\\x01byte.txt",
           b"bad\xffutf8.txt": "bad\ufffdutf8.txt",
           long_name.encode(): "L" * 61 + "...",
           long_name2.encode(): "L" * 61 + "... #2",
           "caf\u00e9.txt".encode(): "caf\u00e9.txt"}
    for i, name in enumerate(odd):
        spool.drop(name, [o.url("/hold?key=odd&title=o%d" % i)])
    d.poll_until(lambda: len(o.find_request("key=odd")) == len(odd), 10, "a held request per batch")
    m = scrape(port)
    promtool_clean(m.text, tmp_path)
    assert sorted(batch_series(m)) == sorted(odd.values()), m.text
    for label, b in batch_series(m).items():
        assert b["harvestd_batch_lines_read"] == 1 and b["harvestd_batch_input_lines"] == 1, (label, b)
    assert m.value("harvestd_batches_unlabelled") == 0

    # 20 running: 16 labelled, 4 counted.
    for i in range(20 - len(odd)):
        spool.drop("many-%02d.txt" % i, [o.url("/hold?key=many&title=n%d" % i)])
    d.poll_until(lambda: len(o.find_request("key=many")) == 20 - len(odd), 10, "20 running batches")
    m = scrape(port)
    promtool_clean(m.text, tmp_path)
    assert len(batch_series(m)) == 16, sorted(batch_series(m))
    assert m.value("harvestd_batches_unlabelled") == 4
    o.release("odd")
    o.release("many")
    d.poll_until(lambda: len(spool.files("done")) == 20, 15, "every batch done")
    assert batch_series(scrape(port)) == {}
    assert d.stop() == 0


def test_67_03_progress_log_lines(start_daemon, spool, fresh_origin):
    """progress_interval = 1s: a batch_progress line a second per running batch, its figures
    growing as records come, none once the batch is done."""
    o = fresh_origin
    d = start_daemon(concurrency=16, per_host=16, progress_interval="1s", **HOLDING)
    spool.drop("logged.txt", held_batch(o, "l", 4, 2))

    def lines():
        return [e for e in d.events("batch_progress") if e.get("batch") == "logged.txt"]

    d.poll_until(lambda: any(e["records"] == "4" for e in lines()), 10,
                 lambda: "a batch_progress line with records=4 (%r)" % lines())
    o.release("l-1")
    d.poll_until(lambda: any(e["records"] == "6" for e in lines()), 10,
                 lambda: "a batch_progress line with records=6 (%r)" % lines())
    o.release("l-2")
    wait_complete(d, spool, ["logged.txt"], timeout=10)
    done_at = len(d.stderr_text())
    got = lines()
    print(got)
    counts = [int(e["records"]) for e in got]
    assert counts == sorted(counts), counts
    for e in got:
        assert e["lines_read"] == "8" and e["lines_total"] == "8", e
        assert int(e["ok"]) + int(e["failed"]) == int(e["records"]) == int(e["done"]), e
        assert float(e["percent"]) == pytest.approx(100.0 * int(e["done"]) / 8, abs=0.05), e
        assert "lines_estimate" not in e
    with_rate = [e for e in got if float(e["pages_per_s"]) > 0]
    assert with_rate and all("eta_s" in e for e in with_rate), got
    # None after the batch ended (the next ticks find nothing running).
    time.sleep(1.5 * SLOWDOWN)
    later = [parse_log_line(x) for x in d.stderr_text()[done_at:].splitlines()]
    assert not [e for e in later if e and e.get("event") == "batch_progress"], later
    assert d.stop() == 0


def test_67_04_progress_interval_0_logs_none(start_daemon, spool, fresh_origin):
    o = fresh_origin
    d = start_daemon(progress_interval="0", **HOLDING)
    spool.drop("quiet.txt", [o.url("/hold?key=quiet&title=q")])
    d.poll_until(lambda: len(o.find_request("key=quiet")) == 1, 10, "the held request")
    time.sleep(1.5 * SLOWDOWN)
    o.release("quiet")
    wait_complete(d, spool, ["quiet.txt"], timeout=10)
    assert d.events("batch_progress") == []
    assert d.stop() == 0


def test_67_05_total_estimated_from_the_bytes_read(start_daemon, spool, fresh_origin, notify_socket):
    """A big input is read only as far as its queue allows: the total is estimated from the
    share of the file's bytes the lines read span (exact here: every line is as long), shown as
    an estimate in the log and STATUS=, and not as the input's lines on /metrics."""
    o = fresh_origin
    n = 3000
    lines = [o.url("/hold?key=est&title=t%04d" % i) for i in range(n)]
    assert len({len(x) for x in lines}) == 1
    port = free_port()
    d = start_daemon(metrics_listen="127.0.0.1:%d" % port, concurrency=2, per_host=2,
                     queue_size=8, progress_interval="1s", env={"NOTIFY_SOCKET": notify_socket.name},
                     **HOLDING)
    wait_listening(port, d.running)
    spool.drop("big.txt", lines)
    d.poll_until(lambda: len(o.find_request("key=est")) == 2, 10, "two held requests")
    d.poll_until(lambda: any(e.get("batch") == "big.txt" for e in d.events("batch_progress")), 5,
                 "a batch_progress line of big.txt")
    e = [e for e in d.events("batch_progress") if e.get("batch") == "big.txt"][-1]
    assert e["lines_estimate"] == str(n) and "lines_total" not in e, e
    assert 0 < int(e["lines_read"]) < 100 and e["records"] == "0", e
    assert "eta_s" not in e, e  # no record yet: no pace
    d.poll_until(lambda: any(re.search(r"big\.txt 0/~%d 0%%" % n, m) for m in notify_socket.lines()),
                 5, lambda: "STATUS= with big.txt 0/~%d (got %r)" % (n, notify_socket.lines()[-5:]))
    b = batch_series(scrape(port))["big.txt"]
    assert "harvestd_batch_input_lines" not in b and "harvestd_batch_eta_seconds" not in b, b
    assert b["harvestd_batch_lines_read"] == int(e["lines_read"]), b
    o.release("est")
    assert d.stop() == 0


def test_67_06_status_shows_running_batches(start_daemon, spool, fresh_origin, notify_socket):
    """STATUS= names the running batches with lines done of the total, percent and ETA, and the
    records written so far, while the batch runs (not only once it completes)."""
    o = fresh_origin
    d = start_daemon(concurrency=16, per_host=16, env={"NOTIFY_SOCKET": notify_socket.name},
                     **HOLDING)
    d.poll_until(lambda: notify_socket.first("READY=1") is not None, 5, "READY=1")
    spool.drop("st.txt", held_batch(o, "s", 6, 2))

    def statuses():
        return [m for m in notify_socket.lines() if m.startswith("STATUS=")]

    want = re.compile(r"^STATUS=running: 1 active \(st\.txt 6/10 60% ETA (\d+m\d\ds|\d+h\d\dm)\), "
                      r"0 done, 0 rejected, 6 records written$")
    d.poll_until(lambda: any(want.match(m) for m in statuses()), 10,
                 lambda: "STATUS= with st.txt 6/10 60%% (got %r)" % statuses()[-5:])
    o.release("s-1")
    o.release("s-2")
    wait_complete(d, spool, ["st.txt"], timeout=10)
    d.poll_until(lambda: statuses()[-1] == "STATUS=running: 0 active, 1 done, 0 rejected, "
                 "10 records written", 5, lambda: "the final STATUS= (got %r)" % statuses()[-5:])
    # About one a second at most (READY=1's comes at once): counted rather than timed, with
    # room for messages read late.
    times = notify_socket.times("STATUS=")
    assert len(times) <= (times[-1] - times[0]) + 4, times
    assert d.stop() == 0
