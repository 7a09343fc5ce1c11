"""Limits: timeouts, body size, memory and backpressure."""

import pytest

from harness import MIB, SANITIZER, SLOWDOWN, assert_failed, assert_ok, by_url

RSS_LIMIT_KIB = 64 * 1024


# ---------------------------------------------------------------------------- timeouts

def test_40_01_read_timeout_before_headers(run_harvestd, origin):
    url = origin.url("/slow-headers?delay=3&title=late")
    run = run_harvestd([url], "--read-timeout", "1s", "--total-timeout", "10s")
    rec = run.records[0]
    assert_failed(rec, "download", "ReadTimeout")
    assert 900 <= rec["elapsed_ms"] <= 2500 * SLOWDOWN, rec
    assert run.elapsed < 2.8 * SLOWDOWN, "the run waited for the slow origin: %.1fs" % run.elapsed


def test_40_02_read_timeout_between_body_bytes(run_harvestd, origin):
    url = origin.url("/drip?interval=2&count=3&title=stall")
    run = run_harvestd([url], "--read-timeout", "1s", "--total-timeout", "10s")
    rec = run.records[0]
    assert_failed(rec, "download", "ReadTimeout")
    assert 900 <= rec["elapsed_ms"] <= 2500 * SLOWDOWN, rec


def test_40_03_read_timeout_restarts_on_each_read(run_harvestd, origin):
    # 12 bytes 0.2 s apart: 2.4 s in all, far over the 1 s read timeout, never 1 s idle.
    url = origin.url("/drip?interval=0.2&count=12&title=steady")
    run = run_harvestd([url], "--read-timeout", "1s", "--total-timeout", "10s")
    rec = run.records[0]
    assert_ok(rec, "steady")
    assert rec["elapsed_ms"] >= 2300


def test_40_04_total_timeout_while_bytes_drip(run_harvestd, origin):
    url = origin.url("/drip?interval=0.3&count=100&title=endless")
    run = run_harvestd([url], "--read-timeout", "2s", "--total-timeout", "2s")
    rec = run.records[0]
    assert_failed(rec, "download", "TotalTimeout")
    assert 1800 <= rec["elapsed_ms"] <= 4000 * SLOWDOWN, rec
    assert run.elapsed < 5 * SLOWDOWN


def test_40_05_total_timeout_covers_redirects(run_harvestd, origin):
    # Each hop answers within the read timeout; together they exceed the total timeout.
    url = origin.url("/redirect/4?delay=0.7")
    run = run_harvestd([url], "--read-timeout", "1s", "--total-timeout", "2s")
    rec = run.records[0]
    assert_failed(rec, "download", "TotalTimeout")
    assert 1800 <= rec["elapsed_ms"] <= 3000 * SLOWDOWN, rec


def test_40_06_connect_timeout(run_harvestd, black_hole):
    url = black_hole.url("/page")
    run = run_harvestd([url], "--connect-timeout", "1s")
    rec = run.records[0]
    assert_failed(rec, "download", "ConnectTimeout")
    assert 900 <= rec["elapsed_ms"] <= 2500 * SLOWDOWN, rec


# ---------------------------------------------------------------------------- body size

@pytest.mark.parametrize("query", ["cl=1", "cl=0", "chunked=1"],
                         ids=["content-length", "close-delimited", "chunked"])
def test_40_07_page_too_large(run_harvestd, origin, query):
    url = origin.url("/big?size=100000&" + query)
    run = run_harvestd([url], "--max-bytes", "64k")
    rec = run.records[0]
    assert_failed(rec, "download", "PageTooLarge", "response_exceeds_64_kib")
    assert run.summary.get("error_type.PageTooLarge") == 1


def test_40_08_max_bytes_boundary(run_harvestd, origin):
    at, over = origin.url("/big?size=65536&title=at"), origin.url("/big?size=65537&title=over")
    run = run_harvestd([at, over], "--max-bytes", "64k")
    recs = by_url(run.records)
    assert_ok(recs[at], "at")
    assert recs[at]["bytes"] == 65536
    assert_failed(recs[over], "download", "PageTooLarge", "response_exceeds_64_kib")


def test_40_09_gzip_limit_applies_to_decoded_size(run_harvestd, origin):
    # About 4 KiB on the wire, 3 MB decoded.
    url = origin.url("/gzip?title=bomb&size=3000000")
    run = run_harvestd([url], "--max-bytes", "1m")
    assert_failed(run.records[0], "download", "PageTooLarge", "response_exceeds_1_mib")


def test_40_10_default_max_bytes_is_2m(run_harvestd, origin):
    under = origin.url("/big?size=2000000&title=under")
    over = origin.url("/big?size=2200000&title=over")
    run = run_harvestd([under, over])
    recs = by_url(run.records)
    assert_ok(recs[under], "under")
    assert recs[under]["bytes"] == 2000000
    assert_failed(recs[over], "download", "PageTooLarge", "response_exceeds_2_mib")


# ---------------------------------------------------------------------------- memory

def _rss_run(run_harvestd, origin, n, tag):
    urls = [origin.url("/page?title=%s%d&size=3000" % (tag, i)) for i in range(n)]
    run = run_harvestd(urls, timeout=120)
    assert run.rc == 0
    assert len(run.records) == n
    bad = [r for r in run.records if r["status"] != "ok"]
    assert not bad, "%d failures, first: %r" % (len(bad), bad[:3])
    titles = sorted(r["title"] for r in run.records)
    assert titles == sorted("%s%d" % (tag, i) for i in range(n))
    return run


def test_40_11_memory_stays_bounded_over_10k_urls(run_harvestd, fresh_origin):
    small = _rss_run(run_harvestd, fresh_origin, 1000, "k")
    big = _rss_run(run_harvestd, fresh_origin, 10000, "m")
    print("peak RSS: 1k URLs %d KiB, 10k URLs %d KiB" % (small.maxrss_kib, big.maxrss_kib))
    assert big.summary["records"] == 10000 and big.summary["ok"] == 10000
    if SANITIZER:
        pytest.skip("memory bounds are not meaningful under %s" % SANITIZER)
    assert big.maxrss_kib < RSS_LIMIT_KIB, "peak RSS %d KiB" % big.maxrss_kib
    assert big.maxrss_kib <= small.maxrss_kib * 1.25 + 4 * 1024, \
        "peak RSS grows with the input: %d KiB for 1k URLs, %d KiB for 10k" % (
            small.maxrss_kib, big.maxrss_kib)


def test_40_12_100k_lines_of_comments_blanks_and_invalid(harvestd):
    lines = []
    expected = []
    for i in range(100000):
        kind = i % 3
        if kind == 0:
            lines.append("# comment %d" % i)
        elif kind == 1:
            lines.append("" if i % 2 else "   ")
        else:
            lines.append("not a url %d" % i)
            expected.append("not a url %d" % i)
    run = harvestd.run(lines, timeout=120)
    assert run.rc == 0
    assert len(run.records) == len(expected)
    assert sorted(r["requested_url"] for r in run.records) == sorted(expected)
    assert all(r["stage"] == "input" and r["error_type"] == "InvalidUrl" for r in run.records)
    assert run.summary["failed"] == len(expected)
    assert run.summary.get("error_type.InvalidUrl") == len(expected)
    print("peak RSS %d KiB" % run.maxrss_kib)
    if not SANITIZER:
        assert run.maxrss_kib < RSS_LIMIT_KIB, "peak RSS %d KiB" % run.maxrss_kib


# ---------------------------------------------------------------------------- backpressure

def test_40_13_backpressure_from_slow_parsing(run_harvestd, fresh_origin):
    size = 1500000
    urls = [fresh_origin.url("/big?size=%d&title=Heavy&i=%d" % (size, i)) for i in range(40)]
    # Full parses make the single parser the bottleneck (the title fast path would keep up).
    run = run_harvestd(urls, "--title-fast-path=no", "--parse-jobs", "1", "--page-queue", "2", "--queue-size", "4",
                       "--result-queue", "2", "--max-bytes", "4m", timeout=120)
    assert run.rc == 0
    recs = by_url(run.records)
    assert set(recs) == set(urls)
    for r in recs.values():
        assert_ok(r, "Heavy")
        assert r["bytes"] == size
    s = run.summary
    assert 1 <= s["hwm_pages"] <= 2, s
    assert s["hwm_jobs"] <= 4, s
    assert 1 <= s["hwm_results"] <= 2, s
    assert s["read_pauses"] > 0, s
    # Two queued pages at most, each no larger than --max-bytes.
    assert size <= s["hwm_page_bytes"] <= 2 * 4 * MIB, s
    print("peak RSS %d KiB" % run.maxrss_kib)


def test_40_14_page_queue_byte_limit(run_harvestd, fresh_origin):
    size = 1500000
    urls = [fresh_origin.url("/big?size=%d&title=Bytes&i=%d" % (size, i)) for i in range(24)]
    run = run_harvestd(urls, "--title-fast-path=no", "--parse-jobs", "1", "--page-queue", "64", "--page-queue-bytes", "3m",
                       "--max-bytes", "4m", timeout=120)
    assert run.rc == 0
    assert all(r["status"] == "ok" and r["bytes"] == size for r in run.records)
    assert len(run.records) == 24
    s = run.summary
    # A page may be admitted while the queue holds less than the limit, so the queue may
    # overshoot by one page (at most --max-bytes).
    assert size <= s["hwm_page_bytes"] <= 3 * MIB + 4 * MIB, s
    assert s["hwm_pages"] <= 3, s
