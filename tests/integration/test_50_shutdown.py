"""Shutdown: SIGINT/SIGTERM drain the work in flight, keep the output well-formed and exit 3."""

import signal
import time

import pytest

from harness import SLOWDOWN, assert_ok


def _interrupted_run(harvestd, origin, sig):
    urls = [origin.url("/slow-headers?delay=0.5&title=s%d" % i) for i in range(300)]
    proc = harvestd.start(urls, "--concurrency", "8", "--per-host", "8", "--drain-timeout", "2s",
                          "--flush-ms", "50")
    proc.poll_until(lambda: len(proc.complete_lines()) >= 8, 20, "the first records")
    # Every request the origin has received is either answered or in flight: the drain
    # (2 s) outlasts the 0.5 s answers, so each of them must end as an ok record.
    started_before = len(origin.requests)
    sent = time.monotonic()
    proc.send_signal(sig)
    run = proc.wait(timeout=60)
    took = time.monotonic() - sent
    assert run.rc == 3, "exit status %d after %s" % (run.rc, sig.name)
    assert took < 5 * SLOWDOWN, "took %.1fs to exit after %s with --drain-timeout 2s" % (took, sig.name)
    assert 8 <= len(run.records) < len(urls), "the run was not interrupted: %d records" % len(run.records)
    ok = [r["requested_url"] for r in run.records if r["status"] == "ok"]
    assert len(ok) == len(set(ok)), "duplicate ok records"
    assert set(r["requested_url"] for r in run.records) <= set(urls)
    for r in run.records:
        if r["status"] == "ok":
            assert_ok(r, "s%d" % urls.index(r["requested_url"]))
    assert len(ok) >= started_before, "%d requests started before %s, only %d ok records" % (
        started_before, sig.name, len(ok))
    assert run.summary is not None, "no summary line after %s" % sig.name
    assert run.summary["records"] == len(run.records)
    return run


def test_50_01_sigint_drains_and_exits_3(harvestd, fresh_origin):
    _interrupted_run(harvestd, fresh_origin, signal.SIGINT)


def test_50_02_sigterm_drains_and_exits_3(harvestd, fresh_origin):
    _interrupted_run(harvestd, fresh_origin, signal.SIGTERM)


def test_50_03_drain_timeout_bounds_shutdown(harvestd, fresh_origin):
    # Nothing in flight can finish: the drain gives up after --drain-timeout.
    urls = [fresh_origin.url("/hold?key=never&title=h%d" % i) for i in range(20)]
    proc = harvestd.start(urls, "--concurrency", "4", "--per-host", "4", "--drain-timeout", "1s",
                          "--read-timeout", "60s", "--total-timeout", "60s")
    proc.poll_until(lambda: len(fresh_origin.requests) >= 4, 10, "four requests in flight")
    sent = time.monotonic()
    proc.send_signal(signal.SIGINT)
    run = proc.wait(timeout=60)
    took = time.monotonic() - sent
    assert run.rc == 3
    assert 0.8 <= took < 4 * SLOWDOWN, "exit %.1fs after SIGINT with --drain-timeout 1s" % took
    assert not [r for r in run.records if r["status"] == "ok"], run.records
    assert len(fresh_origin.requests) <= 8, "new requests were started after the signal"


def test_50_04_signal_while_reading_a_large_input(harvestd, fresh_origin):
    # The reader is paused on a full queue when the signal arrives.
    urls = [fresh_origin.url("/page?title=q%d&delay=0.2" % i) for i in range(5000)]
    proc = harvestd.start(urls, "--concurrency", "4", "--queue-size", "16", "--drain-timeout", "2s",
                          "--flush-ms", "50")
    proc.poll_until(lambda: len(proc.complete_lines()) >= 4, 20, "the first records")
    proc.send_signal(signal.SIGTERM)
    run = proc.wait(timeout=60)
    assert run.rc == 3
    assert 4 <= len(run.records) < 200
    ok = [r["requested_url"] for r in run.records if r["status"] == "ok"]
    assert len(ok) == len(set(ok))


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["int", "term"])
def test_50_05_drain_finishes_requests_in_flight(harvestd, fresh_origin, sig):
    urls = [fresh_origin.url("/hold?key=late&title=l%d" % i) for i in range(3)]
    proc = harvestd.start(urls, "--drain-timeout", "5s")
    proc.poll_until(lambda: len(fresh_origin.requests) >= 3, 10, "all requests in flight")
    proc.send_signal(sig)
    time.sleep(0.2)  # let the signal be handled before the answers arrive
    fresh_origin.release("late")
    run = proc.wait(timeout=60)
    # Every line got its record, so either status describes the run.
    assert run.rc in (0, 3), run.rc
    # The drain let the three requests in flight finish.
    assert sorted(r["title"] for r in run.records if r["status"] == "ok") == ["l0", "l1", "l2"]
