"""HTTP/2: ALPN (h2 offered with http/1.1, `--http2 off`), records carrying `http_version`,
streams sharing a connection up to min(per_host, the server's MAX_CONCURRENT_STREAMS),
`http2_window`, stream resets (error codes, ENHANCE_YOUR_CALM, REFUSED_STREAM resent without
counting a retry, HTTP_1_1_REQUIRED falling back to HTTP/1.1 for the host), GOAWAY (in flight,
with an error code), connections lost mid-response, protocol errors found by nghttp2 (HPACK,
frame size, flow control, a head without :status), header bombs, CONTINUATION floods, a server
that never sends SETTINGS, stalls, 100,000 one-byte DATA frames, backpressure (a held page queue
closes the stream windows while PINGs are still answered, memory bounded by streams x window),
cleartext h2c by prior knowledge (flag and [host] section), and real servers: nginx (content,
gzip, redirects, 404, size limit, keepalive_requests GOAWAYs, --http2 off) and nghttpd
(--max-concurrent-streams 4).

The servers are in h2servers.py: H2FaultServer (python3-h2, behaviour per path), Nginx
(nginx-light) and Nghttpd (nghttp2-server), all on 127.0.0.1 with the session's test PKI.
The test_27_00/01 self-tests check the servers themselves with curl (no harvestd needed)."""

import atexit
import os
import re
import shutil
import subprocess
import tempfile
import time
import urllib.parse

import pytest

from harness import (SANITIZER, assert_failed, assert_ok, by_url, launcher, parse_fetched_at,
                     sanitizer_runtime, vm_kib, write_config)
from h2servers import NGINX_BIG_SIZE, NGINX_PAGES, h2_faults, nghttpd_h2, nginx_h2  # noqa: F401
from origin import html_page

PROTOCOL = "ProtocolError"  # the record's error_type of protocol errors (HTTP/1.1's too)
H2_ERROR = re.compile(r"^h2_[a-z0-9_]+$")
HEAD_TOO_BIG = re.compile(r"^(headers_exceed_[a-z0-9_]+|h2_[a-z0-9_]+)$")
SUMMARY_H2_KEYS = ("connections_h2", "streams_h2", "streams_refused", "streams_reset",
                   "h2_goaways")
FORBIDDEN_H2_FIELDS = ("connection", "keep-alive", "proxy-connection", "transfer-encoding",
                       "upgrade")


def ca(pki):
    return ["--ca-file", pki.ca_file]


def assert_h2_ok(rec, title=None, version="2"):
    assert_ok(rec, title)
    assert rec.get("http_version") == version, rec


def check_versions(records, version):
    """Every record that got a response head (it has an http_status) says which protocol."""
    for r in records:
        if "http_status" in r:
            assert r.get("http_version") == version, r


def h2_summary(run, h2=True):
    """The run's summary, which must count HTTP/2 (SUMMARY_H2_KEYS) when it was used (h2);
    without HTTP/2 a missing count is taken as 0."""
    s = run.summary
    assert s is not None, "no summary line"
    for key in SUMMARY_H2_KEYS + ("connections_opened", "retries"):
        if not h2 and key in SUMMARY_H2_KEYS:
            s.setdefault(key, 0)
        assert isinstance(s.get(key), int) and s[key] >= 0, "summary lacks %s: %r" % (key, s)
    return s


def only_record(run):
    assert run.rc == 0, run.stderr[-3000:]
    assert len(run.records) == 1, run.records
    return run.records[0]


# ---------------------------------------------------------------------------- the servers

def _curl_h2():
    curl = shutil.which("curl")
    if not curl:
        pytest.skip("curl is not installed")
    features = subprocess.run([curl, "-V"], stdout=subprocess.PIPE, timeout=10).stdout.decode()
    if "HTTP2" not in features:
        pytest.skip("this curl has no HTTP/2")
    return curl


def curl(pki, *args):
    """(HTTP version, status, exit status, body) of one curl transfer."""
    with tempfile.NamedTemporaryFile() as body:
        done = subprocess.run([_curl_h2(), "-s", "-m", "10", "--cacert", pki.ca_file,
                               "-o", body.name, "-w", "%{http_version} %{response_code}"]
                              + list(args), stdout=subprocess.PIPE, timeout=30)
        version, status = done.stdout.decode().split()
        return version, int(status), done.returncode, body.read()


def test_27_00_fault_server_self_test(pki, h2_faults):
    s = h2_faults(ping_interval=0.1)
    assert curl(pki, "--http2", s.url("/ok?title=Curl%20H2&delay=0.5"))[:3] == ("2", 200, 0)
    version, status, rc, body = curl(pki, "--http1.1", s.url("/ok?title=Curl%20One"))
    assert (version, status, rc) == ("1.1", 200, 0) and b"<title>Curl One</title>" in body
    version, status, rc, body = curl(pki, "--http2", s.url("/tiny-data?title=Tiny&count=3000"))
    assert (version, rc, len(body)) == ("2", 0, 3000) and b"<title>Tiny</title>" in body
    assert curl(pki, "--http2", s.url("/rst/internal_error"))[2] != 0
    # curl sends a refused stream again by itself.
    again = curl(pki, "--http2", s.url("/refuse?times=1&title=Second"))
    assert b"<title>Second</title>" in again[3], again
    assert len(s.requests_to("/refuse")) == 2
    snap = s.snapshot()
    protocols = [c["protocol"] for c in snap["connections"].values()]
    assert protocols[:4] == ["h2", "http/1.1", "h2", "h2"], protocols
    assert snap["ping_acks"], "curl answered no PING during the delayed answer"
    assert not snap["errors"], snap["errors"]
    clear = h2_faults(tls=False)
    assert curl(pki, "--http2-prior-knowledge", clear.url("/ok?title=Clear"))[:3] == ("2", 200, 0)
    assert curl(pki, clear.url("/ok?title=Plain"))[:3] == ("1.1", 200, 0)
    assert [r.protocol for r in clear.snapshot()["requests"]] == ["h2", "http/1.1"]


def test_27_01_nginx_and_nghttpd_self_test(pki, nginx_h2, nghttpd_h2):
    n = nginx_h2
    version, status, rc, body = curl(pki, "--http2", "--compressed", n.url("/gzip.html"))
    assert (version, status, rc) == ("2", 200, 0) and b"<title>Zipped Over H2</title>" in body
    assert curl(pki, "--http2", n.url("/moved"))[:2] == ("2", 301)
    assert curl(pki, "--http2", n.url("/missing.html"))[:2] == ("2", 404)
    for _ in range(3):
        assert curl(pki, "--http2", n.url("/index.html", goaway=True))[:2] == ("2", 200)
    log = n.access()
    assert [(a.protocol, a.status, a.encoding) for a in log[:3]] == \
        [("HTTP/2.0", 200, "gzip"), ("HTTP/2.0", 301, "-"), ("HTTP/2.0", 404, "-")]
    assert [a.port for a in log[3:]] == [n.goaway_port] * 3
    pages = {"p%d.html" % i: html_page("P%d" % i, 200000) for i in range(8)}
    d = nghttpd_h2(pages, max_concurrent_streams=2)
    args = ["--http2", "--parallel", "--parallel-max", "8"]
    for name in pages:
        args += [d.url(name), "-o", "/dev/null"]
    done = subprocess.run([_curl_h2(), "-s", "--cacert", pki.ca_file, "-w", "%{http_version}\n"]
                          + args, stdout=subprocess.PIPE, timeout=60)
    assert done.stdout.decode().split() == ["2"] * 8
    assert sorted(d.paths()) == sorted("/" + p for p in pages)
    assert max(d.max_open().values()) <= 2


# ---------------------------------------------------------------------------- negotiation

def test_27_02_ok_record_over_h2(run_harvestd, pki, h2_faults):
    s = h2_faults()
    url = s.url("/ok?title=Hello%20H2&size=5000")
    before = time.time()
    run = run_harvestd([url], *ca(pki))
    after = time.time()
    rec = only_record(run)
    assert_h2_ok(rec, "Hello H2")
    assert rec["requested_url"] == rec["url"] == url, rec
    assert rec["http_status"] == 200 and rec["bytes"] == 5000, rec
    assert rec["content_type"].split(";")[0].strip() == "text/html", rec
    assert rec.get("redirects", 0) == 0, rec
    assert before - 1 <= parse_fetched_at(rec["fetched_at"]) <= after + 1, rec
    sm = h2_summary(run)
    assert sm["connections_h2"] == 1 and sm["streams_h2"] == 1, sm
    assert sm["connections_opened"] == 1, sm
    assert sm["streams_refused"] == 0 and sm["streams_reset"] == 0 and sm["retries"] == 0, sm
    snap = s.snapshot()
    assert [(c["protocol"], c["alpn"]) for c in snap["connections"].values()] == [("h2", "h2")]
    (req,) = snap["requests"]
    fields = dict(req.headers)
    assert fields[":method"] == "GET" and fields[":scheme"] == "https", req
    assert fields[":authority"] == "localhost:%d" % s.port, req
    assert fields[":path"] == "/ok?title=Hello%20H2&size=5000", req
    assert fields.get("user-agent", "").startswith("harvestd/"), req
    names = [k for k, _ in req.headers]
    assert not [k for k in names if k in FORBIDDEN_H2_FIELDS], "connection-specific: %r" % names
    assert names == [k.lower() for k in names], names
    assert not snap["errors"], snap["errors"]


@pytest.mark.parametrize("http2,offered", [(None, ("h2", "http/1.1")), ("auto", ("h2", "http/1.1")),
                                           ("off", ("http/1.1",))], ids=["default", "auto", "off"])
def test_27_03_alpn_offer(run_harvestd, pki, raw_tls_peers, http2, offered):
    peer = raw_tls_peers("close")
    args = ca(pki) + (["--http2", http2] if http2 else [])
    run = run_harvestd([peer.url("/a")], *args)
    assert only_record(run)["status"] == "failed"
    assert peer.hellos, "no ClientHello arrived"
    assert {h.alpn for h in peer.hellos} == {offered}, peer.hellos


def test_27_04_server_without_h2_gets_http11(run_harvestd, pki, h2_faults):
    s = h2_faults(alpn=("http/1.1",))
    urls = [s.url("/ok?title=Old%%20School%d" % i) for i in range(3)]
    run = run_harvestd(urls, *ca(pki))
    recs = by_url(run.records)
    for i, url in enumerate(urls):
        assert_h2_ok(recs[url], "Old School%d" % i, version="1.1")
    sm = h2_summary(run, h2=False)
    assert sm["connections_h2"] == 0 and sm["streams_h2"] == 0, sm
    assert {c["protocol"] for c in s.snapshot()["connections"].values()} == {"http/1.1"}


def test_27_05_streams_share_one_connection(run_harvestd, pki, h2_faults):
    s = h2_faults()
    urls = [s.url("/ok?title=Shared%d&delay=0.3" % i) for i in range(12)]
    run = run_harvestd(urls, *ca(pki), "--per-host", "6", "--concurrency", "32")
    assert run.rc == 0
    recs = by_url(run.records)
    for i, url in enumerate(urls):
        assert_h2_ok(recs[url], "Shared%d" % i)
    sm = h2_summary(run)
    assert sm["connections_h2"] == 1 and sm["connections_opened"] == 1, sm
    assert sm["streams_h2"] == 12, sm
    (conn,) = s.snapshot()["connections"].values()
    assert conn["streams"] == 12, conn
    # per_host 6 < the server's 100: six streams at once on the one connection, never more.
    assert conn["max_open"] == 6, conn


def test_27_06_nghttpd_max_concurrent_streams(run_harvestd, pki, nghttpd_h2):
    pages = {"p%02d.html" % i: html_page("Nghttpd %d" % i, 300000 + i) for i in range(40)}
    d = nghttpd_h2(pages, max_concurrent_streams=4)
    urls = [d.url(name) for name in pages]
    run = run_harvestd(urls, *ca(pki), "--per-host", "16", "--concurrency", "32")
    assert run.rc == 0
    recs = by_url(run.records)
    for i, url in enumerate(urls):
        assert_h2_ok(recs[url], "Nghttpd %d" % i)
        assert recs[url]["bytes"] == 300000 + i
    sm = h2_summary(run)
    per_conn = d.max_open()
    print("streams open at once per nghttpd connection: %r" % per_conn)
    # Never more than the server allows on a connection; a second connection only when the
    # first is full: per_host 16 / 4 streams a connection.
    assert per_conn and max(per_conn.values()) <= 4, per_conn
    assert max(per_conn.values()) == 4, "no connection was used up to its limit: %r" % per_conn
    assert len(per_conn) <= 4, per_conn
    assert sm["connections_h2"] == len(per_conn), (sm, per_conn)
    assert sm["streams_h2"] == 40 and sm["streams_refused"] == 0 and sm["streams_reset"] == 0, sm
    assert sorted(d.paths()) == sorted("/" + p for p in pages)
    log = d.log_text()
    assert "send RST_STREAM" not in log and "send GOAWAY" not in log, "nghttpd refused a stream"


@pytest.mark.parametrize("window,expected", [(None, 256 * 1024), ("64k", 64 * 1024),
                                             ("1m", 1024 * 1024)], ids=["default", "64k", "1m"])
def test_27_07_http2_window(run_harvestd, pki, h2_faults, window, expected):
    s = h2_faults()
    url = s.url("/big?size=600000&title=Windowed")
    run = run_harvestd([url], *ca(pki), *(["--http2-window", window] if window else []))
    rec = only_record(run)
    assert_h2_ok(rec, "Windowed")
    assert rec["bytes"] == 600000
    (conn,) = s.snapshot()["connections"].values()
    # SETTINGS_INITIAL_WINDOW_SIZE (0x4): each stream's receive window.
    assert conn["settings"].get(4) == expected, conn["settings"]


# ---------------------------------------------------------------------------- stream resets

@pytest.mark.parametrize("path,error", [
    ("/rst/internal_error?when=before", "stream_reset_internal_error"),
    ("/rst/cancel?when=after", "stream_reset_cancel"),
    ("/rst/2?when=mid&size=20000", "stream_reset_internal_error"),
    ("/rst/protocol_error?when=before", "stream_reset_protocol_error"),
], ids=["before-head", "after-head", "mid-body", "protocol-error"])
def test_27_08_stream_reset(run_harvestd, pki, h2_faults, path, error):
    s = h2_faults()
    broken = s.url(path)
    bystanders = [s.url("/ok?title=Bystander%d&delay=0.3" % i) for i in range(3)]
    run = run_harvestd([broken] + bystanders, *ca(pki), "--per-host", "4")
    assert run.rc == 0
    recs = by_url(run.records)
    assert_failed(recs[broken], "download", "ConnectionReset", error)
    for i, url in enumerate(bystanders):
        assert_h2_ok(recs[url], "Bystander%d" % i)
    check_versions(run.records, "2")
    sm = h2_summary(run)
    assert sm["streams_reset"] == 1 and sm["retries"] == 0, sm
    assert sm.get("error_type.ConnectionReset") == 1, sm
    # A stream's reset leaves its connection to the others.
    assert len(s.snapshot()["connections"]) == 1 and sm["connections_h2"] == 1, sm


@pytest.mark.parametrize("path,title", [("/rst/internal_error?key=r&times=1&title=Again", "Again"),
                                        ("/calm?key=c&times=1&title=Calmer", "Calmer")],
                         ids=["internal-error", "enhance-your-calm"])
def test_27_09_reset_is_retried(run_harvestd, pki, h2_faults, path, title):
    s = h2_faults()
    url = s.url(path)
    run = run_harvestd([url], *ca(pki), "--retries", "1", "--retry-base", "50ms")
    rec = only_record(run)
    assert_h2_ok(rec, title)
    assert rec.get("attempts") == 2, rec
    sm = h2_summary(run)
    assert sm["retries"] == 1 and sm["streams_reset"] == 1, sm
    assert len(s.requests_to(urllib.parse.urlsplit(url).path)) == 2


def test_27_10_enhance_your_calm_fails_typed(run_harvestd, pki, h2_faults):
    s = h2_faults()
    run = run_harvestd([s.url("/calm")], *ca(pki))
    assert_failed(only_record(run), "download", "ConnectionReset", "stream_reset_enhance_your_calm")
    assert h2_summary(run)["streams_reset"] == 1


def test_27_11_refused_stream_is_resent_without_a_retry(run_harvestd, pki, h2_faults):
    s = h2_faults()
    url = s.url("/refuse?key=r&times=2&title=Accepted")
    run = run_harvestd([url], *ca(pki))
    assert_h2_ok(only_record(run), "Accepted")
    sm = h2_summary(run)
    assert sm["retries"] == 0, "a refused stream is no retry: %r" % sm
    assert sm["streams_refused"] == 2 and sm["streams_h2"] == 3, sm
    reqs = s.requests_to("/refuse")
    assert len(reqs) == 3, reqs
    assert len({r.conn for r in reqs}) == 3, "each resend on a new connection: %r" % reqs


def test_27_12_refused_five_times_fails(run_harvestd, pki, h2_faults):
    s = h2_faults()
    run = run_harvestd([s.url("/refuse?key=never")], *ca(pki))
    assert_failed(only_record(run), "download", "ConnectionReset", "stream_reset_refused_stream")
    # Five refusals, or the first and five resends.
    sent = len(s.requests_to("/refuse"))
    assert sent in (5, 6), sent
    sm = h2_summary(run)
    assert sm["streams_refused"] == sent and sm["retries"] == 0, sm


def test_27_13_goaway_in_flight(run_harvestd, pki, h2_faults):
    """GOAWAY with the last stream id in the middle of six streams in flight: the three at or
    below it are answered on that connection, the three above are sent again at once on a
    new one, none of it a retry."""
    s = h2_faults(goaway_budget=1)
    urls = [s.url("/goaway-midflight?n=6&title=Flight%d" % i) for i in range(6)]
    run = run_harvestd(urls, *ca(pki), "--per-host", "8")
    assert run.rc == 0
    recs = by_url(run.records)
    for i, url in enumerate(urls):
        assert_h2_ok(recs[url], "Flight%d" % i)
    snap = s.snapshot()
    ((first, last, code),) = snap["goaways_sent"]
    dropped = snap["goaway_dropped"]
    assert dropped, "no stream was above the GOAWAY's last stream id: %r" % snap["requests"]
    assert not snap["after_goaway"], "streams opened after the GOAWAY: %r" % snap["after_goaway"]
    for req in dropped:
        again = [r for r in snap["requests"] if r.target == req.target and r.conn != first]
        assert len(again) == 1, (req, snap["requests"])
    sm = h2_summary(run)
    assert sm["retries"] == 0 and sm["h2_goaways"] == 1, sm
    assert sm["streams_refused"] == len(dropped), (sm, dropped)
    assert sm["streams_h2"] == 6 + len(dropped), sm
    assert sm["connections_h2"] == 2, sm


def test_27_14_http_1_1_required(run_harvestd, pki, h2_faults):
    s = h2_faults()
    first = s.url("/http11-required?title=Downgraded")
    second = s.url("/ok?title=Afterwards")
    run = run_harvestd([first, second], *ca(pki), "--per-host", "1", "--concurrency", "1")
    assert run.rc == 0
    recs = by_url(run.records)
    assert_h2_ok(recs[first], "Downgraded", version="1.1")
    # The host is HTTP/1.1-only from then on.
    assert_h2_ok(recs[second], "Afterwards", version="1.1")
    snap = s.snapshot()
    h2_reqs = [r for r in snap["requests"] if r.protocol == "h2"]
    h1_reqs = [r for r in snap["requests"] if r.protocol == "http/1.1"]
    assert [r.path for r in h2_reqs] == ["/http11-required"], snap["requests"]
    assert sorted(r.path for r in h1_reqs) == ["/http11-required", "/ok"], snap["requests"]
    assert h2_summary(run)["connections_h2"] == 1


# ---------------------------------------------------------------------------- broken connections

@pytest.mark.parametrize("path,error", [
    ("/close?at=before", "connection_closed_before_response"),
    ("/close?at=headers", "connection_closed_in_headers"),
    ("/close?at=body&size=30000", "connection_closed_mid_body"),
    ("/goaway-error?code=2&size=30000", "goaway_internal_error"),
    ("/goaway-error?code=11&size=30000", "goaway_enhance_your_calm"),
], ids=["before-response", "in-headers", "mid-body", "goaway-internal-error", "goaway-calm"])
def test_27_15_connection_lost(run_harvestd, pki, h2_faults, path, error):
    s = h2_faults()
    run = run_harvestd([s.url(path)], *ca(pki))
    rec = only_record(run)
    assert_failed(rec, "download", "ConnectionReset", error)
    check_versions([rec], "2")
    assert h2_summary(run)["retries"] == 0


@pytest.mark.parametrize("path,error", [
    ("/bad-hpack", "h2_compression_error"),
    ("/oversized-frame", "h2_frame_size_error"),
    ("/window-overflow", "h2_flow_control_error"),
    ("/no-status", H2_ERROR),
], ids=["hpack", "frame-size", "flow-control", "no-status"])
def test_27_16_protocol_errors(run_harvestd, pki, h2_faults, path, error):
    """Connection errors nghttp2 finds are named after their HTTP/2 error code; a head without
    :status (nghttp2's HTTP messaging check, a stream error) by some h2_ name."""
    s = h2_faults()
    run = run_harvestd([s.url(path)], *ca(pki))
    rec = only_record(run)
    if isinstance(error, str):
        assert_failed(rec, "download", PROTOCOL, error)
    else:
        assert_failed(rec, "download", PROTOCOL)
        assert error.match(rec["error"]), rec
    assert run.summary.get("error_type." + PROTOCOL) == 1, run.summary


@pytest.mark.parametrize("query", ["n=100&size=4000", "n=100&size=1000&distinct=1"],
                         ids=["indexed", "literal"])
def test_27_17_header_bomb(run_harvestd, pki, h2_faults, query):
    """A head far beyond 64 KiB decoded: 100 copies of one 4000-byte field (a byte or two each
    on the wire, from the HPACK dynamic table), or 100 distinct 1000-byte fields."""
    s = h2_faults()
    run = run_harvestd([s.url("/header-bomb?" + query)], *ca(pki), timeout=30)
    rec = only_record(run)
    assert_failed(rec, "download", PROTOCOL)
    assert HEAD_TOO_BIG.match(rec["error"]), rec


def test_27_18_continuation_flood(run_harvestd, pki, h2_faults):
    s = h2_faults()
    good = s.url("/ok?title=Unharmed")
    run = run_harvestd([s.url("/continuation-flood?frames=5000&size=1000"), good], *ca(pki),
                       "--per-host", "1", timeout=30)
    assert run.rc == 0
    recs = by_url(run.records)
    flood = recs[s.url("/continuation-flood?frames=5000&size=1000")]
    assert_failed(flood, "download", PROTOCOL)
    assert HEAD_TOO_BIG.match(flood["error"]), flood
    assert_h2_ok(recs[good], "Unharmed")


@pytest.mark.parametrize("tls", [True, False], ids=["tls", "h2c"])
def test_27_19_server_never_sends_settings(run_harvestd, pki, h2_faults, tls):
    s = h2_faults(mode="no-settings", tls=tls)
    extra = ca(pki) if tls else ["--http2-prior-knowledge=yes"]
    run = run_harvestd([s.url("/ok?title=Never")], *extra, "--read-timeout", "1s",
                       "--total-timeout", "5s", timeout=30)
    rec = only_record(run)
    assert rec["status"] == "failed" and rec["stage"] == "download", rec
    assert rec["error_type"] in ("ReadTimeout", PROTOCOL), rec
    conns = s.snapshot()["connections"]
    assert conns and all(c["protocol"] == "h2" for c in conns.values()), conns
    assert conns[1]["bytes_received"] > 0, "the client preface never came"


def test_27_20_stalled_stream_times_out(run_harvestd, pki, h2_faults):
    s = h2_faults()
    run = run_harvestd([s.url("/stall")], *ca(pki), "--read-timeout", "1s",
                       "--total-timeout", "10s")
    rec = only_record(run)
    assert_failed(rec, "download", "ReadTimeout")
    check_versions([rec], "2")


def test_27_21_hundred_thousand_tiny_data_frames(run_harvestd, pki, h2_faults):
    s = h2_faults()
    url = s.url("/tiny-data?title=Tiny%20Frames&count=100000")
    run = run_harvestd([url], *ca(pki), "--read-timeout", "10s", "--total-timeout", "60s",
                       timeout=90)
    rec = only_record(run)
    assert_h2_ok(rec, "Tiny Frames")
    assert rec["bytes"] == 100000


# ---------------------------------------------------------------------------- backpressure

# Preloaded into harvestd for the backpressure test: gumbo_parse_with_options() (libgumbo, which
# every full parse calls) waits while HV_H2_HOLD_FILE exists, after appending "held" to
# HV_H2_HELD_FILE. With --parse-jobs 1 and --page-queue 1 the first page parsed holds the page
# queue full until the test removes the file; nothing else (the loop, the other threads) waits.
HOLD_SHIM_SOURCE = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

typedef void *(*parse_fn)(const void *, const char *, size_t);

void *gumbo_parse_with_options(const void *options, const char *buffer, size_t length)
{
    parse_fn real = (parse_fn)dlsym(RTLD_NEXT, "gumbo_parse_with_options");
    const char *hold = getenv("HV_H2_HOLD_FILE");
    if (real == NULL)
        abort();
    if (hold != NULL && hold[0] != '\0' && access(hold, F_OK) == 0) {
        const char *mark = getenv("HV_H2_HELD_FILE");
        if (mark != NULL && mark[0] != '\0') {
            int fd = open(mark, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
            if (fd >= 0) {
                ssize_t w = write(fd, "held\n", 5);
                (void)w;
                close(fd);
            }
        }
        struct timespec ts = {0, 5 * 1000 * 1000};
        while (access(hold, F_OK) == 0)
            nanosleep(&ts, NULL);
    }
    return real(options, buffer, length);
}
"""

_hold_shim = None


def hold_shim():
    """Path of the compiled HOLD_SHIM_SOURCE; the test is skipped without a C compiler."""
    global _hold_shim
    if _hold_shim is None:
        tmp = tempfile.mkdtemp(prefix="harvestd-h2hold-")
        atexit.register(shutil.rmtree, tmp, True)
        src, lib = os.path.join(tmp, "hold.c"), os.path.join(tmp, "hold.so")
        with open(src, "w") as f:
            f.write(HOLD_SHIM_SOURCE)
        cc = os.environ.get("CC") or "cc"
        try:
            done = subprocess.run([cc, "-O2", "-shared", "-fPIC", "-o", lib, src, "-ldl"],
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=60)
            _hold_shim = (lib, "") if done.returncode == 0 else \
                ("", "cannot build the hold shim:\n" + done.stdout.decode(errors="replace"))
        except OSError as e:
            _hold_shim = ("", "no C compiler (%s) for the hold shim: %s" % (cc, e))
    if not _hold_shim[0]:
        pytest.skip(_hold_shim[1])
    return _hold_shim[0]


def harvestd_pid(proc):
    """The pid of harvestd itself: the launcher's child (the launcher is proc.pid)."""
    if not launcher():
        return proc.pid
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % entry) as f:
                stat = f.read()
        except OSError:
            continue
        if int(stat.rpartition(")")[2].split()[1]) == proc.pid:
            return int(entry)
    return 0


HOLD_S = 8
PING_INTERVAL = 0.25


def test_27_22_backpressure_closes_stream_windows(harvestd, pki, h2_faults, tmp_path):
    """Sixteen 3 MB pages on sixteen streams of one connection, the page queue held full (the
    parser waits in the shim) for HOLD_S seconds. While held: no WINDOW_UPDATE lets the server
    send more than streams x window, every PING the server sends is answered, and harvestd's
    peak RSS stays under a baseline run's plus two whole pages, a third for the stream under
    way and twice streams x window. The server sends each stream 64 KiB at first and the rest
    to the lowest stream first (h2servers: prime), so what a missing hold would let in is the
    other pages whole. Then the hold ends and every page is ok."""
    shim = hold_shim()
    streams, size, window = 16, 3000000, 256 * 1024
    s = h2_faults(ping_interval=PING_INTERVAL, prime=64 * 1024)
    args = ca(pki) + ["--per-host", str(streams), "--concurrency", str(streams),
                      "--parse-jobs", "1", "--page-queue", "1", "--title-fast-path=no",
                      "--max-bytes", "4m", "--http2-window", "256k",
                      "--read-timeout", "60s", "--total-timeout", "90s"]
    base = harvestd.run([s.url("/ok?title=Base%d&size=3000" % i) for i in range(streams)], *args)
    assert base.rc == 0 and all(r["status"] == "ok" for r in base.records), base.records
    print("baseline peak RSS %d KiB" % base.maxrss_kib)

    hold, held = tmp_path / "hold", tmp_path / "held"
    hold.write_text("")
    libs = [lib for lib in (sanitizer_runtime(), shim) if lib]
    harvestd.env.update(LD_PRELOAD=":".join(libs), HV_H2_HOLD_FILE=str(hold),
                        HV_H2_HELD_FILE=str(held))
    urls = [s.url("/big?size=%d&title=Heavy%d" % (size, i)) for i in range(streams)]
    proc = harvestd.start(urls, *args)
    try:
        stall = {}

        def holding():
            # The parser waits, all the streams are open and the server has been unable to
            # send for half a second (not just waiting for a WINDOW_UPDATE under way).
            snap = s.snapshot()
            bigs = [r for r in snap["requests"] if r.path == "/big"]
            conns = {r.conn for r in bigs}
            if not (held.exists() and len(bigs) == streams and
                    all(snap["stalled"].get(c) for c in conns)):
                stall.clear()
                return False
            if stall.get("sent") != snap["data_sent"]:
                stall.update(sent=snap["data_sent"], since=time.monotonic())
            return time.monotonic() - stall["since"] >= 0.5
        proc.poll_until(holding, 30, "the parser held, 16 streams open, the server stalled")
        snap = s.snapshot()
        conns = {r.conn for r in snap["requests"] if r.path == "/big"}
        sent0, t0 = snap["data_sent"], time.monotonic()
        time.sleep(HOLD_S)
        assert proc.popen.poll() is None, "harvestd exited while held"
        t1 = time.monotonic()
        pid = harvestd_pid(proc)
        hwm_kib = vm_kib(pid, "VmHWM") if pid else 0
        sent = [p for p in s.snapshot()["pings_sent"] if p[0] in conns and t0 <= p[2] <= t1]
        assert len(sent) >= HOLD_S / PING_INTERVAL / 2, "the server sent too few PINGs: %r" % sent

        def answered():
            acked = {(c, data) for c, data, _ in s.snapshot()["ping_acks"]}
            return all((c, data) in acked for c, data, _ in sent)
        proc.poll_until(answered, 10, "ACKs of the %d PINGs sent while held" % len(sent))
        sent1 = s.snapshot()["data_sent"]
        print("held %.1fs: %d bytes sent before, %d during; %d PINGs answered; VmHWM %d KiB"
              % (t1 - t0, sent0, sent1 - sent0, len(sent), hwm_kib))
        assert sent1 - sent0 <= streams * window, \
            "the server sent %d bytes while the page queue was held" % (sent1 - sent0)
    finally:
        if hold.exists():
            hold.unlink()
    run = proc.wait(timeout=120)
    assert run.rc == 0
    recs = by_url(run.records)
    assert set(recs) == set(urls)
    for i, url in enumerate(urls):
        assert_h2_ok(recs[url], "Heavy%d" % i)
        assert recs[url]["bytes"] == size
    sm = h2_summary(run)
    assert sm["connections_h2"] == 1 and sm["streams_h2"] == streams, sm
    assert sm["read_pauses"] > 0, sm
    print("peak RSS %d KiB (baseline %d KiB)" % (run.maxrss_kib, base.maxrss_kib))
    if SANITIZER:
        pytest.skip("memory bounds are not meaningful under %s" % SANITIZER)
    assert hwm_kib > 0, "could not read harvestd's VmHWM"
    bound_kib = base.maxrss_kib + (3 * size + 2 * streams * window) // 1024 + 8 * 1024
    assert hwm_kib <= bound_kib, "peak RSS %d KiB while held, bound %d KiB" % (hwm_kib, bound_kib)


# ---------------------------------------------------------------------------- h2c

def test_27_23_prior_knowledge(run_harvestd, h2_faults):
    s = h2_faults(tls=False)
    url = s.url("/ok?title=Cleartext", host="127.0.0.1")
    run = run_harvestd([url], "--http2-prior-knowledge=yes")
    assert_h2_ok(only_record(run), "Cleartext")
    sm = h2_summary(run)
    assert sm["connections_h2"] == 1 and sm["streams_h2"] == 1, sm
    run = run_harvestd([url], "--http2-prior-knowledge=no")
    assert_h2_ok(only_record(run), "Cleartext", version="1.1")
    assert h2_summary(run, h2=False)["connections_h2"] == 0
    assert [c["protocol"] for c in s.snapshot()["connections"].values()] == ["h2", "http/1.1"]
    run = run_harvestd([url])  # the default: no
    assert_h2_ok(only_record(run), "Cleartext", version="1.1")


def test_27_24_prior_knowledge_per_host(run_harvestd, h2_faults, tmp_path):
    s = h2_faults(tls=False)
    conf = str(tmp_path / "h2c.conf")
    write_config(conf, {"http2_prior_knowledge": "no"})
    with open(conf, "a") as f:
        f.write('\n[host "127.0.0.1"]\nhttp2_prior_knowledge = yes\n')
    by_ip = s.url("/ok?title=By%20Address", host="127.0.0.1")
    by_name = s.url("/ok?title=By%20Name", host="localhost")
    run = run_harvestd([by_ip, by_name], "-c", conf)
    recs = by_url(run.records)
    assert_h2_ok(recs[by_ip], "By Address")
    assert_h2_ok(recs[by_name], "By Name", version="1.1")
    by_proto = {r.path + "?" + r.query["title"]: r.protocol for r in s.snapshot()["requests"]}
    assert by_proto == {"/ok?By Address": "h2", "/ok?By Name": "http/1.1"}, by_proto


# ---------------------------------------------------------------------------- nginx

def test_27_25_nginx_content_over_h2(run_harvestd, pki, nginx_h2):
    n = nginx_h2
    urls = {
        n.url("/index.html"): ("ok", "Nginx Index"),
        n.url("/pages/a.html"): ("ok", "Page A"),
        n.url("/gzip.html"): ("ok", "Zipped Over H2"),
        n.url("/moved"): ("ok", "Page B"),
        n.url("/missing.html"): ("HttpStatus", "http_404"),
        n.url("/big.html"): ("ok", "Big Page"),
    }
    run = run_harvestd(list(urls), *ca(pki), "--per-host", "4")
    assert run.rc == 0
    recs = by_url(run.records)
    for url, (kind, what) in urls.items():
        if kind == "ok":
            assert_h2_ok(recs[url], what)
        else:
            assert_failed(recs[url], "download", kind, what)
            assert recs[url]["http_status"] == 404
    check_versions(run.records, "2")
    assert recs[n.url("/gzip.html")]["bytes"] == len(html_page(*NGINX_PAGES["/gzip.html"]))
    assert recs[n.url("/big.html")]["bytes"] == NGINX_BIG_SIZE
    moved = recs[n.url("/moved")]
    assert moved["url"] == n.url("/pages/b.html") and moved["redirects"] == 1, moved
    log = n.access()
    assert {a.protocol for a in log} == {"HTTP/2.0"}, log
    assert len({a.connection for a in log}) == 1, "one connection for the host: %r" % log
    enc = {a.uri: a.encoding for a in log}
    assert enc["/gzip.html"] == "gzip" and enc["/big.html"] == "gzip", log
    sm = h2_summary(run)
    assert sm["connections_h2"] == 1 and sm["streams_h2"] == len(log) == 7, (sm, log)


def test_27_26_nginx_page_too_large(run_harvestd, pki, nginx_h2):
    run = run_harvestd([nginx_h2.url("/big.html")], *ca(pki), "--max-bytes", "256k")
    rec = only_record(run)
    assert_failed(rec, "download", "PageTooLarge", "response_exceeds_256_kib")
    check_versions([rec], "2")


def test_27_27_nginx_keepalive_requests_goaway(run_harvestd, pki, nginx_h2):
    """keepalive_requests 2: nginx sends GOAWAY after the second request of each connection;
    the streams it did not take are sent again on new connections, none of it a retry."""
    n = nginx_h2
    urls = [n.url("/pages/a.html?i=%d" % i, goaway=True) for i in range(10)]
    run = run_harvestd(urls, *ca(pki), "--per-host", "4")
    assert run.rc == 0
    recs = by_url(run.records)
    for url in urls:
        assert_h2_ok(recs[url], "Page A")
    sm = h2_summary(run)
    assert sm["retries"] == 0, sm
    assert sm["h2_goaways"] >= 1, sm
    log = [a for a in n.access() if a.port == n.goaway_port]
    assert {a.protocol for a in log} == {"HTTP/2.0"}, log
    # Every URL answered once: a stream nginx processed is never sent again.
    assert sorted(a.uri for a in log) == sorted("/pages/a.html?i=%d" % i for i in range(10)), log
    per_conn = {}
    for a in log:
        per_conn[a.connection] = per_conn.get(a.connection, 0) + 1
    assert max(per_conn.values()) <= 2 and len(per_conn) >= 5, per_conn
    assert sm["connections_h2"] >= len(per_conn), (sm, per_conn)


@pytest.mark.parametrize("how", ["flag", "config"])
def test_27_28_http2_off(run_harvestd, pki, nginx_h2, tmp_path, how):
    n = nginx_h2
    urls = [n.url("/index.html"), n.url("/pages/a.html")]
    if how == "flag":
        extra = ["--http2", "off"]
    else:
        conf = str(tmp_path / "off.conf")
        write_config(conf, {"http2": "off"})
        extra = ["-c", conf]
    run = run_harvestd(urls, *ca(pki), *extra)
    recs = by_url(run.records)
    assert_h2_ok(recs[urls[0]], "Nginx Index", version="1.1")
    assert_h2_ok(recs[urls[1]], "Page A", version="1.1")
    assert {a.protocol for a in n.access()} == {"HTTP/1.1"}
    sm = h2_summary(run, h2=False)
    assert sm["connections_h2"] == 0 and sm["streams_h2"] == 0, sm


# ---------------------------------------------------------------------------- usage

@pytest.mark.parametrize("arg", ["--http2=maybe", "--http2=on", "--http2-prior-knowledge=perhaps",
                                 "--http2-window=lots", "--http2-window=0"],
                         ids=["http2", "http2-on", "prior-knowledge", "window", "window-0"])
def test_27_29_bad_values_exit_2(harvestd, tmp_path, arg):
    out = tmp_path / "never.jsonl"
    run = harvestd.run(["http://127.0.0.1:9/never"], arg, out=str(out), parse=False, fast=False)
    assert run.rc == 2, "expected a usage error for %r" % arg
    name = arg.split("=")[0].lstrip("-").replace("-", "_")
    assert name in run.stderr.replace("-", "_"), run.stderr
    assert not out.exists() or out.read_bytes() == b""


def test_27_30_through_a_proxy_tunnel(run_harvestd, pki, h2_faults, tinyproxy):
    """https through an HTTP proxy: TLS and HTTP/2 inside one CONNECT tunnel, the streams
    shared as without it; with proxy_connections = 1 they take streams on the one tunnel
    instead of waiting for the proxy's room."""
    s = h2_faults()
    proxy = tinyproxy()
    urls = [s.url("/ok?title=Tunnel%d&delay=0.2" % i) for i in range(8)]
    run = run_harvestd(urls, *ca(pki), "--per-host", "8", "--proxy", proxy.url(),
                       "--proxy-connections", "1")
    assert run.rc == 0
    recs = by_url(run.records)
    for i, url in enumerate(urls):
        assert_h2_ok(recs[url], "Tunnel%d" % i)
        assert recs[url]["proxy"] == proxy.url(), recs[url]
    sm = h2_summary(run)
    assert sm["connections_opened"] == 1 and sm["connections_h2"] == 1, sm
    connects = [l for l in proxy.requests() if l.startswith("CONNECT ")]
    assert len(connects) == 1, connects
    (conn,) = s.snapshot()["connections"].values()
    assert conn["streams"] == 8 and conn["max_open"] == 8, conn


def test_27_31_recrawl_validators_over_h2(run_harvestd, pki, nginx_h2, tmp_path):
    """Re-crawling over HTTP/2: the second run sends nginx's validators as if-none-match /
    if-modified-since fields and writes its 304s as complete not_modified records."""
    n = nginx_h2
    urls = [n.url("/index.html"), n.url("/pages/a.html")]
    state = ["--recrawl", "conditional", "--state-dir", str(tmp_path / "state")]
    first = run_harvestd(urls, *ca(pki), *state)
    assert first.rc == 0 and all(r["status"] == "ok" for r in first.records), first.records
    check_versions(first.records, "2")
    second = run_harvestd(urls, *ca(pki), *state)
    assert second.rc == 0, second.stderr
    a, b = by_url(first.records), by_url(second.records)
    for u in urls:
        r = b[u]
        assert r["http_status"] == 304 and r.get("not_modified") is True, r
        assert r["http_version"] == "2" and r["title"] == a[u]["title"], (r, a[u])
    assert {a.status for a in n.access()[-2:]} == {304}, n.access()
