"""Politeness and retries: transient failures retried with backoff and Retry-After, per-host
pacing and [host] sections, adaptive throttling on 429s, and robots.txt.

Times are measured at the origin (Request.time, the moment a request's head was parsed), so they
do not depend on when harvestd writes its records. Tests about retries pass their own --retries
(the harness's default is 0) and a short --retry-base, so a retry costs a fraction of a second."""

import email.utils
import http.client
import threading
import time

import pytest

from harness import (SLOWDOWN, assert_failed, assert_key_order, assert_ok, by_url, parse_log_line,
                     write_config)
from origin import Origin

# Server-side gaps may come out a little shorter than the client's timers: the head is parsed a
# moment after the client started the request, and both clocks tick in milliseconds.
SLACK = 0.015


def gaps(times):
    times = sorted(times)
    return [b - a for a, b in zip(times, times[1:])]


def check_attempts(rec, attempts):
    assert rec.get("attempts") == attempts, rec
    keys = list(rec)
    assert keys.index("attempts") == keys.index("redirects") + 1, "attempts must follow redirects: %r" % keys
    assert_key_order(rec)


@pytest.fixture
def origins():
    """origins(name) -> a started Origin of the test's own; all are stopped after the test."""
    started = []

    def make(name):
        o = Origin(name).start()
        started.append(o)
        return o

    yield make
    for o in started:
        o.stop()


# ---------------------------------------------------------------------------- the origin's endpoints


def test_45_00_origin_politeness_endpoints(fresh_origin):
    """/seq, /limit and /robots.txt behave as scripted (no harvestd needed)."""
    def get(path):
        c = http.client.HTTPConnection("127.0.0.1", fresh_origin.port, timeout=5)
        try:
            c.request("GET", path)
            r = c.getresponse()
            return r.status, r.getheader("Retry-After"), r.read()
        finally:
            c.close()

    assert [get("/seq?key=k&steps=503,429,ok&ra=7")[:2] for _ in range(4)] == \
        [(503, "7"), (429, "7"), (200, None), (200, None)]
    status, ra, _ = get("/seq?key=d&steps=503,ok&ra_date=2")
    assert status == 503
    ahead = email.utils.parsedate_to_datetime(ra).timestamp() - time.time()
    assert 1.5 < ahead <= 3.01, ra
    with pytest.raises((ConnectionError, http.client.HTTPException)):
        get("/seq?key=r&steps=reset,ok")
    assert get("/seq?key=r&steps=reset,ok")[0] == 200
    assert len(fresh_origin.times("key=k&")) == 4

    results = []
    threads = [threading.Thread(target=lambda: results.append(get("/limit?key=L&max=2&delay=0.3")[0]))
               for _ in range(4)]
    for t in threads:
        t.start()
        time.sleep(0.02)
    for t in threads:
        t.join()
    assert sorted(results) == [200, 200, 429, 429]
    assert [n for _, n, _ in fresh_origin.limit_entries("L")] == [1, 2, 3, 3]

    assert get("/robots.txt")[0] == 404
    assert get("/anything")[0] == 404
    fresh_origin.set_robots("User-agent: *\nDisallow: /x\n", delay=0.2)
    started = time.monotonic()
    status, _, body = get("/robots.txt")
    assert status == 200 and body == b"User-agent: *\nDisallow: /x\n"
    assert time.monotonic() - started >= 0.2
    (asked, done), = fresh_origin.robots_log
    assert done - asked >= 0.2
    fresh_origin.serve_any_path = True
    status, _, body = get("/anything/else")
    assert status == 200 and b"<title>/anything/else</title>" in body


# ---------------------------------------------------------------------------- retries


def test_45_01_503_then_200_is_ok_after_two_attempts(run_harvestd, fresh_origin):
    url = fresh_origin.url("/seq?key=a&steps=503,ok&title=Second")
    run = run_harvestd([url], "--retries", "3", "--retry-base", "100ms")
    assert run.rc == 0
    rec = run.records[0]
    assert_ok(rec, "Second")
    assert rec["http_status"] == 200
    check_attempts(rec, 2)
    assert len(fresh_origin.find_request("key=a&")) == 2
    assert run.summary["retries"] == 1


def test_45_02_retry_after_seconds_is_obeyed(run_harvestd, fresh_origin):
    url = fresh_origin.url("/seq?key=ra&steps=429,ok&ra=1&title=Later")
    run = run_harvestd([url], "--retries", "3", "--retry-base", "100ms")
    rec = run.records[0]
    assert_ok(rec, "Later")
    check_attempts(rec, 2)
    first, second = fresh_origin.times("key=ra&")
    # Retry-After replaces the backoff (100-200 ms here): the retry waits the whole second.
    assert second - first >= 1.0 - SLACK, "retry %.3fs after the 429 with Retry-After: 1" % (second - first)
    assert second - first < 2.5 * SLOWDOWN


def test_45_03_retry_after_http_date_is_obeyed(run_harvestd, fresh_origin):
    # The date is 2 s after the next whole second: between 2 and 3 s from the 503.
    url = fresh_origin.url("/seq?key=rd&steps=503,ok&ra_date=2&title=Dated")
    run = run_harvestd([url], "--retries", "3", "--retry-base", "100ms")
    rec = run.records[0]
    assert_ok(rec, "Dated")
    check_attempts(rec, 2)
    first, second = fresh_origin.times("key=rd&")
    assert 1.9 <= second - first < 4.5 * SLOWDOWN, "retry %.3fs after a Retry-After 2-3 s ahead" % (second - first)


@pytest.mark.parametrize("code", [429, 503])
def test_45_04_retry_after_over_the_cap_fails_at_once(run_harvestd, fresh_origin, code):
    url = fresh_origin.url("/seq?key=cap&steps=%d,ok&ra=30" % code)
    run = run_harvestd([url], "--retries", "3", "--retry-base", "100ms", "--retry-after-max", "1s")
    assert run.rc == 0
    rec = run.records[0]
    assert_failed(rec, "download", "HttpStatus", "http_%d" % code)
    assert rec["http_status"] == code
    check_attempts(rec, 1)
    assert len(fresh_origin.find_request("key=cap&")) == 1
    assert run.elapsed < 5 * SLOWDOWN
    assert run.summary["retries"] == 0


def test_45_05_retry_after_is_only_for_429_and_503(run_harvestd, fresh_origin):
    """A Retry-After on a 500 is not obeyed (nor over the cap): the backoff applies."""
    url = fresh_origin.url("/seq?key=r500&steps=500,ok&ra=30")
    run = run_harvestd([url], "--retries", "3", "--retry-base", "100ms", "--retry-after-max", "1s")
    rec = run.records[0]
    assert_ok(rec)
    check_attempts(rec, 2)
    first, second = fresh_origin.times("key=r500&")
    assert 0.1 - SLACK <= second - first < 1.0 * SLOWDOWN


@pytest.mark.parametrize("code", [404, 403])
def test_45_06_client_errors_are_never_retried(run_harvestd, fresh_origin, code):
    run = run_harvestd([fresh_origin.url("/status/%d" % code)], "--retries", "3", "--retry-base", "100ms")
    rec = run.records[0]
    assert_failed(rec, "download", "HttpStatus", "http_%d" % code)
    check_attempts(rec, 1)
    assert len(fresh_origin.requests_to("/status/%d" % code)) == 1
    assert run.summary["retries"] == 0


def test_45_07_retry_statuses_chooses_what_is_retried(run_harvestd, fresh_origin):
    u503 = fresh_origin.url("/seq?key=s503&steps=503,ok")
    u500 = fresh_origin.url("/seq?key=s500&steps=500,ok")
    run = run_harvestd([u503, u500], "--retries", "3", "--retry-base", "100ms", "--retry-statuses", "500")
    recs = by_url(run.records)
    assert_failed(recs[u503], "download", "HttpStatus", "http_503")
    check_attempts(recs[u503], 1)
    assert_ok(recs[u500])
    check_attempts(recs[u500], 2)
    assert len(fresh_origin.find_request("key=s503&")) == 1


def test_45_08_flapping_connection_reset(run_harvestd, fresh_origin):
    """Reset, reset, then a page: one URL on a fresh origin, so the first reset is on a new
    connection and counts as an attempt (not a stale keep-alive connection)."""
    url = fresh_origin.url("/seq?key=rst&steps=reset,reset,ok&title=Steady")
    run = run_harvestd([url], "--retries", "3", "--retry-base", "100ms")
    rec = run.records[0]
    assert_ok(rec, "Steady")
    check_attempts(rec, 3)
    assert len(fresh_origin.find_request("key=rst&")) == 3
    assert run.summary["retries"] == 2


def test_45_09_connect_error_is_retried(run_harvestd, closed_port):
    url = "http://127.0.0.1:%d/page" % closed_port
    run = run_harvestd([url], "--retries", "2", "--retry-base", "100ms")
    rec = run.records[0]
    assert rec["status"] == "failed" and rec["error_type"] == "ConnectError", rec
    check_attempts(rec, 3)
    assert run.summary["retries"] == 2


def test_45_10_read_timeout_is_retried(run_harvestd, fresh_origin):
    url = fresh_origin.url("/seq?key=rt&steps=hang,ok&hang=3&title=Quick")
    run = run_harvestd([url], "--retries", "2", "--retry-base", "100ms", "--read-timeout", "300ms")
    assert_ok(run.records[0], "Quick")
    check_attempts(run.records[0], 2)
    assert run.elapsed < 2.5 * SLOWDOWN


def test_45_11_broken_tls_handshake_is_retried_certificate_error_is_not(run_harvestd, pki,
                                                                        raw_tls_peers, tls_origins):
    peer = raw_tls_peers("close")
    expired = tls_origins("expired")
    broken_url, expired_url = peer.url("/page"), expired.url("/page?title=never")
    run = run_harvestd([broken_url, expired_url], "--ca-file", pki.ca_file, "--retries", "2",
                       "--retry-base", "100ms")
    recs = by_url(run.records)
    assert_failed(recs[broken_url], "download", "TlsError")
    check_attempts(recs[broken_url], 3)
    assert len(peer.hellos) >= 3
    assert_failed(recs[expired_url], "download", "CertificateError")
    check_attempts(recs[expired_url], 1)
    assert expired.snapshot()["tcp_accepted"] == 1
    assert run.summary["retries"] == 2


def test_45_12_exhausted_retries_report_the_last_error(run_harvestd, fresh_origin):
    url = fresh_origin.url("/seq?key=ex&steps=500,502,503")
    run = run_harvestd([url], "--retries", "2", "--retry-base", "100ms")
    rec = run.records[0]
    assert_failed(rec, "download", "HttpStatus", "http_503")
    assert rec["http_status"] == 503
    check_attempts(rec, 3)
    times = fresh_origin.times("key=ex&")
    assert len(times) == 3
    # Backoff before attempt n+1: base*2^(n-1) plus up to as much again.
    first, second = gaps(times)
    assert 0.1 - SLACK <= first <= 0.2 + 0.1 * SLOWDOWN, first
    assert 0.2 - SLACK <= second <= 0.4 + 0.1 * SLOWDOWN, second
    assert run.summary["retries"] == 2


def test_45_13_retry_max_caps_the_backoff(run_harvestd, fresh_origin):
    url = fresh_origin.url("/seq?key=rm&steps=500,500,ok")
    run = run_harvestd([url], "--retries", "2", "--retry-base", "2s", "--retry-max", "200ms")
    assert_ok(run.records[0])
    check_attempts(run.records[0], 3)
    for gap in gaps(fresh_origin.times("key=rm&")):
        assert gap <= 0.2 + 0.15 * SLOWDOWN, gap


def test_45_14_retry_jitter_spreads_simultaneous_retries(run_harvestd, fresh_origin):
    """50 URLs that each fail once with 500 at the same moment: their retries are spread over
    the jitter window instead of hitting the server together."""
    urls = [fresh_origin.url("/seq?key=j%d&steps=500,ok&title=j%d" % (i, i)) for i in range(50)]
    run = run_harvestd(urls, "--retries", "3", "--retry-base", "200ms", "--concurrency", "64",
                       "--per-host", "64", "--log-level", "info")
    assert all(r["status"] == "ok" and r["attempts"] == 2 for r in run.records), run.records
    for i in range(50):
        first, second = fresh_origin.times("key=j%d&" % i)
        assert second - first >= 0.2 - SLACK, "retry of j%d %.3fs after its failure" % (i, second - first)
    # The spread is in the delays harvestd planned (its retry log lines): when the retries
    # reach the server depends also on how busy the machine is (a stalled loop fires timers
    # together), the plan does not.
    delays = [int(ev["delay_ms"]) for ev in (parse_log_line(l) for l in run.stderr.splitlines())
              if ev and ev.get("event") == "retry"]
    assert len(delays) == 50, delays
    assert all(200 <= d <= 400 for d in delays), delays  # base 200 ms plus up to as much again
    buckets = {}
    for d in delays:
        buckets[(d - 200) // 20] = buckets.get((d - 200) // 20, 0) + 1
    print("planned delays %d-%d ms, buckets %r" % (min(delays), max(delays), sorted(buckets.items())))
    assert max(delays) - min(delays) > 100, "50 retries planned within %d ms" % (max(delays) - min(delays))
    assert max(buckets.values()) <= 25, "retries bunched: %r" % sorted(buckets.items())
    assert run.summary["retries"] == 50


def test_45_15_a_url_waiting_to_retry_holds_no_slot(run_harvestd, fresh_origin):
    """With one request slot, a URL waiting out Retry-After: 1 lets the others through."""
    slow = fresh_origin.url("/seq?key=w&steps=503,ok&ra=1&title=Waited")
    others = [fresh_origin.url("/page?title=o%d" % i) for i in range(5)]
    run = run_harvestd([slow] + others, "--retries", "1", "--retry-base", "100ms",
                       "--concurrency", "1", "--per-host", "1")
    assert all(r["status"] == "ok" for r in run.records), run.records
    first, second = fresh_origin.times("key=w&")
    pages = fresh_origin.times("/page?title=o")
    assert len(pages) == 5
    assert max(pages) < second, "the other URLs waited for the retry"
    assert max(pages) - first < 0.8 * SLOWDOWN


# ---------------------------------------------------------------------------- pacing


def test_45_20_host_delay_spaces_request_starts_per_host(run_harvestd, origins):
    a, b = origins("a"), origins("b")
    urls = []
    for i in range(8):
        urls += [a.url("/page?title=a%d" % i), b.url("/page?title=b%d" % i)]
    run = run_harvestd(urls, "--per-host", "4", "--host-delay", "200ms")
    assert all(r["status"] == "ok" for r in run.records), run.records
    for o in (a, b):
        times = o.times("/page?")
        assert len(times) == 8
        assert min(gaps(times)) >= 0.2 - SLACK, "%s: gaps %r" % (o.name, gaps(times))
    # The two hosts are paced independently: 7 gaps of 200 ms, not 15.
    assert run.elapsed < 2.6 * SLOWDOWN
    starts = sorted(a.times("/page?") + b.times("/page?"))
    assert starts[1] - starts[0] < 0.1, "the second host waited for the first one's delay"


def test_45_21_host_delay_jitter(run_harvestd, fresh_origin):
    """host_delay is the least gap between two starts: a jitter of 0.5 adds up to half of it."""
    urls = [fresh_origin.url("/page?title=j%d" % i) for i in range(9)]
    run = run_harvestd(urls, "--per-host", "4", "--host-delay", "200ms", "--host-delay-jitter", "0.5")
    assert all(r["status"] == "ok" for r in run.records), run.records
    g = gaps(fresh_origin.times("/page?"))
    print("gaps %r" % g)
    assert min(g) >= 0.2 - SLACK, g
    assert max(g) <= 0.3 + 0.1 * SLOWDOWN, g
    assert max(g) - min(g) > 0.02, "no jitter in %r" % g


def politeness_config(tmp_path, sections, **directives):
    """A config file for `harvestd -c FILE --once`: top-level directives, then [host "NAME"]
    sections ({name: {directive: value}})."""
    path = tmp_path / "polite.conf"
    values = {"obey_robots": "no", "adaptive": "no"}
    values.update(directives)
    write_config(path, values)
    with open(path, "a") as f:
        for name, items in sections.items():
            f.write('\n[host "%s"]\n' % name)
            for k, v in items.items():
                f.write("%s = %s\n" % (k, v))
    return str(path)


def test_45_22_host_section_overrides_one_host(run_harvestd, origins, tmp_path):
    """[host "localhost"] makes one host slow (one request at a time, 300 ms apart) while the
    other (127.0.0.1) keeps the global per_host = 4 and no delay."""
    slow, fast = origins("slow"), origins("fast")
    conf = politeness_config(tmp_path, {"localhost": {"per_host": 1, "host_delay": "300ms"}},
                             per_host=4, host_delay="0ms")
    slow_urls = ["http://localhost:%d/page?title=s%d&delay=0.1" % (slow.port, i) for i in range(5)]
    fast_urls = [fast.url("/page?title=f%d&delay=0.3" % i) for i in range(8)]
    run = run_harvestd(slow_urls + fast_urls, "-c", conf)
    assert run.rc == 0
    assert all(r["status"] == "ok" for r in run.records), run.records
    s_times = slow.times("/page?")
    assert len(s_times) == 5
    # host_delay is between request starts in harvestd; the server sees the first request only
    # once its connection is made (the next ones reuse it), which a sanitizer build can slow
    # by some tens of ms: that gap alone gets the allowance. Without the delay the gaps would
    # be the 0.1 s answers.
    g = gaps(s_times)
    assert g[0] >= 0.3 - SLACK - 0.03 * SLOWDOWN, g
    assert min(g[1:]) >= 0.3 - SLACK, g
    assert slow.snapshot()["max_inflight"] == 1
    f_times = sorted(fast.times("/page?"))
    assert fast.snapshot()["max_inflight"] == 4
    # Four at once, then the next four when they answer: not paced, not held behind "localhost".
    assert f_times[3] - f_times[0] < 0.1, f_times
    assert f_times[-1] - f_times[0] < 0.5 * SLOWDOWN, f_times
    assert f_times[-1] < sorted(s_times)[2], "the fast host waited for the slow one"


def test_45_23_slow_host_does_not_slow_a_fast_one(run_harvestd, origins):
    slow, fast = origins("slow"), origins("fast")
    slow_urls = [slow.url("/page?title=s%d&delay=1" % i) for i in range(6)]
    fast_urls = [fast.url("/page?title=f%d" % i) for i in range(20)]
    # The slow host's URLs come first in the input.
    run = run_harvestd(slow_urls + fast_urls, "--per-host", "2", "--concurrency", "8")
    assert all(r["status"] == "ok" for r in run.records), run.records
    s_times = sorted(slow.times("/page?"))
    f_times = sorted(fast.times("/page?"))
    assert len(f_times) == 20
    t0 = min(s_times + f_times)
    assert f_times[-1] - t0 < 0.7 * SLOWDOWN, "fast host done %.2fs after the start" % (f_times[-1] - t0)
    # The slow host takes three rounds of a second; the fast one was done during the first.
    assert s_times[-1] - t0 >= 2.0 - SLACK
    assert f_times[-1] < s_times[2]
    recs = by_url(run.records)
    assert all(recs[u]["elapsed_ms"] < 700 * SLOWDOWN for u in fast_urls), [recs[u] for u in fast_urls]


# ---------------------------------------------------------------------------- adaptive throttling


def limit_urls(origin, n, rdelay):
    return [origin.url("/limit?key=L&max=2&delay=0.2&rdelay=%s&title=t%d" % (rdelay, i)) for i in range(n)]


def peak_after(log, t):
    return max((n for at, n, _ in log if at >= t), default=0)


def test_45_30_adaptive_lowers_concurrency_on_429s(run_harvestd, fresh_origin):
    """A server that refuses (429, after 50 ms) every request beyond 2 in flight. With
    --adaptive and --per-host 8 the requests in flight at the server drop after the first 429s
    and every URL ends ok; without it the client keeps hammering at 8."""
    results = {}
    for mode in ("--adaptive", "--adaptive=no"):
        fresh_origin.reset()
        run = run_harvestd(limit_urls(fresh_origin, 24, "0.05"), mode, "--per-host", "8",
                           "--retries", "5", "--retry-base", "100ms", "-vv")
        log = fresh_origin.limit_entries("L")
        first_429 = min(at for at, _, code in log if code == 429)
        refused = sum(1 for _, _, code in log if code == 429)
        results[mode] = (run, log, first_429, refused)
        print("%s: peak %d, after the first 429s %d, %d refused, summary %r"
              % (mode, peak_after(log, 0), peak_after(log, first_429 + 0.5), refused, run.summary))

    run, log, first_429, refused = results["--adaptive"]
    assert all(r["status"] == "ok" for r in run.records), [r for r in run.records if r["status"] != "ok"]
    assert peak_after(log, 0) == 8  # the configured per_host, before the server pushed back
    assert peak_after(log, first_429 + 0.5) < 8
    assert run.summary["throttle_decreases"] >= 1
    assert run.summary["throttle_increases"] >= 1
    assert isinstance(run.summary["hosts_throttled"], int)
    assert "event=throttle" in run.stderr and "direction=down" in run.stderr

    run_no, log_no, first_no, refused_no = results["--adaptive=no"]
    assert run_no.summary["throttle_decreases"] == 0 and run_no.summary["throttle_increases"] == 0
    assert run_no.summary["hosts_throttled"] == 0
    assert peak_after(log_no, first_no + 0.5) >= 6  # still up to per_host 8, as timing allows
    assert refused * 2 < refused_no, "adaptive: %d 429s, without: %d" % (refused, refused_no)


def test_45_31_adaptive_no_429_storm_after_speeding_up(run_harvestd, fresh_origin):
    """The same server refusing at once (429 with no delay). Whatever the pace, a throttled host
    slows down at the first 429 it gets (at most once per round trip), so it can never take
    more refusals in 100 ms than the client has request slots for it (8); every URL ends ok."""
    run = run_harvestd(limit_urls(fresh_origin, 24, "0"), "--adaptive", "--per-host", "8",
                       "--retries", "5", "--retry-base", "100ms", "-vv")
    log = fresh_origin.limit_entries("L")
    refusals = [at for at, _, code in log if code == 429]
    worst = max(sum(1 for u in refusals if t <= u < t + 0.1) for t in refusals)
    throttles = [line.split("event=throttle ", 1)[1] for line in run.stderr.splitlines()
                 if "event=throttle" in line]
    print("429s: %d, most in 100 ms: %d\n%s" % (len(refusals), worst, "\n".join(throttles)))
    failed = [r for r in run.records if r["status"] != "ok"]
    assert worst <= 8, "%d 429s within 100 ms" % worst
    assert not failed, failed


def test_45_32_adaptive_delay_after_one_429(run_harvestd, fresh_origin):
    """One 429 on a host with per_host 1 and no delay: its delay becomes 250 ms, so the next
    request starts at least 250 ms after the refused one. Each success (as many as its
    concurrency, 1) then takes a quarter off the delay (188 ms, 141 ms, ...) instead of going
    straight back to none. Whether a start waits for the delay in force when the previous request
    started or for the current one, the gaps after the 429 are at least 250, 188 and 141 ms."""
    urls = [fresh_origin.url("/seq?key=t&steps=429,ok&title=t")]
    urls += [fresh_origin.url("/page?title=p%d" % i) for i in range(4)]
    run = run_harvestd(urls, "--adaptive", "--per-host", "1", "--retries", "2", "--retry-base", "100ms", "-vv")
    assert all(r["status"] == "ok" for r in run.records), run.records
    reqs = sorted(fresh_origin.snapshot()["requests"], key=lambda r: r.time)
    assert len(reqs) == 6 and "key=t&" in reqs[0].target, reqs
    g = gaps([r.time for r in reqs])
    print("gaps after the 429: %s" % ["%.3f" % x for x in g])
    assert run.summary["throttle_decreases"] == 1
    assert g[0] >= 0.25 - SLACK, "next request %.3fs after the 429 (throttled delay: 250 ms)" % g[0]
    for n, least in ((1, 0.25 * 0.75), (2, 0.25 * 0.75 * 0.75)):
        assert g[n] >= least - SLACK, "gap %d after the 429: %.3fs, expected >= %.3fs" % (n, g[n], least)


# ---------------------------------------------------------------------------- robots.txt

ROBOTS_WILDCARDS = """\
User-agent: *
Disallow: /

User-agent: harvestd
Disallow: /private*
Allow: /private/ok$
Disallow: /*.pdf$
"""


def robots_run(run_harvestd, urls, *args):
    return run_harvestd(urls, "--obey-robots", *args)


def test_45_40_robots_allow_disallow_wildcards(run_harvestd, fresh_origin):
    fresh_origin.serve_any_path = True
    fresh_origin.set_robots(ROBOTS_WILDCARDS)
    allowed = ["/public/page", "/private/ok", "/docs/a.pdf.html", "/pdf", "/"]
    disallowed = ["/private", "/private/x", "/privateer", "/private/ok/more", "/docs/a.pdf", "/x.pdf"]
    urls = [fresh_origin.url(p) for p in allowed + disallowed]
    run = robots_run(run_harvestd, urls)
    assert run.rc == 0
    recs = by_url(run.records)
    for p in allowed:
        assert_ok(recs[fresh_origin.url(p)], p)
    for p in disallowed:
        rec = recs[fresh_origin.url(p)]
        assert_failed(rec, "download", "RobotsDisallowed", "disallowed_by_robots_txt")
        assert "http_status" not in rec, rec
        assert_key_order(rec)
    served = sorted(r.path for r in fresh_origin.snapshot()["requests"])
    assert served == sorted(["/robots.txt"] + allowed), "requests made: %r" % served
    assert run.summary["robots_fetches"] == 1
    assert run.summary["robots_disallowed"] == len(disallowed)
    assert run.summary["error_type.RobotsDisallowed"] == len(disallowed)


def test_45_41_robots_group_follows_the_user_agent_product_token(run_harvestd, fresh_origin):
    fresh_origin.serve_any_path = True
    fresh_origin.set_robots("User-agent: harvestd\nDisallow: /a\n\n"
                            "User-agent: ExampleBot\nDisallow: /b\n\n"
                            "User-agent: *\nDisallow: /c\n")
    urls = [fresh_origin.url(p) for p in ("/a", "/b", "/c")]
    run = robots_run(run_harvestd, urls, "--user-agent", "examplebot/2.0 (+https://example.org/bot)")
    recs = by_url(run.records)
    assert_ok(recs[urls[0]])
    assert_failed(recs[urls[1]], "download", "RobotsDisallowed", "disallowed_by_robots_txt")
    assert_ok(recs[urls[2]])
    assert fresh_origin.requests_to("/robots.txt")[0].header("user-agent").startswith("examplebot/2.0")


def test_45_42_robots_404_allows_everything(run_harvestd, fresh_origin):
    urls = [fresh_origin.url("/page?title=p%d" % i) for i in range(3)]
    run = robots_run(run_harvestd, urls)
    assert all(r["status"] == "ok" for r in run.records), run.records
    assert len(fresh_origin.requests_to("/robots.txt")) == 1
    assert fresh_origin.snapshot()["requests"][0].path == "/robots.txt"
    assert run.summary["robots_fetches"] == 1 and run.summary["robots_disallowed"] == 0


def test_45_43_robots_500_disallows_everything(run_harvestd, fresh_origin):
    fresh_origin.set_robots("oops", status=500)
    urls = [fresh_origin.url("/page?title=p%d" % i) for i in range(3)]
    run = robots_run(run_harvestd, urls, "--retries", "0")
    for r in run.records:
        assert_failed(r, "download", "RobotsDisallowed", "robots_txt_unavailable_http_500")
        check_attempts(r, 1)
    assert fresh_origin.find_request("/page") == []
    assert len(fresh_origin.requests_to("/robots.txt")) == 1
    assert run.summary["robots_fetches"] == 1

    # With retries the refused URLs retry like transient failures; the verdict is kept for a
    # minute, so robots.txt is not asked again and they fail the same way.
    fresh_origin.reset()
    run = robots_run(run_harvestd, urls, "--retries", "1", "--retry-base", "100ms")
    for r in run.records:
        assert_failed(r, "download", "RobotsDisallowed", "robots_txt_unavailable_http_500")
        check_attempts(r, 2)
    assert fresh_origin.find_request("/page") == []
    assert len(fresh_origin.requests_to("/robots.txt")) == 1
    assert run.summary["retries"] == 3


def test_45_44_robots_unreachable_disallows_everything(run_harvestd, closed_port):
    # The record names what made robots.txt unreachable; a refused connection may pass later,
    # so the URL is retried like one.
    url = "http://127.0.0.1:%d/page" % closed_port
    run = robots_run(run_harvestd, [url], "--retries", "0")
    assert_failed(run.records[0], "download", "RobotsDisallowed",
                  "robots_txt_unavailable_connection_refused")
    run = robots_run(run_harvestd, [url], "--retries", "1", "--retry-base", "50ms")
    assert_failed(run.records[0], "download", "RobotsDisallowed",
                  "robots_txt_unavailable_connection_refused")
    check_attempts(run.records[0], 2)


UNACCEPTED_CERTS = [
    ("localhost", False, "certificate_untrusted"),  # a good certificate of a CA we were not given
    ("expired", True, "certificate_expired"),
    ("wrong-name", True, "certificate_hostname_mismatch"),
]


@pytest.mark.parametrize("kind,with_ca,error", UNACCEPTED_CERTS, ids=[c[0] for c in UNACCEPTED_CERTS])
def test_45_44b_robots_unreachable_for_good_reports_the_pages_own_failure(run_harvestd, pki, tls_origins, kind,
                                                                          with_ca, error):
    """robots.txt over a certificate we do not accept: the pages' own requests would meet the
    same certificate, and it will not be accepted a second later. So the URLs that wait for
    robots.txt fail at once, however many retries are allowed, with the failure their own
    request gets (CertificateError), not as refused by a robots.txt that nobody read."""
    origin = tls_origins(kind)
    urls = [origin.url("/page?title=never%d" % i) for i in range(2)]
    args = ["--retries", "2", "--retry-base", "50ms"] + (["--ca-file", pki.ca_file] if with_ca else [])
    run = robots_run(run_harvestd, urls, *args)
    for r in run.records:
        assert_failed(r, "download", "CertificateError", error)
        assert "http_status" not in r, r
        check_attempts(r, 1)
    assert run.summary["retries"] == 0
    assert run.summary["robots_fetches"] == 1
    assert run.summary["robots_disallowed"] == 0
    assert run.summary["error_type.CertificateError"] == 2
    assert "error_type.RobotsDisallowed" not in run.summary, run.summary
    assert origin.requests == []

    # The same records as without robots.txt, where each page meets the certificate itself.
    plain = by_url(run_harvestd(urls, *args).records)
    fields = ("status", "stage", "error_type", "error", "attempts")
    for r in run.records:
        assert {k: r.get(k) for k in fields} == {k: plain[r["requested_url"]].get(k) for k in fields}


def test_45_45_crawl_delay_raises_the_host_delay(run_harvestd, fresh_origin):
    fresh_origin.set_robots("User-agent: *\nCrawl-delay: 1\nDisallow: /nothing\n")
    urls = [fresh_origin.url("/page?title=c%d" % i) for i in range(3)]
    run = robots_run(run_harvestd, urls, "--per-host", "4", "--host-delay", "100ms")
    assert all(r["status"] == "ok" for r in run.records), run.records
    g = gaps(fresh_origin.times("/page?"))
    assert min(g) >= 1.0 - SLACK, g


def test_45_46_robots_fetched_once_per_host(run_harvestd, origins):
    a, b = origins("a"), origins("b")
    a.set_robots("User-agent: *\nDisallow: /status/\n")
    urls = [a.url("/page?title=a%d" % i) for i in range(12)] + [b.url("/page?title=b%d" % i) for i in range(6)]
    urls += [a.url("/status/200")]
    run = robots_run(run_harvestd, urls, "--per-host", "4")
    recs = by_url(run.records)
    assert all(recs[u]["status"] == "ok" for u in urls[:-1])
    assert_failed(recs[urls[-1]], "download", "RobotsDisallowed", "disallowed_by_robots_txt")
    assert len(a.requests_to("/robots.txt")) == 1
    assert len(b.requests_to("/robots.txt")) == 1
    assert run.summary["robots_fetches"] == 2
    for o in (a, b):
        first_page = min(o.times("/page?"))
        assert o.requests_to("/robots.txt")[0].time < first_page


def test_45_47_urls_wait_for_their_hosts_robots_txt(run_harvestd, origins):
    slow, fast = origins("slow"), origins("fast")
    slow.set_robots("User-agent: *\nDisallow: /private\n", delay=1.5)
    fast.set_robots("User-agent: *\nDisallow: /private\n")
    urls = [slow.url("/page?title=s%d" % i) for i in range(4)] + [fast.url("/page?title=f%d" % i) for i in range(4)]
    run = robots_run(run_harvestd, urls)
    assert all(r["status"] == "ok" for r in run.records), run.records
    (robots_asked, robots_done), = slow.robots_log
    s_times = slow.times("/page?")
    f_times = fast.times("/page?")
    assert min(s_times) >= robots_done, "a page was requested before its host's robots.txt came"
    assert max(f_times) < robots_done, "the other host waited for this one's robots.txt"
    assert max(f_times) - robots_asked < 0.5 * SLOWDOWN
    # Records are written as they complete: the fast host's come first.
    order = [r["requested_url"] for r in run.records]
    assert set(order[:4]) == set(urls[4:]), order


def test_45_48_redirect_to_another_host_gets_its_robots_txt(run_harvestd, origins):
    a, b = origins("a"), origins("b")
    b.set_robots("User-agent: *\nDisallow: /status/\n")
    to_ok = a.url("/redir?to=" + b.url("/page?title=there"))
    to_blocked = a.url("/redir?to=" + b.url("/status/200"))
    run = robots_run(run_harvestd, [to_ok, to_blocked])
    recs = by_url(run.records)
    assert_ok(recs[to_ok], "there")
    assert recs[to_ok]["url"] == b.url("/page?title=there")
    rec = recs[to_blocked]
    assert_failed(rec, "download", "RobotsDisallowed", "disallowed_by_robots_txt")
    assert rec["url"] == b.url("/status/200"), rec
    assert rec["redirects"] == 1, rec
    assert len(a.requests_to("/robots.txt")) == 1
    assert len(b.requests_to("/robots.txt")) == 1
    assert b.requests_to("/status/200") == []
    assert run.summary["robots_fetches"] == 2


def test_45_49_robots_max_bytes(run_harvestd, fresh_origin):
    """Only the first --robots-max-bytes of robots.txt count: a rule after them is ignored."""
    fresh_origin.serve_any_path = True
    pad = "".join("# filler line %04d to push the next rule past the limit\n" % i for i in range(100))
    fresh_origin.set_robots("User-agent: *\nDisallow: /early\n" + pad + "Disallow: /late\n")
    urls = [fresh_origin.url("/early"), fresh_origin.url("/late")]
    run = robots_run(run_harvestd, urls, "--robots-max-bytes", "1k")
    recs = by_url(run.records)
    assert_failed(recs[urls[0]], "download", "RobotsDisallowed", "disallowed_by_robots_txt")
    assert_ok(recs[urls[1]], "/late")


def test_45_50_disallowed_urls_do_not_use_up_the_crawl_delay(run_harvestd, fresh_origin):
    """The host delay spaces request starts; a URL refused by robots.txt makes no request, so
    refusing three of them must not hold the allowed one back by three Crawl-delays."""
    fresh_origin.serve_any_path = True
    fresh_origin.set_robots("User-agent: *\nCrawl-delay: 1\nDisallow: /no\n")
    urls = [fresh_origin.url(p) for p in ("/no1", "/no2", "/no3", "/yes")]
    run = robots_run(run_harvestd, urls)
    recs = by_url(run.records)
    for u in urls[:3]:
        assert_failed(recs[u], "download", "RobotsDisallowed", "disallowed_by_robots_txt")
    assert_ok(recs[urls[3]], "/yes")
    robots_at = fresh_origin.requests_to("/robots.txt")[0].time
    (yes,) = fresh_origin.requests_to("/yes")
    assert yes.time - robots_at < 1.5 * SLOWDOWN, \
        "the allowed URL was requested %.2fs after robots.txt" % (yes.time - robots_at)


def test_45_51_robots_limits_never_allow_what_is_disallowed(run_harvestd, fresh_origin):
    """A Disallow longer than the 2,048-octet pattern limit is cut, not dropped, and a Disallow
    after 10,000 rules still counts (the file stays under the 500 KiB read)."""
    fresh_origin.serve_any_path = True
    long_path = "/" + "a" * 2999
    allows = "".join("Allow: /allowed%05d\n" % i for i in range(10000))
    body = "User-agent: *\nDisallow: %s\n%sDisallow: /x\n" % (long_path, allows)
    assert len(body) < 500 * 1024
    fresh_origin.set_robots(body)
    urls = [fresh_origin.url(p) for p in (long_path, long_path + "/more", "/x/y", "/allowed00001", "/y")]
    run = robots_run(run_harvestd, urls)
    recs = by_url(run.records)
    for u in urls[:3]:
        assert_failed(recs[u], "download", "RobotsDisallowed", "disallowed_by_robots_txt")
    assert_ok(recs[urls[3]], "/allowed00001")
    assert_ok(recs[urls[4]], "/y")
    served = sorted(r.path for r in fresh_origin.snapshot()["requests"])
    assert served == ["/allowed00001", "/robots.txt", "/y"], served


def test_45_52_robots_txt_carries_the_hosts_request_headers(run_harvestd, fresh_origin, tmp_path):
    """robots.txt is asked with the request headers of its host (a site that wants a consent
    cookie for every path): 127.0.0.1's robots.txt gets the global ones, that of localhost, which
    a redirect leads to, its section's as well."""
    o = fresh_origin
    conf = politeness_config(tmp_path, {"localhost": {"header": "Cookie: consent=1"},
                                        "127.0.0.1": {"header": "X-Site: first"}},
                             header="Accept-Language: en")
    url = o.url("/redir?to=" + "http://localhost:%d/page?title=there" % o.port)
    run = robots_run(run_harvestd, [url], "-c", conf)
    assert_ok(run.records[0], "there")
    robots = {r.header("host"): r for r in o.requests_to("/robots.txt")}
    first, there = robots["127.0.0.1:%d" % o.port], robots["localhost:%d" % o.port]
    assert (first.header("accept-language"), first.header("x-site"), first.header("cookie")) == \
        ("en", "first", None), first.headers
    assert (there.header("accept-language"), there.header("x-site"), there.header("cookie")) == \
        ("en", None, "consent=1"), there.headers
