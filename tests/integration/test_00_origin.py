"""Self-tests of the scripted origin, the TLS servers and test PKI of tls.py, and the harness (no
harvestd needed): the other tests rely on these behaviours, so a broken origin shows up here and
not as a puzzling harvestd failure."""

import gzip
import http.client
import socket
import time

import pytest

from origin import BlackHole, html_page


def get(origin, path, conn=None):
    c = conn or http.client.HTTPConnection("127.0.0.1", origin.port, timeout=5)
    c.request("GET", path)
    r = c.getresponse()
    body = r.read()
    if conn is None:
        c.close()
    return r, body


def test_00_01_page_has_exact_size_and_title(fresh_origin):
    r, body = get(fresh_origin, "/page?title=Hello&size=5000")
    assert r.status == 200
    assert len(body) == 5000
    assert b"<title>Hello</title>" in body
    assert r.getheader("Content-Type").startswith("text/html")
    assert body == html_page("Hello", 5000)


def test_00_02_keep_alive_and_counters(fresh_origin):
    c = http.client.HTTPConnection("127.0.0.1", fresh_origin.port, timeout=5)
    for i in range(5):
        r, _ = get(fresh_origin, "/page?title=k%d" % i, conn=c)
        assert r.status == 200
    c.close()
    snap = fresh_origin.snapshot()
    assert snap["connections_accepted"] == 1
    assert snap["requests_served"] == 5
    assert [q.query["title"] for q in snap["requests"]] == ["k%d" % i for i in range(5)]
    assert snap["requests"][0].header("host") == "127.0.0.1:%d" % fresh_origin.port


def test_00_03_encodings(fresh_origin):
    r, body = get(fresh_origin, "/gzip?title=G&size=3000")
    assert r.getheader("Content-Encoding") == "gzip"
    assert gzip.decompress(body) == html_page("G", 3000)
    r, body = get(fresh_origin, "/chunked?title=C&size=1000")
    assert r.getheader("Transfer-Encoding") == "chunked"
    assert body == html_page("C", 1000)
    r, body = get(fresh_origin, "/big?size=100000&cl=0")
    assert r.getheader("Content-Length") is None and len(body) == 100000


def test_00_04_redirect_chain_uses_relative_locations(fresh_origin):
    locations = []
    path = "/redirect/3"
    for _ in range(3):
        r, _ = get(fresh_origin, path)
        assert r.status in (301, 302, 303, 307, 308)
        loc = r.getheader("Location")
        locations.append(loc)
        assert not loc.startswith("http")
        # Resolve as RFC 3986 does for these simple forms.
        if loc.startswith("/"):
            path = loc
        elif loc.startswith("../"):
            path = "/" + loc[3:]
        else:
            path = path.rsplit("/", 1)[0] + "/" + loc
    assert path == "/redirect/0"
    r, body = get(fresh_origin, path)
    assert r.status == 200 and b"<title>final</title>" in body
    assert len(set(loc[:2] for loc in locations)) == 3  # three different reference forms


@pytest.mark.parametrize("path,exc", [
    ("/reset-mid-body", ConnectionResetError),
    ("/close-mid-body", http.client.IncompleteRead),
    ("/chunked-truncated", http.client.IncompleteRead),
    ("/garbage", http.client.BadStatusLine),
])
def test_00_05_misbehaving_endpoints(fresh_origin, path, exc):
    with pytest.raises(exc):
        get(fresh_origin, path)


def test_00_06_close_after_response_drops_the_next_request(fresh_origin):
    c = http.client.HTTPConnection("127.0.0.1", fresh_origin.port, timeout=5)
    r, _ = get(fresh_origin, "/close-after-response?delay=5", conn=c)
    assert r.status == 200 and r.getheader("Connection") is None
    with pytest.raises(http.client.RemoteDisconnected):
        get(fresh_origin, "/page", conn=c)
    c.close()
    assert fresh_origin.stale_drops == 1


def test_00_07_stop_closes_open_connections():
    from origin import Origin
    o = Origin("selftest").start()
    s = socket.create_connection(("127.0.0.1", o.port), timeout=5)
    s.sendall(b"GET /drip?interval=1&count=100 HTTP/1.1\r\nHost: x\r\n\r\n")
    deadline = time.monotonic() + 5
    while not o.requests and time.monotonic() < deadline:
        time.sleep(0.01)
    o.stop()
    data = b""
    while True:
        chunk = s.recv(65536)
        if not chunk:
            break
        data += chunk
    s.close()
    assert data.startswith(b"HTTP/1.1 200")
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", o.port), timeout=1).close()


def test_00_08_black_hole_times_out_connects():
    b = BlackHole().start()
    try:
        s = socket.socket()
        s.settimeout(0.5)
        with pytest.raises(socket.timeout):
            s.connect(("127.0.0.1", b.port))
        s.close()
    finally:
        b.stop()


# ---------------------------------------------------------------------------- harness self-tests

def test_00_09_summary_parser():
    from harness import parse_summary
    stderr = ("harvestd: notice: something\n"
              "harvestd: summary records=3 ok=2 failed=1 error_type.DnsError=1 elapsed_s=0.25 "
              "pages_per_s=8.0 hwm_jobs=2\n")
    s = parse_summary(stderr)
    assert s == {"records": 3, "ok": 2, "failed": 1, "error_type.DnsError": 1, "elapsed_s": 0.25,
                 "pages_per_s": 8.0, "hwm_jobs": 2}
    assert parse_summary("harvestd: notice: no summary here\n") is None


def test_00_10_record_parser_rejects_bad_lines():
    from harness import parse_records
    good = b'{"requested_url":"http://a/","status":"ok"}\n'
    assert parse_records(good) == [{"requested_url": "http://a/", "status": "ok"}]
    for bad in (b"not json\n", b'{"requested_url":"x","status":"ok"}',  # no final newline
                b'{"status":"ok"}\n', b'["requested_url"]\n',
                b'{"requested_url":"\xff","status":"ok"}\n'):
        with pytest.raises((AssertionError, pytest.fail.Exception)):
            parse_records(bad)


def test_00_11_sanitizer_reports_fail_the_test():
    from harness import check_sanitizer
    check_sanitizer("harvestd: summary records=0 ok=0 failed=0\n")
    for report in ("==1==ERROR: AddressSanitizer: heap-use-after-free on address",
                   "src/http.c:12:5: runtime error: signed integer overflow",
                   "==1==ERROR: LeakSanitizer: detected memory leaks"):
        with pytest.raises(pytest.fail.Exception):
            check_sanitizer("harvestd: notice: x\n" + report + "\n")


# ---------------------------------------------------------------------------- TLS self-tests (tls.py)

# kind, host the client asks for, fragment of Python's verification error (None: verifies)
PKI_CASES = [
    ("localhost", "localhost", None),
    ("localhost", "127.0.0.1", None),
    ("self-signed", "localhost", "self-signed certificate"),
    ("expired", "localhost", "certificate has expired"),
    ("not-yet-valid", "localhost", "certificate is not yet valid"),
    ("wrong-name", "localhost", "Hostname mismatch"),
    ("localhost-noip", "127.0.0.1", "IP address mismatch"),
    ("wrong-name", "127.0.0.1", "IP address mismatch"),
]


@pytest.mark.parametrize("kind,host,error", PKI_CASES,
                         ids=["%s@%s" % (c[0], c[1]) for c in PKI_CASES])
def test_00_12_pki_certificates_verify_as_intended(pki, tls_origins, kind, host, error):
    import ssl
    from tls import client_context, https_get
    o = tls_origins(kind, host=host)
    ctx = client_context(pki.ca_file)
    if error is None:
        r = https_get(o.port, "/page?title=Secure&size=3000", host=host, ctx=ctx)
        assert r.status == 200 and r.body == html_page("Secure", 3000)
        assert r.version == "TLSv1.2" and r.alpn == "http/1.1"
    else:
        with pytest.raises(ssl.SSLCertVerificationError) as info:
            https_get(o.port, "/page", host=host, ctx=ctx)
        assert error in str(info.value), info.value
        assert o.requests == []


def test_00_13_tls_origin_counts_handshakes_and_sessions(pki, tls_origins):
    from tls import client_context, https_get, wait_for
    o = tls_origins("localhost")
    ctx = client_context(pki.ca_file)
    first = https_get(o.port, "/page?title=one", ctx=ctx)
    assert not first.session_reused
    again = https_get(o.port, "/page?title=two", ctx=ctx, session=first.session)
    assert again.session_reused
    https_get(o.port, "/page?title=three", host="127.0.0.1", ctx=ctx)
    assert wait_for(lambda: len(o.snapshot()["tls_sessions"]) == 3)
    snap = o.snapshot()
    assert snap["tcp_accepted"] == snap["connections_accepted"] == 3
    assert (snap["tls_full"], snap["tls_resumed"], snap["tls_failures"]) == (2, 1, 0)
    s1, s2, s3 = snap["tls_sessions"]
    assert (s1.sni, s1.alpn, s1.version, s1.resumed) == ("localhost", "http/1.1", "TLSv1.2", False)
    assert s2.resumed and s2.sni == "localhost"
    assert s3.sni is None, "Python sends no SNI for an IP address, and the origin must see none"
    assert [r.header("host") for r in snap["requests"]] == \
        ["localhost:%d" % o.port] * 2 + ["127.0.0.1:%d" % o.port]


@pytest.mark.parametrize("tickets", [True, False], ids=["ticket", "session-id"])
@pytest.mark.parametrize("path", ["/page", "/page?close=1"], ids=["keep-alive", "close"])
def test_00_14_tls_resumption_survives_a_close_without_close_notify(pki, tls_origins, tickets, path):
    # The client drops TCP without a TLS close_notify (as many clients do); the session must stay
    # resumable both by ticket and by session ID.
    import ssl
    from tls import client_context, wait_for
    o = tls_origins("localhost")
    ctx = client_context(pki.ca_file)
    if not tickets:
        ctx.options |= ssl.OP_NO_TICKET

    def rude_get(session=None):
        s = socket.create_connection(("127.0.0.1", o.port), timeout=5)
        t = ctx.wrap_socket(s, server_hostname="localhost", session=session)
        t.sendall(("GET %s HTTP/1.1\r\nHost: localhost\r\n\r\n" % path).encode())
        data = b""
        while b"</html>" not in data:
            data += t.recv(65536)
        out = (t.session, t.session_reused)
        socket.socket(fileno=t.detach()).close()
        return out

    session, reused = rude_get()
    assert not reused and session.has_ticket == tickets
    assert wait_for(lambda: o.snapshot()["open_connections"] == 0 and o.tcp_accepted == 1)
    _, reused = rude_get(session)
    assert reused
    assert wait_for(lambda: o.snapshot()["tls_resumed"] == 1)
    assert o.snapshot()["tls_full"] == 1


def test_00_15_tls_keep_alive_and_close_delimited_body(pki, tls_origins):
    import http.client
    from tls import client_context
    o = tls_origins("localhost")
    c = http.client.HTTPSConnection("localhost", o.port, timeout=5, context=client_context(pki.ca_file))
    for i in range(5):
        c.request("GET", "/page?title=k%d&size=%d" % (i, 20000 * i))
        r = c.getresponse()
        assert r.status == 200 and len(r.read()) == max(20000 * i, len(html_page("k%d" % i)))
    c.request("GET", "/big?size=300000&cl=0")
    r = c.getresponse()
    assert r.getheader("Content-Length") is None and len(r.read()) == 300000
    c.close()
    snap = o.snapshot()
    assert snap["tcp_accepted"] == 1 and snap["requests_served"] == 6 and snap["tls_full"] == 1


@pytest.mark.parametrize("mode", ["close", "reset", "garbage", "alert"])
def test_00_16_raw_tls_peer_breaks_the_handshake(pki, raw_tls_peers, mode):
    import ssl
    from tls import client_context, https_get
    peer = raw_tls_peers(mode)
    with pytest.raises((ssl.SSLError, ConnectionError)):
        https_get(peer.port, "/", ctx=client_context(pki.ca_file))
    with pytest.raises((ssl.SSLError, ConnectionError)):
        https_get(peer.port, "/", host="127.0.0.1", ctx=client_context(pki.ca_file, max_version=None))
    assert peer.tcp_accepted == 2 and not peer.errors
    tls12, tls13 = peer.hellos
    assert (tls12.sni, tls12.alpn, tls12.max_version()) == ("localhost", ("http/1.1",), 0x0303)
    assert (tls13.sni, tls13.max_version()) == (None, 0x0304)
    assert 0x0304 not in tls12.supported_versions


def test_00_17_raw_tls_peer_silent_mode_and_stop(pki, raw_tls_peers):
    import ssl
    from tls import client_context, https_get
    peer = raw_tls_peers("silent")
    t0 = time.monotonic()
    with pytest.raises((socket.timeout, ssl.SSLError)):
        https_get(peer.port, "/", ctx=client_context(pki.ca_file), timeout=0.5)
    assert time.monotonic() - t0 < 2
    assert len(peer.hellos) == 1
    # A connection still waiting in the handshake does not hold up stop().
    s = socket.create_connection(("127.0.0.1", peer.port), timeout=5)
    t0 = time.monotonic()
    peer.stop()
    assert time.monotonic() - t0 < 2
    s.close()


def test_00_18_tls_origin_stops_with_a_pending_handshake(pki):
    from tls import TlsOrigin
    o = TlsOrigin("pending", *pki.cert("localhost")).start()
    s = socket.create_connection(("127.0.0.1", o.port), timeout=5)
    s.sendall(b"\x16\x03\x01")  # the start of a record, never finished
    time.sleep(0.05)
    t0 = time.monotonic()
    o.stop()
    assert time.monotonic() - t0 < 2
    assert s.recv(100) == b""
    s.close()
    assert o.tcp_accepted == 1 and o.tls_full == 0


# ---------------------------------------------------------------------------- harness checks


def test_00_19_leftover_handles_fail_the_test():
    from harness import check_leftover_handles, check_sanitizer
    clean = ("harvestd: level=notice event=start mode=once\n"
             "harvestd: level=info event=invalid_input line=1 url=http://a/event=leftover_handle\n"
             "harvestd: summary records=1 ok=0 failed=1\n")
    check_leftover_handles(clean)
    check_sanitizer(clean)
    for stderr, types in [
            ("harvestd: summary records=0 ok=0 failed=0\n"
             "harvestd: level=warning event=leftover_handle type=timer\n", "(timer)"),
            ("<4>level=warning event=leftover_handle type=tcp\n"  # the journal's form
             "<4>level=warning event=leftover_handle type=idle\n", "(tcp, idle)")]:
        for check in (check_leftover_handles, check_sanitizer):
            with pytest.raises(pytest.fail.Exception) as info:
                check(stderr)
            message = str(info.value)
            assert types in message, message
            assert "event=leftover_handle" in message, message  # the excerpt
