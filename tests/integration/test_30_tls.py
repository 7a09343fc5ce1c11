"""HTTPS: records over TLS, redirects across schemes, certificate verification (untrusted,
expired, not yet valid, wrong name, IP literals), handshake failures, keep-alive and session
resumption, limits and backpressure over TLS, --insecure and the default trust store.

The servers are tls.TlsOrigin (the scripted origin behind TLS, certificates from the session's
test PKI) and tls.RawTlsPeer (reads the ClientHello, then breaks the handshake). The test CA is
passed with --ca-file; "localhost" must resolve to 127.0.0.1."""

import signal
import time
import urllib.parse

import pytest

from harness import (MIB, SLOWDOWN, assert_failed, assert_key_order, assert_ok, by_url,
                     check_single_ok_record)
from origin import html_page

CERT_ERRORS = ("certificate_untrusted", "certificate_expired", "certificate_not_yet_valid",
               "certificate_hostname_mismatch", "certificate_invalid")


def ca_args(pki):
    return ["--ca-file", pki.ca_file]


def assert_cert_failure(rec, error):
    assert error in CERT_ERRORS, error
    assert_failed(rec, "download", "CertificateError", error)
    assert "http_status" not in rec, rec


def assert_tls_failure(rec):
    assert_failed(rec, "download", "TlsError")
    assert rec["error"].startswith("tls_"), rec
    assert "http_status" not in rec, rec


# ---------------------------------------------------------------------------- records


def test_30_01_ok_record_fields_over_https(run_harvestd, pki, tls_origin):
    url = tls_origin.url("/page?title=Hello%20World&size=5000")
    before = time.time()
    run = run_harvestd([url], *ca_args(pki))
    after = time.time()
    assert run.rc == 0
    assert len(run.records) == 1
    check_single_ok_record(run.records[0], url, "Hello World", 5000, before, after)
    s = run.summary
    assert s["ok"] == 1 and s["failed"] == 0 and s["records"] == 1
    assert s["connections_opened"] == 1
    assert s["tls_handshakes"] == 1 and s["tls_resumed"] == 0, s
    snap = tls_origin.snapshot()
    assert snap["tcp_accepted"] == 1 and snap["tls_full"] == 1 and snap["tls_failures"] == 0
    (req,) = snap["requests"]
    assert req.target == "/page?title=Hello%20World&size=5000"
    assert req.header_all("host") == ["localhost:%d" % tls_origin.port]


def test_30_02_client_hello_offers_tls12_alpn_and_sni(run_harvestd, pki, tls_origin):
    # What the server negotiated: TLS 1.2 (the newest the client offers, though the origin
    # accepts 1.3), ALPN http/1.1, the host name as SNI.
    run = run_harvestd([tls_origin.url("/page?title=hello")], *ca_args(pki))
    assert_ok(run.records[0], "hello")
    (session,) = tls_origin.snapshot()["tls_sessions"]
    assert session.version == "TLSv1.2", session
    assert session.alpn == "http/1.1", session
    assert session.sni == "localhost", session


def test_30_03_client_hello_on_the_wire(run_harvestd, pki, raw_tls_peers):
    peer = raw_tls_peers("close")
    by_name, by_ip = peer.url("/a", host="localhost"), peer.url("/b", host="127.0.0.1")
    run = run_harvestd([by_name], *ca_args(pki))
    assert run.records[0]["status"] == "failed"
    run = run_harvestd([by_ip], *ca_args(pki))
    assert run.records[0]["status"] == "failed"
    run = run_harvestd([by_name], *ca_args(pki), "--http2", "off")
    assert run.records[0]["status"] == "failed"
    assert not peer.errors, peer.errors
    assert len(peer.hellos) == 3, "no ClientHello arrived"
    names = {h.sni for h in peer.hellos}
    assert names == {"localhost", None}, "SNI for a host name, none for an IP literal: %r" % names
    for hello in peer.hellos:
        assert hello.max_version() == 0x0303, "the client offers more than TLS 1.2: %r" % (hello,)
    # HTTP/2 first (http2 = auto), with only the suites RFC 9113 9.2.2 leaves it: ECDHE or
    # DHE with an AEAD (GCM, ChaCha20-Poly1305); and HTTP/1.1 alone with http2 = off.
    aead = {0xC02B, 0xC02F, 0xC02C, 0xC030, 0xCCA8, 0xCCA9, 0xCCAA, 0x009E, 0x009F}
    scsv = 0x00FF
    for hello in peer.hellos[:2]:
        assert hello.alpn == ("h2", "http/1.1"), hello
        suites = set(hello.cipher_suites) - {scsv}
        assert suites and suites <= aead, hello
    assert peer.hellos[2].alpn == ("http/1.1",), peer.hellos[2]
    assert set(peer.hellos[2].cipher_suites) - aead, "http2 = off offers every suite"


def test_30_04_encodings_and_redirects_over_https(run_harvestd, pki, tls_origin):
    urls = {
        tls_origin.url("/gzip?title=Zipped&size=50000"): ("Zipped", 50000),
        tls_origin.url("/chunked?title=Chunky&size=20000&chunk=777"): ("Chunky", 20000),
        tls_origin.url("/big?size=300000&cl=0&title=Closing"): ("Closing", 300000),
        tls_origin.url("/drip?interval=0.02&count=20&title=Dripping"): ("Dripping", None),
        tls_origin.url("/redirect/3"): ("final", None),
        tls_origin.url("/status/404"): ("HttpStatus", "http_404"),
        tls_origin.url("/huge-header?kib=70"): ("ProtocolError", None),
    }
    run = run_harvestd(list(urls), *ca_args(pki))
    assert run.rc == 0
    recs = by_url(run.records)
    for url, (title, size) in urls.items():
        if title in ("HttpStatus", "ProtocolError"):
            assert_failed(recs[url], "download", title, size)
            continue
        assert_ok(recs[url], title)
        if size is not None:
            assert recs[url]["bytes"] == size
    chain = recs[tls_origin.url("/redirect/3")]
    assert chain["redirects"] == 3 and chain["url"] == tls_origin.url("/redirect/0")


def test_30_05_redirect_http_to_https(run_harvestd, pki, fresh_origin, tls_origin):
    target = tls_origin.url("/page?title=secure")
    url = fresh_origin.url("/redir?" + urllib.parse.urlencode({"code": 301, "to": target}))
    run = run_harvestd([url], *ca_args(pki))
    rec = run.records[0]
    assert_ok(rec, "secure")
    assert rec["requested_url"] == url
    assert rec["url"] == target
    assert rec["redirects"] == 1
    assert [r.path for r in fresh_origin.snapshot()["requests"]] == ["/redir"]
    (req,) = tls_origin.requests_to("/page")
    assert req.header("host") == "localhost:%d" % tls_origin.port
    assert run.summary["tls_handshakes"] == 1


def test_30_06_redirect_https_to_http(run_harvestd, pki, fresh_origin, tls_origin):
    target = fresh_origin.url("/page?title=plain")
    url = tls_origin.url("/redir?" + urllib.parse.urlencode({"code": 302, "to": target}))
    run = run_harvestd([url], *ca_args(pki))
    rec = run.records[0]
    assert_ok(rec, "plain")
    assert rec["requested_url"] == url
    assert rec["url"] == target
    assert rec["redirects"] == 1
    assert [r.path for r in tls_origin.snapshot()["requests"]] == ["/redir"]
    assert [r.path for r in fresh_origin.snapshot()["requests"]] == ["/page"]


# ---------------------------------------------------------------------------- verification

BAD_CERTS = [
    ("self-signed", "certificate_untrusted"),
    ("expired", "certificate_expired"),
    ("not-yet-valid", "certificate_not_yet_valid"),
    ("wrong-name", "certificate_hostname_mismatch"),
]


@pytest.mark.parametrize("kind,error", BAD_CERTS, ids=[c[0] for c in BAD_CERTS])
def test_30_07_bad_certificate(run_harvestd, pki, tls_origins, kind, error):
    o = tls_origins(kind)
    url = o.url("/page?title=never")  # https://localhost:PORT/...
    run = run_harvestd([url], *ca_args(pki))
    assert run.rc == 0
    rec = run.records[0]
    assert_cert_failure(rec, error)
    assert_key_order(rec)
    assert run.summary.get("error_type.CertificateError") == 1
    assert o.requests == [], "a request was sent over an unverified connection"


def test_30_08_ip_literal_matches_ip_san(run_harvestd, pki, tls_origins):
    o = tls_origins("localhost", host="127.0.0.1")
    url = o.url("/page?title=by-ip")
    assert url.startswith("https://127.0.0.1:")
    run = run_harvestd([url], *ca_args(pki))
    rec = run.records[0]
    assert_ok(rec, "by-ip")
    assert rec["url"] == url
    snap = o.snapshot()
    (session,) = snap["tls_sessions"]
    assert session.sni is None, "SNI must not carry an IP literal: %r" % (session,)
    assert snap["requests"][0].header("host") == "127.0.0.1:%d" % o.port


@pytest.mark.parametrize("kind", ["localhost-noip", "wrong-name"])
def test_30_09_ip_literal_without_ip_san(run_harvestd, pki, tls_origins, kind):
    # "localhost-noip" names localhost, which resolves to 127.0.0.1: only an IP SAN may match.
    o = tls_origins(kind, host="127.0.0.1")
    run = run_harvestd([o.url("/page?title=never")], *ca_args(pki))
    assert_cert_failure(run.records[0], "certificate_hostname_mismatch")
    assert o.requests == []


@pytest.mark.parametrize("kind", ["self-signed", "expired", "wrong-name"])
def test_30_10_insecure_accepts_any_certificate(run_harvestd, pki, tls_origins, kind):
    o = tls_origins(kind)
    url = o.url("/page?title=unchecked")
    run = run_harvestd([url], "--insecure")
    assert run.rc == 0
    assert_ok(run.records[0], "unchecked")
    warnings = [line for line in run.stderr.splitlines()
                if "insecure" in line.lower() and not line.startswith("harvestd: summary")]
    assert warnings, "--insecure printed no warning on stderr"


def test_30_11_default_trust_store_does_not_know_the_test_ca(run_harvestd, pki, tls_origin):
    # Without --ca-file the system bundle is used, and the test CA is not in it.
    run = run_harvestd([tls_origin.url("/page?title=never")])
    assert_cert_failure(run.records[0], "certificate_untrusted")
    assert tls_origin.requests == []


def test_30_12_ca_file_is_a_bundle(run_harvestd, pki, tls_origin, tmp_path):
    # Every certificate of the --ca-file bundle is trusted, and only those.
    other = open(pki.cert("self-signed")[0]).read()
    bundle, alone = tmp_path / "bundle.pem", tmp_path / "other.pem"
    bundle.write_text(other + open(pki.ca_file).read())
    alone.write_text(other)
    url = tls_origin.url("/page?title=bundled")
    run = run_harvestd([url], "--ca-file", str(bundle))
    assert_ok(run.records[0], "bundled")
    run = run_harvestd([url], "--ca-file", str(alone))
    assert_cert_failure(run.records[0], "certificate_untrusted")


def test_30_13_unusable_ca_file_is_a_usage_error(harvestd, tmp_path):
    garbage = tmp_path / "garbage.pem"
    garbage.write_text("this is no certificate\n")
    for path in (str(tmp_path / "missing.pem"), str(garbage)):
        out = tmp_path / ("out-%s.jsonl" % len(path))
        run = harvestd.run(["https://localhost:1/"], "--ca-file", path, out=str(out), parse=False)
        assert run.rc == 2, "exit status %d for --ca-file %s" % (run.rc, path)
        assert path in run.stderr, run.stderr
        assert not out.exists() or out.read_bytes() == b""


def test_30_14_session_is_not_resumed_for_another_host_name(run_harvestd, pki, tls_origins):
    # One server, two names for it: "localhost" verifies, "127.0.0.1" does not (no IP SAN). A
    # session made for the first name must not let the second skip verification.
    o = tls_origins("localhost-noip")
    by_name = o.url("/page?title=named", host="localhost")
    by_ip = [o.url("/page?title=ip%d" % i, host="127.0.0.1") for i in range(3)]
    run = run_harvestd([by_name] + by_ip, *ca_args(pki), "--concurrency", "1")
    recs = by_url(run.records)
    assert_ok(recs[by_name], "named")
    for url in by_ip:
        assert_cert_failure(recs[url], "certificate_hostname_mismatch")
    assert [r.query["title"] for r in o.snapshot()["requests"]] == ["named"]


# ---------------------------------------------------------------------------- handshake failures


@pytest.mark.parametrize("mode", ["close", "garbage", "alert"])
def test_30_15_handshake_failure_is_a_tls_error(run_harvestd, pki, raw_tls_peers, mode):
    peer = raw_tls_peers(mode)
    url = peer.url("/page?title=never")
    run = run_harvestd([url], *ca_args(pki))
    assert run.rc == 0
    assert_tls_failure(run.records[0])
    assert run.summary.get("error_type.TlsError") == 1
    assert 1 <= peer.tcp_accepted <= 2, peer.tcp_accepted
    assert run.elapsed < 5 * SLOWDOWN


def test_30_16_reset_during_handshake(run_harvestd, pki, raw_tls_peers):
    # A reset in the handshake: a TLS failure (or a reset connection), never a hang.
    peer = raw_tls_peers("reset")
    run = run_harvestd([peer.url("/")], *ca_args(pki))
    rec = run.records[0]
    assert rec["status"] == "failed" and rec["stage"] == "download", rec
    assert rec["error_type"] in ("TlsError", "ConnectionReset"), rec
    assert run.elapsed < 5 * SLOWDOWN


def test_30_17_silent_server_during_handshake(run_harvestd, pki, raw_tls_peers):
    # The server takes the ClientHello and never answers: the run must not wait for it longer
    # than its timeouts allow.
    peer = raw_tls_peers("silent")
    run = run_harvestd([peer.url("/")], *ca_args(pki), "--read-timeout", "1s",
                       "--connect-timeout", "1s", "--total-timeout", "10s")
    rec = run.records[0]
    assert rec["status"] == "failed" and rec["stage"] == "download", rec
    assert rec["error_type"] in ("ReadTimeout", "ConnectTimeout", "TlsError"), rec
    assert rec["elapsed_ms"] <= 2500 * SLOWDOWN, rec
    assert len(peer.hellos) == 1


def test_30_18_bystanders_survive_tls_failures(run_harvestd, pki, tls_origin, tls_origins,
                                               raw_tls_peers):
    expired = tls_origins("expired").url("/page?title=never")
    broken = raw_tls_peers("close").url("/page?title=never")
    fine = [tls_origin.url("/page?title=fine%d&size=20000" % i) for i in range(6)]
    run = run_harvestd([expired, broken] + fine, *ca_args(pki))
    assert run.rc == 0
    recs = by_url(run.records)
    assert_cert_failure(recs[expired], "certificate_expired")
    assert_tls_failure(recs[broken])
    for i, url in enumerate(fine):
        assert_ok(recs[url], "fine%d" % i)


# ---------------------------------------------------------------------------- connections


def test_30_19_keep_alive_reuses_one_tls_connection(run_harvestd, pki, tls_origin):
    urls = [tls_origin.url("/page?title=ka%d&size=%d" % (i, 1000 + 997 * i)) for i in range(20)]
    run = run_harvestd(urls, *ca_args(pki), "--per-host", "1")
    assert run.rc == 0
    recs = by_url(run.records)
    for i, url in enumerate(urls):
        assert_ok(recs[url], "ka%d" % i)
        assert recs[url]["bytes"] == 1000 + 997 * i
    snap = tls_origin.snapshot()
    assert snap["requests_served"] == 20
    assert snap["tcp_accepted"] == 1, "20 pages with --per-host 1 should share one connection"
    assert snap["tls_full"] == 1 and snap["tls_resumed"] == 0
    s = run.summary
    assert s["connections_opened"] == 1 and s["connections_reused"] == 19, s
    assert s["tls_handshakes"] == 1 and s["tls_resumed"] == 0, s


def test_30_20_session_resumption(run_harvestd, pki, tls_origin):
    # Every page closes its connection, so each needs a new one: after the first full
    # handshakes, the client resumes the session it got.
    urls = [tls_origin.url("/page?close=1&title=r%d" % i) for i in range(40)]
    run = run_harvestd(urls, *ca_args(pki), "--per-host", "4")
    assert run.rc == 0
    recs = by_url(run.records)
    for i, url in enumerate(urls):
        assert_ok(recs[url], "r%d" % i)
    snap = tls_origin.snapshot()
    s = run.summary
    print("server: tcp %d, full %d, resumed %d; client: %r" % (
        snap["tcp_accepted"], snap["tls_full"], snap["tls_resumed"],
        {k: v for k, v in s.items() if k.startswith(("tls_", "connections_"))}))
    assert snap["stale_drops"] == 0, "a connection was reused after Connection: close"
    assert snap["tls_failures"] == 0, snap["tls_errors"]
    assert snap["tcp_accepted"] == 40
    assert snap["tls_resumed"] > 0, "the server resumed no session"
    assert s["tls_resumed"] > 0, s
    # Client and server agree on every handshake.
    assert s["tls_handshakes"] == snap["tls_full"], (s, snap["tls_full"])
    assert s["tls_resumed"] == snap["tls_resumed"], (s, snap["tls_resumed"])
    assert s["connections_opened"] == s["tls_handshakes"] + s["tls_resumed"] == 40, s
    # At most one full handshake per connection that started before a session existed.
    assert snap["tls_full"] <= 4, snap["tls_full"]


@pytest.mark.parametrize("path", ["/reset-mid-body", "/close-mid-body", "/chunked-truncated"],
                         ids=["reset", "close", "chunked-close"])
def test_30_21_connection_lost_mid_body(run_harvestd, pki, tls_origin, path):
    broken = tls_origin.url(path)
    fine = [tls_origin.url("/page?title=bystander%d&size=20000" % i) for i in range(4)]
    run = run_harvestd([broken] + fine, *ca_args(pki), "--per-host", "2")
    assert run.rc == 0
    recs = by_url(run.records)
    assert_failed(recs[broken], "download", "ConnectionReset")
    for i, url in enumerate(fine):
        assert_ok(recs[url], "bystander%d" % i)


@pytest.mark.parametrize("delay", ["0", "0.3"], ids=["closed-at-once", "closed-later"])
def test_30_22_stale_tls_connection_is_retried(run_harvestd, pki, tls_origin, delay):
    urls = []
    for i in range(6):
        urls.append(tls_origin.url("/close-after-response?delay=%s&title=c%d" % (delay, i)))
        urls.append(tls_origin.url("/page?title=p%d" % i))
    run = run_harvestd(urls, *ca_args(pki), "--per-host", "1", "--concurrency", "1")
    assert run.rc == 0
    recs = by_url(run.records)
    for i in range(6):
        assert_ok(recs[urls[2 * i]], "c%d" % i)
        assert_ok(recs[urls[2 * i + 1]], "p%d" % i)
    snap = tls_origin.snapshot()
    assert snap["tcp_accepted"] >= 7, snap["tcp_accepted"]
    assert len(snap["requests"]) == 12 + snap["stale_drops"]


# Endpoint -> (status, error_type) expected under default limits.
MIXED = [
    ("/page?title=T&size=4000", ("ok", None)),
    ("/gzip?title=T&size=20000", ("ok", None)),
    ("/chunked?title=T&size=3000&chunk=100", ("ok", None)),
    ("/big?size=50000&cl=0&title=T", ("ok", None)),
    ("/redirect/2", ("ok", None)),
    ("/page?close=1&title=T", ("ok", None)),
    ("/close-after-response?delay=0&title=T", ("ok", None)),
    ("/status/404", ("failed", "HttpStatus")),
    ("/notitle", ("failed", "MissingTitle")),
    ("/reset-mid-body", ("failed", "ConnectionReset")),
    ("/close-mid-body", ("failed", "ConnectionReset")),
    ("/huge-header?kib=70", ("failed", "ProtocolError")),
]


def test_30_23_mixed_load_over_https(run_harvestd, pki, tls_origin, tls_origins):
    expired = tls_origins("expired")
    urls, expected = [], {}
    for i in range(20):
        for path, outcome in MIXED:
            sep = "&" if "?" in path else "?"
            url = tls_origin.url("%s%sn=%d" % (path, sep, i))
            urls.append(url)
            expected[url] = outcome
        url = expired.url("/page?title=T&n=%d" % i)
        urls.append(url)
        expected[url] = ("failed", "CertificateError")
    run = run_harvestd(urls, *ca_args(pki), "--concurrency", "64", "--per-host", "16", timeout=120)
    assert run.rc == 0
    recs = by_url(run.records)
    assert set(recs) == set(urls)
    wrong = [(u, recs[u]) for u in urls
             if (recs[u]["status"], recs[u].get("error_type")) != expected[u]]
    assert not wrong, "%d unexpected records, e.g. %r" % (len(wrong), wrong[:3])
    snap = tls_origin.snapshot()
    assert snap["max_inflight"] <= 16
    assert snap["tls_failures"] == 0, snap["tls_errors"][:5]
    s = run.summary
    assert s["tls_handshakes"] + s["tls_resumed"] >= snap["tcp_accepted"], (s, snap["tcp_accepted"])


# ---------------------------------------------------------------------------- limits


@pytest.mark.parametrize("query", ["cl=1", "cl=0", "chunked=1"],
                         ids=["content-length", "close-delimited", "chunked"])
def test_30_24_page_too_large_over_https(run_harvestd, pki, tls_origin, query):
    url = tls_origin.url("/big?size=100000&" + query)
    run = run_harvestd([url], *ca_args(pki), "--max-bytes", "64k")
    assert_failed(run.records[0], "download", "PageTooLarge", "response_exceeds_64_kib")
    assert run.summary.get("error_type.PageTooLarge") == 1


@pytest.mark.parametrize("path", ["/slow-headers?delay=3&title=late", "/drip?interval=2&count=3&title=stall"],
                         ids=["before-headers", "between-body-bytes"])
def test_30_25_read_timeout_over_https(run_harvestd, pki, tls_origin, path):
    run = run_harvestd([tls_origin.url(path)], *ca_args(pki), "--read-timeout", "1s",
                       "--total-timeout", "10s")
    rec = run.records[0]
    assert_failed(rec, "download", "ReadTimeout")
    assert 900 <= rec["elapsed_ms"] <= 2500 * SLOWDOWN, rec
    assert run.elapsed < 2.8 * SLOWDOWN, "the run waited for the slow origin: %.1fs" % run.elapsed


def test_30_26_backpressure_over_https(run_harvestd, pki, tls_origin):
    size = 1500000
    urls = [tls_origin.url("/big?size=%d&title=Heavy&i=%d" % (size, i)) for i in range(30)]
    # Full parses of 1.5 MB pages make the single parser the bottleneck (the title fast path
    # would keep up with the network and nothing would have to wait).
    run = run_harvestd(urls, *ca_args(pki), "--title-fast-path=no", "--parse-jobs", "1", "--page-queue", "2",
                       "--max-bytes", "4m", timeout=120)
    assert run.rc == 0
    recs = by_url(run.records)
    assert set(recs) == set(urls)
    for r in recs.values():
        assert_ok(r, "Heavy")
        assert r["bytes"] == size
    s = run.summary
    assert 1 <= s["hwm_pages"] <= 2, s
    assert s["read_pauses"] > 0, s
    assert size <= s["hwm_page_bytes"] <= 2 * 4 * MIB, s
    print("peak RSS %d KiB" % run.maxrss_kib)


def test_30_27_max_bytes_boundary_over_https(run_harvestd, pki, tls_origin):
    at, over = tls_origin.url("/big?size=65536&title=at"), tls_origin.url("/big?size=65537&title=over")
    run = run_harvestd([at, over], *ca_args(pki), "--max-bytes", "64k")
    recs = by_url(run.records)
    assert_ok(recs[at], "at")
    assert recs[at]["bytes"] == 65536
    assert recs[at]["title"] == "at" and len(html_page("at", 65536)) == 65536
    assert_failed(recs[over], "download", "PageTooLarge", "response_exceeds_64_kib")


# ---------------------------------------------------------------------------- shutdown


def test_30_28_signal_drains_tls_requests_in_flight(harvestd, pki, tls_origin):
    urls = [tls_origin.url("/hold?key=late&title=l%d" % i) for i in range(3)]
    proc = harvestd.start(urls, *ca_args(pki), "--drain-timeout", "5s")
    proc.poll_until(lambda: len(tls_origin.requests) >= 3, 10, "all requests in flight")
    proc.send_signal(signal.SIGINT)
    time.sleep(0.2)  # let the signal be handled before the answers arrive
    tls_origin.release("late")
    run = proc.wait(timeout=60)
    assert run.rc in (0, 3), run.rc
    assert sorted(r["title"] for r in run.records if r["status"] == "ok") == ["l0", "l1", "l2"]


def test_30_29_drain_timeout_closes_tls_connections(harvestd, pki, tls_origin):
    # Nothing in flight can finish: the drain gives up after --drain-timeout and the TLS
    # connections are torn down mid-response.
    urls = [tls_origin.url("/hold?key=never&title=h%d" % i) for i in range(12)]
    proc = harvestd.start(urls, *ca_args(pki), "--concurrency", "4", "--per-host", "4",
                          "--drain-timeout", "1s", "--read-timeout", "60s", "--total-timeout", "60s")
    proc.poll_until(lambda: len(tls_origin.requests) >= 4, 10, "four requests in flight")
    sent = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    run = proc.wait(timeout=60)
    took = time.monotonic() - sent
    assert run.rc == 3
    assert 0.8 <= took < 4 * SLOWDOWN, "exit %.1fs after SIGTERM with --drain-timeout 1s" % took
    assert not [r for r in run.records if r["status"] == "ok"], run.records
    assert len(tls_origin.requests) <= 8, "new requests were started after the signal"
    assert run.summary is not None and run.summary["records"] == len(run.records)
