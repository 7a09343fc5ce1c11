"""Connections: refused, unresolvable, reset or closed mid-body, keep-alive reuse, the stale
connection retry, and the global and per-host limits."""

import urllib.parse

import pytest

import netns
from harness import (HARVESTD_BIN, assert_failed, assert_ok, by_url, check_sanitizer, parse_records,
                     parse_summary)


def test_25_01_connection_refused(run_harvestd, closed_port):
    url = "http://127.0.0.1:%d/page?title=nobody" % closed_port
    run = run_harvestd([url])
    assert run.rc == 0
    rec = run.records[0]
    assert_failed(rec, "download", "ConnectError")
    assert "http_status" not in rec
    assert run.summary.get("error_type.ConnectError") == 1


@pytest.mark.parametrize("host,error", [("nonexistent.invalid", "name_not_resolved"),
                                        ("no-address.test", "no_address_for_name")],
                         ids=["nxdomain", "no-data"])
def test_25_02_unresolvable_host(harvestd, tmp_path, host, error):
    # Looked up against a resolver of the test's own, in a network namespace of its own: no
    # query leaves the machine (glibc would send one for .invalid too).
    url = "http://%s/" % host
    inp, out = tmp_path / "urls.txt", tmp_path / "out.jsonl"
    inp.write_text(url + "\n")
    done = netns.run([HARVESTD_BIN, "--once", str(inp), "-o", str(out)], tmp_path,
                     names={"no-address.test": []})
    check_sanitizer(done.stderr)
    assert done.returncode == 0, done.stderr
    records = parse_records(out.read_bytes())
    assert len(records) == 1
    rec = records[0]
    assert_failed(rec, "download", "DnsError", error)
    assert rec["requested_url"] == url
    assert parse_summary(done.stderr).get("error_type.DnsError") == 1


@pytest.mark.parametrize("path", ["/reset-mid-body", "/close-mid-body", "/chunked-truncated"],
                         ids=["reset", "close", "chunked-close"])
def test_25_03_connection_lost_mid_body(run_harvestd, origin, path):
    broken = origin.url(path)
    fine = [origin.url("/page?title=bystander%d&size=20000" % i) for i in range(4)]
    run = run_harvestd([broken] + fine, "--per-host", "2")
    assert run.rc == 0
    recs = by_url(run.records)
    assert_failed(recs[broken], "download", "ConnectionReset")
    for i, url in enumerate(fine):
        assert_ok(recs[url], "bystander%d" % i)


def test_25_04_keep_alive_reuses_one_connection(run_harvestd, fresh_origin):
    urls = [fresh_origin.url("/page?title=ka%d&size=%d" % (i, 1000 + 997 * i)) for i in range(20)]
    run = run_harvestd(urls, "--per-host", "1")
    assert run.rc == 0
    recs = by_url(run.records)
    for i, url in enumerate(urls):
        assert_ok(recs[url], "ka%d" % i)
        assert recs[url]["bytes"] == 1000 + 997 * i
    snap = fresh_origin.snapshot()
    assert snap["requests_served"] == 20
    assert snap["connections_accepted"] == 1, "20 pages with --per-host 1 should share one connection"
    assert run.summary["connections_opened"] == 1
    assert run.summary["connections_reused"] == 19


def test_25_05_keep_alive_across_redirects_and_gzip(run_harvestd, fresh_origin):
    urls = [fresh_origin.url("/redirect/3"), fresh_origin.url("/gzip?title=z&size=9000"),
            fresh_origin.url("/chunked?title=c&size=5000"), fresh_origin.url("/status/404")]
    run = run_harvestd(urls, "--per-host", "1")
    assert len(run.records) == 4
    assert fresh_origin.connections_accepted == 1
    assert fresh_origin.requests_served == 7


@pytest.mark.parametrize("delay", ["0", "0.3"], ids=["closed-at-once", "closed-later"])
def test_25_06_stale_keep_alive_connection_is_retried(run_harvestd, fresh_origin, delay):
    # Every /close-after-response answer leaves a connection the server abandons: it closes it
    # (delay 0) or drops the next request sent on it unanswered (before the delay ran out).
    urls = []
    for i in range(8):
        urls.append(fresh_origin.url("/close-after-response?delay=%s&title=c%d" % (delay, i)))
        urls.append(fresh_origin.url("/page?title=p%d" % i))
    run = run_harvestd(urls, "--per-host", "1", "--concurrency", "1")
    assert run.rc == 0
    recs = by_url(run.records)
    assert len(recs) == 16
    for i in range(8):
        assert_ok(recs[urls[2 * i]], "c%d" % i)
        assert_ok(recs[urls[2 * i + 1]], "p%d" % i)
    snap = fresh_origin.snapshot()
    # Each abandoned connection forces a new one for the next request.
    assert snap["connections_accepted"] >= 9, snap["connections_accepted"]
    if delay != "0":
        # The program did send requests on abandoned connections, so the retry path ran.
        assert snap["stale_drops"] >= 1
    # At most one retry per dropped request: no request storm.
    assert len(snap["requests"]) == 16 + snap["stale_drops"]


def test_25_06b_every_redirect_hop_gets_its_own_stale_retry(run_harvestd, fresh_origin):
    # Each hop's connection is abandoned by the server after its answer, so every next hop is
    # sent first on a pooled connection that is dead: each request, not each URL, is entitled
    # to its one retry on a fresh connection.
    url = fresh_origin.url("/redirect/4?abandon=0.5")
    run = run_harvestd([url], "--per-host", "1", "--concurrency", "1")
    assert run.rc == 0
    rec = by_url(run.records)[url]
    assert_ok(rec, "final")
    assert rec["redirects"] == 4
    snap = fresh_origin.snapshot()
    assert snap["stale_drops"] >= 2, snap["stale_drops"]
    assert len(snap["requests"]) == 5 + snap["stale_drops"]


def test_25_07_per_host_limit(run_harvestd, fresh_origin):
    urls = [fresh_origin.url("/page?title=ph%d&delay=0.25" % i) for i in range(12)]
    run = run_harvestd(urls, "--per-host", "2", "--concurrency", "16")
    assert run.rc == 0
    assert all(r["status"] == "ok" for r in run.records)
    assert fresh_origin.max_inflight == 2
    assert fresh_origin.max_open_connections <= 2


def test_25_08_global_concurrency_limit(run_harvestd, fresh_origin):
    urls = [fresh_origin.url("/page?title=gc%d&delay=0.25" % i) for i in range(12)]
    run = run_harvestd(urls, "--per-host", "16", "--concurrency", "3")
    assert run.rc == 0
    assert all(r["status"] == "ok" for r in run.records)
    assert fresh_origin.max_inflight == 3
    assert fresh_origin.max_open_connections <= 3


def test_25_09_default_per_host_limit_is_4(run_harvestd, fresh_origin):
    urls = [fresh_origin.url("/page?title=dh%d&delay=0.25" % i) for i in range(12)]
    run = run_harvestd(urls)
    assert all(r["status"] == "ok" for r in run.records)
    assert fresh_origin.max_inflight == 4


def test_25_10_connection_close_and_http10_are_not_reused(run_harvestd, fresh_origin):
    # The origin drops any request sent on a connection it announced it would close.
    urls = []
    for i in range(3):
        urls += [fresh_origin.url("/page?close=1&title=c%d" % i),
                 fresh_origin.url("/page?v10=1&title=v%d" % i),
                 fresh_origin.url("/page?title=n%d" % i)]
    run = run_harvestd(urls, "--per-host", "1", "--concurrency", "1")
    assert run.rc == 0
    recs = by_url(run.records)
    for url in urls:
        assert_ok(recs[url], url.rsplit("=", 1)[1])
    assert fresh_origin.stale_drops == 0, "a connection was reused after Connection: close / HTTP/1.0"
    assert fresh_origin.connections_accepted >= 6


def test_25_11_one_pool_per_host_and_port(run_harvestd, fresh_origin, other_origin):
    urls = []
    for i in range(8):
        urls += [fresh_origin.url("/page?title=a%d" % i), other_origin.url("/page?title=b%d" % i)]
    run = run_harvestd(urls, "--per-host", "1")
    assert run.rc == 0
    assert all(r["status"] == "ok" for r in run.records)
    assert fresh_origin.connections_accepted == 1
    assert other_origin.connections_accepted == 1
    assert fresh_origin.requests_served == other_origin.requests_served == 8


def test_25_12_redirect_to_another_port(run_harvestd, fresh_origin, other_origin):
    target = other_origin.url("/page?title=elsewhere")
    url = fresh_origin.url("/redir?" + urllib.parse.urlencode({"code": 301, "to": target}))
    run = run_harvestd([url])
    rec = run.records[0]
    assert_ok(rec, "elsewhere")
    assert rec["url"] == target
    assert rec["redirects"] == 1
    (req,) = other_origin.requests_to("/page")
    assert req.header("host") == "127.0.0.1:%d" % other_origin.port


# Endpoint -> (status, error_type) expected under default limits.
MIXED = [
    ("/page?title=T&size=4000", ("ok", None)),
    ("/gzip?title=T&size=20000", ("ok", None)),
    ("/chunked?title=T&size=3000&chunk=100", ("ok", None)),
    ("/big?size=50000&cl=0&title=T", ("ok", None)),
    ("/redirect/2", ("ok", None)),
    ("/close-after-response?delay=0&title=T", ("ok", None)),
    ("/status/404", ("failed", "HttpStatus")),
    ("/notitle", ("failed", "MissingTitle")),
    ("/type?ct=image/png", ("failed", "UnexpectedContentType")),
    ("/reset-mid-body", ("failed", "ConnectionReset")),
    ("/close-mid-body", ("failed", "ConnectionReset")),
    ("/garbage", ("failed", "ProtocolError")),
    ("/huge-header?kib=70", ("failed", "ProtocolError")),
    ("/loop", ("failed", "TooManyRedirects")),
]


def test_25_13_mixed_load(run_harvestd, fresh_origin):
    urls, expected = [], {}
    for i in range(60):
        for path, outcome in MIXED:
            sep = "&" if "?" in path else "?"
            url = fresh_origin.url("%s%sn=%d" % (path, sep, i))
            urls.append(url)
            expected[url] = outcome
    run = run_harvestd(urls, "--concurrency", "64", "--per-host", "16", timeout=120)
    assert run.rc == 0
    recs = by_url(run.records)
    assert set(recs) == set(urls)
    wrong = [(u, recs[u]) for u in urls
             if (recs[u]["status"], recs[u].get("error_type")) != expected[u]]
    assert not wrong, "%d unexpected records, e.g. %r" % (len(wrong), wrong[:3])
    for u in urls:
        if recs[u]["status"] == "ok":
            assert recs[u]["title"] in ("T", "final")
    assert fresh_origin.max_inflight <= 16
