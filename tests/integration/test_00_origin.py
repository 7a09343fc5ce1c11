"""Self-tests of the scripted origin (no harvestd needed): the other tests rely on these
behaviours, so a broken origin shows up here and not as a puzzling harvestd failure."""

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
