"""Observability: the Prometheus endpoint (`--metrics-listen` / `metrics_listen`) in --once and
daemon mode, the --once progress line on a terminal, and the title fast path (the same records
as the full parse; tests/tools/title_equiv compares the two C functions page by page)."""

import errno
import os
import pty
import random
import re
import select
import signal
import socket
import subprocess
import threading
import time
import tty
import urllib.parse

import pytest

from harness import (ALWAYS_DEFAULTS, FAST_DEFAULTS, HARVESTD_BIN, SLOWDOWN,
                     assert_ok, by_url, check_batch, check_sanitizer, count_by, parse_records,
                     parse_summary, tool_path, wait_complete, wait_listening)
from origin import html_page, free_port

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))

ERROR_TYPES = ["InvalidUrl", "UnsupportedScheme", "DnsError", "ConnectError", "ConnectTimeout",
               "ReadTimeout", "TotalTimeout", "ConnectionReset", "ProtocolError",
               "TooManyRedirects", "PageTooLarge", "UnexpectedContentType", "HttpStatus",
               "CertificateError", "TlsError", "MissingTitle", "TooDeeplyNested"]

# Counters and the histogram never go down while the process runs; of the gauges, neither do
# these maxima.
NEVER_DECREASING_GAUGES = {"harvestd_event_loop_lag_max_seconds", "harvestd_page_queue_high_water",
                           "harvestd_page_queue_high_water_bytes"}

ONCE_FAMILIES = {
    "harvestd_records_total": "counter",
    "harvestd_record_errors_total": "counter",
    "harvestd_http_responses_total": "counter",
    "harvestd_downloaded_bytes_total": "counter",
    "harvestd_parse_duration_seconds": "histogram",
    "harvestd_event_loop_lag_seconds": "gauge",
    "harvestd_event_loop_lag_max_seconds": "gauge",
    "harvestd_requests_in_flight": "gauge",
    "harvestd_jobs_waiting": "gauge",
    "harvestd_page_queue_depth": "gauge",
    "harvestd_page_queue_bytes": "gauge",
    "harvestd_page_queue_high_water": "gauge",
    "harvestd_page_queue_high_water_bytes": "gauge",
    "harvestd_read_pauses_total": "counter",
    "harvestd_batches_active": "gauge",
    "harvestd_connections_opened_total": "counter",
    "harvestd_connections_reused_total": "counter",
    "harvestd_stale_connection_retries_total": "counter",
    "harvestd_redirects_total": "counter",
    "harvestd_retries_total": "counter",
    "harvestd_dns_lookups_total": "counter",
    "harvestd_dns_cache_hits_total": "counter",
    "harvestd_tls_handshakes_total": "counter",
    "harvestd_tls_failures_total": "counter",
    "harvestd_throttle_decreases_total": "counter",
    "harvestd_throttle_increases_total": "counter",
    "harvestd_hosts_throttled": "gauge",
}
DAEMON_FAMILIES = dict(ONCE_FAMILIES, harvestd_batches_completed_total="counter",
                       harvestd_batches_rejected_total="counter",
                       harvestd_batches_resumed_total="counter")


# ---------------------------------------------------------------------------- a small HTTP client


class Response:
    def __init__(self, status, reason, headers, body, raw):
        self.status = status
        self.reason = reason
        self.headers = headers  # lower-case name -> value (last one wins)
        self.body = body
        self.raw = raw


def http_exchange(port, data, timeout=5.0, host="127.0.0.1"):
    """Send `data` (bytes) on a new connection to host:port and read until the server closes
    it. Returns the parsed Response; fails the test on a timeout or a reset."""
    s = socket.create_connection((host, port), timeout=timeout * SLOWDOWN)
    try:
        if data:
            s.sendall(data)
        raw = b""
        while True:
            try:
                chunk = s.recv(65536)
            except socket.timeout:
                pytest.fail("no complete answer within %.0fs to %r (got %r)" % (timeout, data[:100], raw[:300]))
            if not chunk:
                break
            raw += chunk
    finally:
        s.close()
    return parse_response(raw, data)


def parse_response(raw, request=b""):
    head, sep, body = raw.partition(b"\r\n\r\n")
    assert sep, "no complete response head to %r: %r" % (request[:100], raw[:300])
    lines = head.decode("latin-1").split("\r\n")
    m = re.match(r"^HTTP/1\.[01] (\d{3}) ?(.*)$", lines[0])
    assert m, "bad status line %r" % lines[0]
    headers = {}
    for line in lines[1:]:
        name, colon, value = line.partition(":")
        assert colon, "bad header line %r" % line
        headers[name.strip().lower()] = value.strip()
    if "content-length" in headers:
        assert int(headers["content-length"]) == len(body), \
            "Content-Length %s but %d body bytes" % (headers["content-length"], len(body))
    return Response(int(m.group(1)), m.group(2), headers, body, raw)


def get(port, path="/metrics", method="GET", extra=b"", timeout=5.0, host="127.0.0.1"):
    req = ("%s %s HTTP/1.1\r\nHost: %s:%d\r\n" % (method, path, host, port)).encode() + extra + b"\r\n"
    return http_exchange(port, req, timeout, host)


# ---------------------------------------------------------------------------- Prometheus text


SAMPLE_RE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$')
LABEL_RE = re.compile(r'\s*([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"\s*(?:,|$)')


class Metrics:
    """One scrape: samples[(name, ((label, value), ...))] = float, types[family] = type."""

    def __init__(self, text):
        self.text = text
        self.samples = {}
        self.types = {}
        self.helps = {}
        for n, line in enumerate(text.split("\n"), 1):
            if not line:
                continue
            if line.startswith("# HELP "):
                name, _, help_text = line[7:].partition(" ")
                assert name not in self.helps, "two HELP lines for %s" % name
                assert help_text.strip(), "empty HELP for %s" % name
                self.helps[name] = help_text
                continue
            if line.startswith("# TYPE "):
                name, _, kind = line[7:].partition(" ")
                assert kind in ("counter", "gauge", "histogram", "summary", "untyped"), line
                assert name not in self.types, "two TYPE lines for %s" % name
                self.types[name] = kind
                continue
            assert not line.startswith("#"), "stray comment line %d: %r" % (n, line)
            m = SAMPLE_RE.match(line)
            assert m, "line %d is not a sample: %r" % (n, line)
            name, labels_text, value = m.groups()
            labels = []
            if labels_text:
                pos = 0
                while pos < len(labels_text):
                    lm = LABEL_RE.match(labels_text, pos)
                    assert lm, "bad labels on line %d: %r" % (n, line)
                    labels.append((lm.group(1), lm.group(2)))
                    pos = lm.end()
            key = (name, tuple(sorted(labels)))
            assert key not in self.samples, "duplicate sample on line %d: %r" % (n, line)
            try:
                v = float(value)
            except ValueError:
                pytest.fail("line %d: value %r is not a number" % (n, value))
            assert v == v, "NaN on line %d: %r" % (n, line)
            family = self.family(name)
            assert family in self.types, "sample %s before (or without) its # TYPE line" % name
            self.samples[key] = v

    def family(self, name):
        for suffix in ("_bucket", "_sum", "_count"):
            base = name[:-len(suffix)]
            if name.endswith(suffix) and self.types.get(base) == "histogram":
                return base
        return name

    def value(self, name, **labels):
        key = (name, tuple(sorted(labels.items())))
        assert key in self.samples, "no sample %s%r in the scrape:\n%s" % (name, labels, self.text)
        return self.samples[key]

    def int(self, name, **labels):
        v = self.value(name, **labels)
        assert v == int(v) and v >= 0, "%s%r = %r is not a count" % (name, labels, v)
        return int(v)

    def series(self, name):
        """{labels-tuple: value} of every sample called `name`."""
        return {k[1]: v for k, v in self.samples.items() if k[0] == name}

    def buckets(self):
        out = []
        for labels, v in self.series("harvestd_parse_duration_seconds_bucket").items():
            le = dict(labels)["le"]
            out.append((float("inf") if le == "+Inf" else float(le), v))
        return sorted(out)


def check_page(m, families):
    """The scrape holds every family with the right type, sane histogram and gauges."""
    for name, kind in families.items():
        assert m.types.get(name) == kind, "%s: TYPE %r, expected %s" % (name, m.types.get(name), kind)
        assert name in m.helps, "%s has no HELP" % name
    assert {dict(k)["status"] for k in m.series("harvestd_records_total")} == {"ok", "failed"}
    # Every documented error_type has its series (0 until it happens); newer ones may follow.
    types = [dict(k)["error_type"] for k in m.series("harvestd_record_errors_total")]
    assert set(ERROR_TYPES) <= set(types), "error_type series missing: %r" % sorted(set(ERROR_TYPES) - set(types))
    assert sorted(dict(k)["class"] for k in m.series("harvestd_http_responses_total")) == \
        ["1xx", "2xx", "3xx", "4xx", "5xx"]
    assert sorted(dict(k)["kind"] for k in m.series("harvestd_tls_handshakes_total")) == ["full", "resumed"]
    for (name, labels), v in m.samples.items():
        assert v >= 0, "%s%r is negative: %r" % (name, labels, v)
    # Histogram: cumulative buckets ending with +Inf == _count.
    buckets = m.buckets()
    assert buckets and buckets[-1][0] == float("inf"), buckets
    assert len(buckets) >= 2, buckets
    counts = [c for _, c in buckets]
    assert counts == sorted(counts), "histogram buckets are not cumulative: %r" % buckets
    count = m.int("harvestd_parse_duration_seconds_count")
    assert buckets[-1][1] == count, (buckets, count)
    total = m.value("harvestd_parse_duration_seconds_sum")
    assert total >= 0 and (count > 0 or total == 0), (total, count)
    finite = [b for b in buckets if b[0] != float("inf")]
    # Every observation above the largest finite bound took at least that long.
    assert total >= (count - finite[-1][1]) * finite[-1][0] - 1e-6, (total, buckets)
    assert m.value("harvestd_event_loop_lag_max_seconds") >= m.value("harvestd_event_loop_lag_seconds")
    assert m.value("harvestd_page_queue_high_water") >= m.value("harvestd_page_queue_depth")
    assert m.value("harvestd_page_queue_high_water_bytes") >= m.value("harvestd_page_queue_bytes")
    records = m.int("harvestd_records_total", status="ok") + m.int("harvestd_records_total", status="failed")
    failed = sum(m.series("harvestd_record_errors_total").values())
    assert failed == m.int("harvestd_records_total", status="failed"), m.text
    assert m.int("harvestd_parse_duration_seconds_count") <= records, m.text


def scrape(port, families=ONCE_FAMILIES):
    r = get(port)
    assert r.status == 200, "GET /metrics: %d %r" % (r.status, r.raw[:300])
    ctype = r.headers.get("content-type", "")
    assert ctype.startswith("text/plain") and "version=0.0.4" in ctype, ctype
    assert r.headers.get("connection", "").lower() == "close", r.headers
    text = r.body.decode("utf-8")
    assert text.endswith("\n"), text[-200:]
    m = Metrics(text)
    check_page(m, families)
    return m


def wait_counted(daemon, port, completed):
    """Wait until /metrics counts `completed` batches: a batch is counted once its completion
    is durable, which is after its summary and done/ file can be seen (wait_complete)."""
    daemon.poll_until(
        lambda: scrape(port, DAEMON_FAMILIES).int("harvestd_batches_completed_total") == completed,
        10, "harvestd_batches_completed_total == %d" % completed)


def check_never_decrease(prev, cur):
    for key, v in prev.samples.items():
        name = key[0]
        if cur.types.get(cur.family(name)) == "gauge" and name not in NEVER_DECREASING_GAUGES:
            continue
        assert key in cur.samples, "%s%r disappeared" % key
        assert cur.samples[key] >= v, "%s%r went down from %r to %r" % (name, key[1], v, cur.samples[key])


def parsed(records):
    """Records whose page reached the parser: ok ones and parse failures."""
    return [r for r in records if r["status"] == "ok" or r.get("stage") == "parse"]


def check_matches_records(m, records):
    """The counters derived from records equal what `records` (every record written so far, and
    nothing else counted) say."""
    ok = [r for r in records if r["status"] == "ok"]
    failed = [r for r in records if r["status"] == "failed"]
    assert m.int("harvestd_records_total", status="ok") == len(ok), m.text
    assert m.int("harvestd_records_total", status="failed") == len(failed), m.text
    by_type = count_by(failed, "error_type")
    series = {dict(k)["error_type"]: int(v) for k, v in m.series("harvestd_record_errors_total").items()}
    assert set(by_type) <= set(series), "error types of records without a series: %r" % by_type
    for t, v in sorted(series.items()):
        assert v == by_type.get(t, 0), "error_type %s: metrics %d, records %d" % (t, v, by_type.get(t, 0))
    classes = count_by([r for r in records if "http_status" in r], "http_status")
    for c in range(1, 6):
        want = sum(n for status, n in classes.items() if status // 100 == c)
        assert m.int("harvestd_http_responses_total", **{"class": "%dxx" % c}) == want, \
            "class %dxx: %s" % (c, classes)
    assert m.int("harvestd_downloaded_bytes_total") == sum(r.get("bytes", 0) for r in records)
    assert m.int("harvestd_parse_duration_seconds_count") == len(parsed(records))


def start_once_with_metrics(harvestd, urls, *args):
    """harvestd.start(urls, --metrics-listen 127.0.0.1:PORT, *args) on a port that was free a
    moment ago (retried if another process took it in between). Returns (proc, port)."""
    for _ in range(3):
        port = free_port()
        proc = harvestd.start(urls, "--metrics-listen", "127.0.0.1:%d" % port, *args)
        try:
            wait_listening(port, lambda: proc.popen.poll() is None)
            return proc, port
        except AssertionError:
            if proc.popen.poll() is None:
                raise
            if "address already in use" not in proc.stderr_text():
                raise
    pytest.fail("no free port for the metrics endpoint")


# ---------------------------------------------------------------------------- metrics: --once


def test_70_01_scrapes_during_a_run_are_consistent(harvestd, fresh_origin):
    """A run of a few seconds, scraped every 50 ms: counters never go down, the in-flight gauge
    stays within --concurrency, the output never holds more records than were counted, and
    with every page done but one held, the counters equal the records written."""
    o = fresh_origin
    urls = [o.url("/page?title=slow%d&delay=0.15&size=%d" % (i, 1000 + 37 * i)) for i in range(24)]
    urls[3:3] = [o.url("/status/404"), o.url("/status/503"), o.url("/notitle"),
                 o.url("/nested?depth=5000"), o.url("/redirect/3"), "not a url",
                 "ftp://127.0.0.1/x", o.url("/type?ct=application/json"),
                 "http://127.0.0.1:%d/closed" % free_port()]
    held = o.url("/hold?key=last&title=held")
    urls.append(held)
    proc, port = start_once_with_metrics(harvestd, urls, "--concurrency", "3", "--per-host", "3",
                                         "--flush-ms", "20ms")
    prev = scrape(port)
    scrapes = 1
    max_inflight = 0
    while True:
        written = len(proc.complete_lines())
        m = scrape(port)
        scrapes += 1
        check_never_decrease(prev, m)
        prev = m
        inflight = m.int("harvestd_requests_in_flight")
        max_inflight = max(max_inflight, inflight)
        assert inflight <= 3, "%d requests in flight with --concurrency 3" % inflight
        counted = m.int("harvestd_records_total", status="ok") + m.int("harvestd_records_total", status="failed")
        assert written <= counted <= len(urls), (written, counted)
        assert m.int("harvestd_batches_active") == 1
        if written == len(urls) - 1 and o.find_request("key=last"):
            break
        assert proc.popen.poll() is None, "harvestd exited with a request held"
        assert time.monotonic() - proc.started < 20 * SLOWDOWN, "the run did not progress"
        time.sleep(0.05)
    assert scrapes >= 10, "only %d scrapes during the run" % scrapes
    assert max_inflight >= 2, "never more than %d request in flight" % max_inflight

    # Everything but the held page is written: the counters say exactly what the output holds.
    records = parse_records(proc.output_bytes())
    assert len(records) == len(urls) - 1
    m = scrape(port)
    check_never_decrease(prev, m)
    check_matches_records(m, records)
    assert m.int("harvestd_requests_in_flight") == 1
    assert m.int("harvestd_jobs_waiting") == 0
    assert m.int("harvestd_redirects_total") == sum(r.get("redirects", 0) for r in records if r["status"] == "ok")
    assert m.int("harvestd_retries_total") == 0
    snap = o.snapshot()
    # Connections opened count connect attempts: the origin's, and the one refused.
    assert m.int("harvestd_connections_opened_total") == snap["connections_accepted"] + 1
    assert m.int("harvestd_connections_opened_total") + m.int("harvestd_connections_reused_total") == \
        len(snap["requests"]) + 1, "connections opened+reused vs %d requests" % len(snap["requests"])
    assert m.int("harvestd_dns_lookups_total") == 0  # IP literals only
    o.release("last")
    run = proc.wait(timeout=20)
    assert run.rc == 0
    assert len(run.records) == len(urls)
    assert_ok(by_url(run.records)[held], "held")
    s = run.summary
    assert s["connections_opened"] == m.int("harvestd_connections_opened_total")
    assert s["redirects"] == m.int("harvestd_redirects_total")


def held_run(harvestd, origin, key, n_pages=4, *args):
    """A --once run with metrics whose last URL waits for origin.release(key): returns (proc,
    port, urls) once every other record is written and the held request has arrived."""
    urls = [origin.url("/page?title=%s-%d" % (key, i)) for i in range(n_pages)]
    urls.append(origin.url("/hold?key=%s&title=%s-held" % (key, key)))
    proc, port = start_once_with_metrics(harvestd, urls, "--flush-ms", "20ms", *args)
    proc.poll_until(lambda: len(proc.complete_lines()) == n_pages and origin.find_request("key=%s" % key),
                    10, "every page but the held one")
    return proc, port, urls


def finish_held_run(proc, origin, key, urls):
    origin.release(key)
    run = proc.wait(timeout=20)
    assert run.rc == 0
    assert sorted(r["requested_url"] for r in run.records) == sorted(urls)
    for r in run.records:
        assert_ok(r)
    return run


MALFORMED = [
    b"garbage\r\n\r\n",
    b"\x00\x01\x02\x03\r\n\r\n",
    b"GET /metrics HTTP/9.9\r\n\r\n",
    b"GET /me trics HTTP/1.1\r\n\r\n",
    b"GET /metrics HTTP/1.1\r\nHeader without colon\r\n\r\n",
    b"GET /metrics HTTP/1.1\r\nContent-Length: abc\r\n\r\n",
    b"GET /metrics HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n\r\n",
    # A TLS ClientHello sent to the plain-text port.
    b"\x16\x03\x01\x00\x2f\x01\x00\x00\x2b\x03\x03" + b"\x00" * 32 + b"\x00\x00\x02\x13\x01\x01\x00\r\n\r\n",
]


def test_70_02_bad_requests_get_400_404_405_and_the_endpoint_keeps_serving(harvestd, fresh_origin):
    o = fresh_origin
    proc, port, urls = held_run(harvestd, o, "bad")
    before = scrape(port)

    for data in MALFORMED:
        r = http_exchange(port, data)
        assert r.status == 400, "%r got %d" % (data[:60], r.status)
        assert r.headers.get("connection", "").lower() == "close"
        scrape(port)  # still serving after each

    # Size bound: a request of exactly 8 KiB is served, one byte more is refused.
    def sized(total, end=b"\r\n\r\n"):
        start = b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Pad: "
        pad = total - len(start) - len(end)
        return start + b"p" * pad + end
    assert len(sized(8192)) == 8192
    r = http_exchange(port, sized(8192))
    assert r.status == 200, "an 8192-byte request got %d" % r.status
    Metrics(r.body.decode())
    for total in (8193, 9000):
        r = http_exchange(port, sized(total))
        assert r.status == 400, "a %d-byte request got %d" % (total, r.status)
    # Headers that never end: refused once past the bound, without waiting for the rest.
    start = time.monotonic()
    r = http_exchange(port, sized(9000, end=b""), timeout=5)
    assert r.status == 400
    assert time.monotonic() - start < 2 * SLOWDOWN
    # A flood of 1 MiB past the bound: the server answers 400 and reads the rest away before
    # closing (lingering close), so the answer is not lost to a reset.
    s = socket.create_connection(("127.0.0.1", port), timeout=5 * SLOWDOWN)
    try:
        s.sendall(b"GET /metrics HTTP/1.1\r\nX: " + b"f" * (1 << 20))
        answer = s.recv(100)
        assert answer.startswith(b"HTTP/1.1 400 "), answer
    finally:
        s.close()

    # Only GET, only /metrics (a query string is allowed).
    for path in ("/", "/metric", "/metrics/", "/metricsx", "/Metrics", "/metrics/x", "/favicon.ico",
                 "http://127.0.0.1/other"):
        r = get(port, path)
        assert r.status == 404, "GET %s got %d" % (path, r.status)
        assert r.headers.get("connection", "").lower() == "close"
    assert get(port, "/metrics?format=text").status == 200
    for method, extra in (("POST", b"Content-Length: 5\r\n\r\nhello"), ("PUT", b"Content-Length: 0\r\n"),
                          ("DELETE", b""), ("HEAD", b""), ("OPTIONS", b""), ("PATCH", b"Content-Length: 0\r\n")):
        data = ("%s /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n" % method).encode()
        data += extra if extra.endswith(b"hello") else extra + b"\r\n"
        r = http_exchange(port, data)
        assert r.status == 405, "%s /metrics got %d" % (method, r.status)
        assert r.headers.get("connection", "").lower() == "close"

    # One request per connection: a second request on the same connection is not answered.
    r = http_exchange(port, b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\nGET /nothere HTTP/1.1\r\nHost: x\r\n\r\n")
    assert r.status == 200 and r.raw.count(b"HTTP/1.1 ") == 1, r.raw[-300:]

    after = scrape(port)
    check_never_decrease(before, after)
    check_matches_records(after, parse_records(proc.output_bytes()))
    finish_held_run(proc, o, "bad", urls)


def test_70_03_silent_clients_do_not_block_scrapes(harvestd, fresh_origin):
    """Clients that connect and send nothing, or half a request, do not delay other scrapes,
    and do not keep the run from ending."""
    o = fresh_origin
    proc, port, urls = held_run(harvestd, o, "slow")
    idle = []
    try:
        for i in range(6):
            s = socket.create_connection(("127.0.0.1", port), timeout=5)
            if i % 2:
                s.sendall(b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
            idle.append(s)
        time.sleep(0.1)
        for _ in range(3):
            start = time.monotonic()
            m = scrape(port)
            took = time.monotonic() - start
            assert took < 1 * SLOWDOWN, "a scrape took %.2fs beside silent clients" % took
        check_matches_records(m, parse_records(proc.output_bytes()))
        released = time.monotonic()
        finish_held_run(proc, o, "slow", urls)
        took = time.monotonic() - released
        assert took < 3 * SLOWDOWN, "the run ended %.1fs after its last page (silent clients open)" % took
        # The endpoint is gone with the process: the silent clients see their connection end.
        for s in idle:
            s.settimeout(2)
            try:
                assert s.recv(100) == b""
            except ConnectionResetError:
                pass
    finally:
        for s in idle:
            s.close()


@pytest.mark.parametrize("total", [16 * 1024, 64 * 1024], ids=["16k", "64k"])
def test_70_04_oversized_request_sees_its_400_not_a_reset(harvestd, fresh_origin, total):
    """A client that sent a whole request larger than 8 KiB reads the complete 400 and then the
    end of the stream, never a reset: the server answers once past the bound, then reads the
    rest of the request away before closing (RFC 9112, section 9.6)."""
    o = fresh_origin
    proc, port, urls = held_run(harvestd, o, "big%d" % total, 1)
    data = b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Pad: " + b"p" * (total - 60) + b"\r\n\r\n"
    s = socket.create_connection(("127.0.0.1", port), timeout=5 * SLOWDOWN)
    raw = b""
    try:
        s.sendall(data)
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            raw += chunk
    except ConnectionResetError:
        pytest.fail("a %d-byte request was answered with a connection reset (received before "
                    "it: %r)" % (len(data), raw[:200]))
    finally:
        s.close()
    assert parse_response(raw, data).status == 400
    scrape(port)
    finish_held_run(proc, o, "big%d" % total, urls)


# ---------------------------------------------------------------------------- metrics: daemon


class SlowClient(threading.Thread):
    """A client that connects and then sends nothing (trickle=False) or one byte of an endless
    header every 0.4 s (trickle=True), until the server closes the connection: `closed_after`
    is then the number of seconds since it connected."""

    def __init__(self, port, trickle=False):
        super().__init__(daemon=True)
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=5)
        self.connected = time.monotonic()
        self.trickle = trickle
        self.closed_after = None
        self.answer = b""
        self._stop_event = threading.Event()
        if trickle:
            self.sock.sendall(b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")

    def run(self):
        try:
            while not self._stop_event.is_set():
                readable, _, _ = select.select([self.sock], [], [], 0.4)
                if readable:
                    try:
                        data = self.sock.recv(4096)
                    except OSError:
                        data = b""
                    if not data:
                        break
                    self.answer += data
                    continue
                if self.trickle:
                    try:
                        self.sock.sendall(b"s")
                    except OSError:
                        break
            else:
                return
            self.closed_after = time.monotonic() - self.connected
        finally:
            self.sock.close()

    def stop(self):
        self._stop_event.set()
        self.join(5)


def test_70_05_daemon_counts_batches_and_cuts_slow_clients(start_daemon, spool, fresh_origin):
    """Daemon mode: counters equal the records of the completed batches (cumulative), batches
    completed and rejected are counted, gauges fall back to zero between batches, and clients
    that never finish a request are cut after the 10 s bound while scrapes go on."""
    o = fresh_origin
    port = free_port()
    d = start_daemon(metrics_listen="127.0.0.1:%d" % port, flush_ms="20ms", retries="0")
    wait_listening(port, d.running)
    slow = [SlowClient(port), SlowClient(port, trickle=True)]
    for c in slow:
        c.start()
    try:
        m0 = scrape(port, DAEMON_FAMILIES)
        for name in ("harvestd_batches_completed_total", "harvestd_batches_rejected_total",
                     "harvestd_batches_resumed_total", "harvestd_batches_active"):
            assert m0.int(name) == 0, name
        check_matches_records(m0, [])

        lines_a = ([o.url("/page?title=a%d&delay=0.05" % i) for i in range(8)]
                   + [o.url("/status/404"), o.url("/status/500"), o.url("/notitle"),
                      o.url("/nested?depth=5000"), o.url("/redirect/2"), o.url("/gzip?title=zipped&size=3000"),
                      "not a url", "http://127.0.0.1:%d/refused" % free_port()])
        data_a = spool.drop("a.txt", lines_a)
        prev = m0
        while not spool.has_summary("a.txt"):
            m = scrape(port, DAEMON_FAMILIES)
            check_never_decrease(prev, m)
            assert m.int("harvestd_requests_in_flight") <= 32
            prev = m
            assert d.running(), "the daemon exited:\n" + d.stderr_text()[-3000:]
            assert time.monotonic() - d.started < 15 * SLOWDOWN, "batch a.txt did not complete"
            time.sleep(0.03)
        wait_complete(d, spool, ["a.txt"], timeout=5)
        wait_counted(d, port, 1)
        recs_a = check_batch(spool, "a.txt", data_a)
        m = scrape(port, DAEMON_FAMILIES)
        check_never_decrease(prev, m)
        check_matches_records(m, recs_a)
        assert m.int("harvestd_batches_completed_total") == 1
        assert m.int("harvestd_redirects_total") == 2
        d.poll_until(lambda: scrape(port, DAEMON_FAMILIES).int("harvestd_batches_active") == 0, 5,
                     "no batch active")
        m = scrape(port, DAEMON_FAMILIES)
        for name in ("harvestd_requests_in_flight", "harvestd_jobs_waiting",
                     "harvestd_page_queue_depth", "harvestd_page_queue_bytes"):
            assert m.int(name) == 0, "%s = %r with no batch" % (name, m.value(name))

        spool.drop("blob.bin", b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
        d.poll_until(lambda: scrape(port, DAEMON_FAMILIES).int("harvestd_batches_rejected_total") == 1, 5,
                     "the rejected file counted")
        data_b = spool.drop("b.txt", [o.url("/page?title=b%d" % i) for i in range(5)] + [o.url("/status/404?b")])
        wait_complete(d, spool, ["b.txt"], timeout=10)
        wait_counted(d, port, 2)
        recs_b = check_batch(spool, "b.txt", data_b)
        m2 = scrape(port, DAEMON_FAMILIES)
        check_never_decrease(m, m2)
        check_matches_records(m2, recs_a + recs_b)
        assert m2.int("harvestd_batches_completed_total") == 2
        assert m2.int("harvestd_batches_rejected_total") == 1
        assert m2.int("harvestd_batches_resumed_total") == 0

        # The slow clients: cut 10 s after they connected, not before, scrapes served meanwhile.
        deadline = time.monotonic() + 15 * SLOWDOWN
        while any(c.is_alive() for c in slow) and time.monotonic() < deadline:
            start = time.monotonic()
            scrape(port, DAEMON_FAMILIES)
            assert time.monotonic() - start < 1 * SLOWDOWN
            time.sleep(0.25)
        for c in slow:
            kind = "trickling" if c.trickle else "silent"
            assert c.closed_after is not None, "the %s client was not cut within 15 s" % kind
            assert 9.5 <= c.closed_after <= 10 + 2 * SLOWDOWN, \
                "the %s client was cut after %.1fs (bound: 10 s)" % (kind, c.closed_after)
            print("%s client cut after %.2fs" % (kind, c.closed_after))
            assert c.answer == b"" or c.answer.startswith(b"HTTP/1.1 4"), c.answer[:100]
    finally:
        for c in slow:
            c.stop()
    assert d.stop() == 0


@pytest.mark.parametrize("mode", ["once", "daemon"])
def test_70_06_metrics_port_in_use_is_a_usage_error(harvestd, start_daemon, spool, origin, tmp_path, mode):
    busy = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        port = busy.getsockname()[1]
        listen = "127.0.0.1:%d" % port
        if mode == "once":
            out = tmp_path / "never.jsonl"
            run = harvestd.run([origin.url("/page?title=x")], "--metrics-listen", listen,
                               out=str(out), parse=False, timeout=10)
            rc, stderr = run.rc, run.stderr
            assert not out.exists(), "the output was created although the run could not start"
        else:
            d = start_daemon(metrics_listen=listen, ready=False)
            rc = d.wait(timeout=10)
            stderr = d.stderr_text()
            assert "event=start" not in stderr
        assert rc == 2, "exit status %d with the metrics port in use" % rc
        assert listen in stderr and "in use" in stderr, stderr
        assert parse_summary(stderr) is None
    finally:
        busy.close()


def free_port_on(family, addr):
    """A TCP port on `addr` that nothing listens on, or None when `addr` cannot be bound here
    (no IPv6 loopback)."""
    s = socket.socket(family, socket.SOCK_STREAM)
    try:
        s.bind((addr, 0))
        return s.getsockname()[1]
    except OSError:
        return None
    finally:
        s.close()


@pytest.mark.parametrize("host,family,addr", [
    ("localhost", socket.AF_INET, "127.0.0.1"),
    ("LOCALHOST", socket.AF_INET, "127.0.0.1"),
    ("[::1]", socket.AF_INET6, "::1"),
], ids=["localhost", "LOCALHOST", "ipv6-loopback"])
def test_70_14_metrics_listen_takes_localhost_and_the_ipv6_loopback(start_daemon, spool, host,
                                                                    family, addr):
    """metrics_listen = localhost:PORT listens on 127.0.0.1 (localhost is taken as that address,
    not looked up: tests/unit/test_metrics.c); [::1]:PORT on the IPv6 loopback."""
    port = free_port_on(family, addr)
    if port is None:
        pytest.skip("%s cannot be bound here" % addr)
    listen = "%s:%d" % (host, port)
    d = start_daemon(metrics_listen=listen)
    deadline = time.monotonic() + 10 * SLOWDOWN
    while True:
        try:
            socket.create_connection((addr, port), timeout=1).close()
            break
        except OSError:
            assert d.running(), "the daemon exited:\n" + d.stderr_text()[-3000:]
            assert time.monotonic() < deadline, "nothing listens on %s port %d" % (addr, port)
            time.sleep(0.01)
    r = get(port, host=addr)
    assert r.status == 200, r.raw[:300]
    Metrics(r.body.decode("utf-8")).int("harvestd_records_total", status="ok")
    assert d.stop() == 0


PROCESS_FAMILIES = {
    "harvestd_build_info": "gauge",
    "process_cpu_seconds_total": "counter",
    "process_open_fds": "gauge",
    "process_max_fds": "gauge",
    "process_virtual_memory_bytes": "gauge",
    "process_resident_memory_bytes": "gauge",
    "process_start_time_seconds": "gauge",
}


def test_70_15_build_info_and_process_metrics(harvestd, start_daemon, spool):
    """The page carries harvestd_build_info (the version --version prints) and the process_*
    metrics every Prometheus exporter has, with sane values: some open descriptors, below the
    limit the daemon runs with; megabytes resident; a start time between the launch and the
    start-up; CPU time that grows while the daemon works (each scrape costs it some)."""
    version = harvestd.command("--version").stdout.split()[-1]
    port = free_port()
    launched = time.time()
    d = start_daemon(metrics_listen="127.0.0.1:%d" % port)
    ready = time.time()
    wait_listening(port, d.running)
    m = scrape(port, dict(DAEMON_FAMILIES, **PROCESS_FAMILIES))
    (labels,) = m.series("harvestd_build_info")
    assert dict(labels)["version"] == version, labels
    assert re.match(r"^\d+\.\d+\.\d+", dict(labels)["libuv"]), labels
    assert m.value("harvestd_build_info", **dict(labels)) == 1
    open_fds, max_fds = m.int("process_open_fds"), m.int("process_max_fds")
    assert 3 < open_fds < max_fds, (open_fds, max_fds)
    rss, vsize = m.int("process_resident_memory_bytes"), m.int("process_virtual_memory_bytes")
    assert 1 << 20 < rss <= vsize, (rss, vsize)
    # The boot time the start time counts from has whole seconds.
    start = m.value("process_start_time_seconds")
    assert launched - 2 <= start <= ready + 1, (launched, start, ready)
    cpu = m.value("process_cpu_seconds_total")
    assert cpu > 0, m.text
    deadline = time.monotonic() + 10 * SLOWDOWN
    while m.value("process_cpu_seconds_total") <= cpu:
        assert time.monotonic() < deadline, "CPU time stayed at %r over 10 s of scrapes" % cpu
        m = scrape(port, dict(DAEMON_FAMILIES, **PROCESS_FAMILIES))
    assert m.value("process_start_time_seconds") == start
    assert d.stop() == 0


def test_70_07_daemon_counts_a_resumed_batch(start_daemon, spool, fresh_origin):
    """A batch interrupted by SIGTERM resumes after a restart: the new process counts it as
    resumed, and its record counters hold only the records it wrote itself."""
    o = fresh_origin
    d1 = start_daemon(drain_timeout="200ms", flush_ms="20ms", retries="0")
    lines = [o.url("/page?title=r%d" % i) for i in range(3)] + [o.url("/hold?key=r&title=held")]
    spool.drop("r.txt", lines)
    d1.poll_until(lambda: len(spool.output_lines("r.txt")) == 3 and o.find_request("key=r"), 10,
                  "three records and the held request")
    assert d1.stop() == 0
    assert spool.files("active") == ["r.txt"]
    first = spool.output_bytes("r.txt")
    o.release("r")

    port = free_port()
    d2 = start_daemon(metrics_listen="127.0.0.1:%d" % port, flush_ms="20ms", retries="0")
    wait_listening(port, d2.running)
    wait_complete(d2, spool, ["r.txt"], timeout=10)
    wait_counted(d2, port, 1)
    final = spool.output_bytes("r.txt")
    assert final.startswith(first)
    mine = parse_records(final[len(first):])
    assert [r["requested_url"] for r in mine if r["status"] == "ok"] == [lines[3]], mine
    m = scrape(port, DAEMON_FAMILIES)
    assert m.int("harvestd_batches_resumed_total") == 1
    assert m.int("harvestd_batches_completed_total") == 1
    check_matches_records(m, mine)
    summary = spool.summary("r.txt")
    assert summary["resumed"] == 3, summary
    assert m.int("harvestd_records_total", status="ok") == summary["ok"] - summary["resumed"]
    assert d2.stop() == 0


# ---------------------------------------------------------------------------- progress line


PROGRESS_RE = re.compile(rb"\r\x1b\[K(\d+)/(~?)(\d+)(\+?)  ok (\d+)  failed (\d+)  (\d+) pages/s  ETA (\S+)")
CLEAR = b"\r\x1b[K"


class TerminalRun:
    """harvestd --once with its stderr on a pseudo-terminal (or a pipe): every chunk read from
    the other end, with its arrival time."""

    def __init__(self, tmp_path, urls, *args, terminal=True, stdin_urls=None, records_on_terminal=False):
        self.out = str(tmp_path / ("out-%s-%d.jsonl" % ("tty" if terminal else "pipe", id(self))))
        if records_on_terminal:
            self.out = "-"  # stdout is the terminal too
        if stdin_urls is None:
            input_path = str(tmp_path / ("urls-%d.txt" % id(self)))
            with open(input_path, "w") as f:
                f.write("".join(u + "\n" for u in urls))
        else:
            input_path = "-"
        argv = [HARVESTD_BIN, "--once", input_path, "-o", self.out]
        for opt, value in FAST_DEFAULTS + ALWAYS_DEFAULTS:
            argv += [opt, value]
        self.argv = argv + [str(a) for a in args]
        if terminal:
            self.reader, writer = pty.openpty()
            tty.setraw(writer)  # no output processing: the bytes as harvestd wrote them
        else:
            self.reader, writer = os.pipe()
        self.chunks = []
        self.started = time.monotonic()
        try:
            self.popen = subprocess.Popen(self.argv, stdin=subprocess.PIPE if stdin_urls is not None
                                          else subprocess.DEVNULL,
                                          stdout=writer if records_on_terminal else subprocess.DEVNULL,
                                          stderr=writer,
                                          start_new_session=True)
        finally:
            os.close(writer)
        print("$ " + " ".join(self.argv) + ("   # stderr on a pty" if terminal else "   # stderr on a pipe"))

    def pump(self, seconds):
        """Read what arrives for `seconds` (or until the other end is closed)."""
        deadline = time.monotonic() + seconds
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return True
            readable, _, _ = select.select([self.reader], [], [], left)
            if not readable:
                continue
            try:
                data = os.read(self.reader, 65536)
            except OSError as e:
                if e.errno != errno.EIO:  # EIO: the pty's last writer is gone
                    raise
                data = b""
            if not data:
                return False
            self.chunks.append((time.monotonic(), data))

    def finish(self, timeout=30):
        """Read until harvestd exits and the other end is closed; returns its exit status."""
        deadline = time.monotonic() + timeout * SLOWDOWN
        try:
            while self.pump(0.2):
                if time.monotonic() > deadline:
                    pytest.fail("harvestd did not finish within %ss:\n%r" % (timeout, self.data()[-3000:]))
            self.rc = self.popen.wait(timeout=10)
            self.elapsed = time.monotonic() - self.started
        finally:
            self.close()
        text = self.data().decode("utf-8", "replace")
        print(text[-5000:])
        check_sanitizer(text)
        return self.rc

    def close(self):
        if self.popen.poll() is None:
            try:
                os.killpg(self.popen.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.popen.wait()
        if self.popen.stdin is not None and not self.popen.stdin.closed:
            self.popen.stdin.close()
        if self.reader is not None:
            os.close(self.reader)
            self.reader = None

    def data(self):
        return b"".join(c for _, c in self.chunks)

    def records(self):
        with open(self.out, "rb") as f:
            return parse_records(f.read())


@pytest.fixture
def terminal_runs(harvestd_bin, tmp_path):
    """terminal_runs(urls, *args, terminal=True, stdin_urls=None) -> a started TerminalRun;
    every one still running after the test is killed."""
    runs = []

    def start(urls, *args, **kwargs):
        r = TerminalRun(tmp_path, urls, *args, **kwargs)
        runs.append(r)
        return r

    yield start
    for r in runs:
        r.close()


def progress_lines(data, approx=False):
    """The redraws as (done, total, "+", ok, failed, rate, eta); with `approx`, only those whose
    total is an estimate ("~"), else only those whose total is not."""
    return [tuple(int(x) if x.isdigit() else x for i, x in enumerate(m.groups()) if i != 1)
            for m in PROGRESS_RE.finditer(data) if (m.group(2) == b"~") == approx]


def check_progress(lines, total, elapsed):
    """Redraws are sane: done/total/ok/failed consistent and never going back, at most four a
    second over the run."""
    assert len(lines) <= 4 * elapsed + 1, "%d redraws in %.2fs (at most 4 a second)" % (len(lines), elapsed)
    prev_done = 0
    for done, seen, plus, ok, failed, rate, eta in lines:
        assert ok + failed == done, lines
        assert done <= seen <= total, lines
        assert done >= prev_done, "done went back: %r" % lines
        prev_done = done
        assert plus in (b"", b"+")
        assert re.match(rb"^(\d+m\d\ds|\d+h\d\dm|--:--)$", eta), eta
        if plus:
            assert eta == b"--:--", "an ETA while the input is still being read: %r" % lines


def test_70_08_progress_line_on_a_terminal(terminal_runs, fresh_origin):
    """On a terminal --once redraws one progress line (at most 4 times a second), then clears it
    before the summary; the input read from a pipe shows "+" until its end."""
    o = fresh_origin
    first = [o.url("/page?title=p%d&delay=0.2" % i) for i in range(8)]
    second = [o.url("/page?title=q%d&delay=0.2" % i) for i in range(8)] + [o.url("/status/404"), "bad url"]
    run = terminal_runs(None, "--concurrency", "2", "--per-host", "2", stdin_urls=True)
    run.popen.stdin.write("".join(u + "\n" for u in first).encode())
    run.popen.stdin.flush()
    run.pump(1.2)
    while_open = progress_lines(run.data())
    run.popen.stdin.write("".join(u + "\n" for u in second).encode())
    run.popen.stdin.close()
    assert run.finish() == 0
    total = len(first) + len(second)
    data = run.data()
    lines = progress_lines(data)
    print("%d redraws in %.2fs" % (len(lines), run.elapsed))
    check_progress(lines, total, run.elapsed)
    assert len(lines) >= 4, "only %d redraws in a %.1fs run" % (len(lines), run.elapsed)
    # While the input was open the total was not known yet.
    assert while_open, "no redraw in the first 1.2 s"
    assert all(plus == b"+" for _, _, plus, *_ in while_open), while_open
    assert all(seen <= len(first) for _, seen, *_ in while_open), while_open
    # Once it was read to its end: the full total, no "+".
    assert lines[-1][1] == total and lines[-1][2] == b"", lines[-1]
    # Every escape sequence belongs to a redraw, and the line is cleared before the summary.
    assert data.count(b"\x1b") == data.count(CLEAR) == len(lines) + 1, data[-2000:]
    summary_at = data.rindex(b"harvestd: summary ")
    assert data[summary_at - len(CLEAR):summary_at] == CLEAR, data[summary_at - 200:summary_at + 50]
    assert PROGRESS_RE.search(data, summary_at) is None
    summary = parse_summary(data.replace(CLEAR, b"\n").decode("utf-8", "replace"))
    assert summary["records"] == total
    recs = run.records()
    assert len(recs) == total
    assert summary["ok"] == sum(1 for r in recs if r["status"] == "ok") == 16


@pytest.mark.parametrize("terminal,option,shown", [
    (False, None, False),
    (False, "--progress", True),
    (True, "--no-progress", False),
], ids=["pipe", "pipe-forced-on", "tty-forced-off"])
def test_70_09_progress_line_only_where_wanted(terminal_runs, origin, terminal, option, shown):
    urls = [origin.url("/page?title=w%d&delay=0.3&opt=%s" % (i, option)) for i in range(6)]
    args = ["--concurrency", "2", "--per-host", "2"] + ([option] if option else [])
    run = terminal_runs(urls, *args, terminal=terminal)
    assert run.finish() == 0
    data = run.data()
    lines = progress_lines(data)
    if shown:
        assert lines, "no progress line with %s on a %s" % (option, "terminal" if terminal else "pipe")
        check_progress(lines, len(urls), run.elapsed)
        assert data.count(CLEAR) == len(lines) + 1
    else:
        assert CLEAR not in data and b"\x1b" not in data and b"\r" not in data, data[:500]
    assert parse_summary(data.replace(CLEAR, b"\n").decode("utf-8", "replace"))["records"] == len(urls)
    assert len(run.records()) == len(urls)


def test_70_13_messages_do_not_land_on_the_progress_line(terminal_runs, fresh_origin):
    """Ctrl-C during a run on a terminal: the notice about the signal (and everything else
    written to stderr) starts on a line of its own, not glued to the end of the progress
    line; the run drains and exits 3."""
    o = fresh_origin
    urls = [o.url("/page?title=i%d&delay=0.3" % i) for i in range(12)]
    run = terminal_runs(urls, "--concurrency", "1", "--per-host", "1")
    run.pump(1.0)
    assert progress_lines(run.data()), "no progress line before the signal"
    run.popen.send_signal(signal.SIGINT)
    assert run.finish() == 3
    data = run.data()
    assert b"event=signal" in data, data[-2000:]
    glued = []
    for m in re.finditer(rb"harvestd: ", data):
        at = m.start()
        if at == 0 or data[at - 1:at] == b"\n" or data[at - len(CLEAR):at] == CLEAR:
            continue
        line_start = data.rfind(b"\n", 0, at) + 1
        glued.append(data[line_start:data.find(b"\n", at)])
    assert not glued, "messages written after a progress line, on the same line:\n%s" % \
        "\n".join(repr(g) for g in glued)


def test_70_16_progress_line_estimates_the_total_of_a_file(terminal_runs, fresh_origin):
    """A 3,000-line file read a little at a time (the queue holds 16): the line shows an
    estimated total ("~") from the share of the file read, and an ETA, long before the
    reader reaches its end (before, it showed "13/1037+ ... ETA --:--")."""
    o = fresh_origin
    urls = [o.url("/page?title=e%04d&delay=0.2" % i) for i in range(3000)]
    run = terminal_runs(urls, "--concurrency", "4", "--per-host", "4", "--queue-size", "16")
    run.pump(2.5)
    data = run.data()
    run.close()
    approx = progress_lines(data, approx=True)
    assert approx, "no estimated total in %r" % data[-500:]
    assert not progress_lines(data), "the input was read to its end already: %r" % data[-500:]
    for done, total, plus, ok, failed, rate, eta in approx:
        assert plus == b"", approx
        assert 0.8 * len(urls) <= total <= 1.2 * len(urls), approx
        assert done <= total
    # Once pages have completed the rate gives an ETA (many minutes away, at 4 x 5 pages/s).
    assert any(re.match(rb"^\d+m\d\ds$", eta) for *_, eta in approx if _[0] > 0), approx


def test_70_17_no_progress_line_when_the_records_go_to_the_same_terminal(terminal_runs, fresh_origin):
    """`-o -` with stdout on the terminal: the records would be glued onto the progress line
    (`ETA 0m00s{"requested_url"...`), so it is not drawn, even when asked for; every record
    starts a line of its own."""
    o = fresh_origin
    urls = [o.url("/page?title=t%d&delay=0.3" % i) for i in range(6)]
    for option in ([], ["--progress"]):
        run = terminal_runs(urls, "--concurrency", "2", "--per-host", "2", *option,
                            records_on_terminal=True)
        assert run.finish() == 0
        data = run.data()
        assert CLEAR not in data and b"\r" not in data, data[:500]
        records = [line for line in data.split(b"\n") if b"requested_url" in line]
        assert len(records) == len(urls), data[-2000:]
        assert all(line.startswith(b'{"requested_url"') for line in records), records


# ---------------------------------------------------------------------------- title fast path
#
# The fast path parses a page only up to its first "</title" end tag when that settles the
# title. The traps below put that end tag (or a title) where a prefix parse would be wrong:
# in comments, raw-text and RCDATA elements, foreign content, templates, tables, after the
# body; or make the bytes themselves awkward (BOM, invalid UTF-8, NUL, entities).

HEAD = '<!DOCTYPE html>\n<html><head><meta charset="utf-8">'

# name -> (document, title the full parse gives, None for none, ANY when it depends on how
# the bytes are decoded). Expected titles follow the HTML parsing algorithm as gumbo
# implements it; the origin's /raw declares "charset=utf-8".
ANY = object()
TITLE_TRAPS = {
    "comment": (HEAD + "<!-- <title>Commented</title> --><title>Real</title></head><body>x</body></html>", "Real"),
    "end-tag-in-comment-first": (HEAD + "<!-- </title> --><title>Real</title></head><body>x</body></html>", "Real"),
    "end-tag-in-attribute": (HEAD + '<meta name="x" content="</title>"><title>Real</title></head></html>', "Real"),
    "script": (HEAD + '<script>var s = "<title>Scripted</title>";</script><title>Real</title></head><body></body></html>', "Real"),
    "script-escaped": (HEAD + "<script><!--<script></title></script>--></script><title>Real</title></head></html>", "Real"),
    "style": (HEAD + "<style>/* </title> */ p {}</style><title>Real</title></head><body></body></html>", "Real"),
    "textarea": (HEAD + "</head><body><textarea><title>Text</title></textarea><title>Real</title></body></html>", "Real"),
    "textarea-in-head": (HEAD + "<textarea><title>T</title></textarea><title>Real</title>", "Real"),
    "xmp": ("<html><body><xmp></title><title>X</title></xmp><title>Real</title></body></html>", "Real"),
    "iframe": ("<html><body><iframe></title></iframe><title>Real</title></body></html>", "Real"),
    "noembed": ("<html><body><noembed><title>N</title></noembed><title>Real</title></body></html>", "Real"),
    "noframes": ("<html><head><noframes><title>N</title></noframes><title>Real</title></head></html>", "Real"),
    "plaintext": ("<html><body><plaintext><title>P</title></body></html>", None),
    "svg": (HEAD + "</head><body><svg><title>SVG title</title></svg><title>Real</title></body></html>", "Real"),
    "svg-only": (HEAD + "</head><body><svg><title>SVG title</title></svg></body></html>", None),
    "svg-in-head": ("<html><head><svg><title>S</title></svg><title>Real</title></head></html>", "Real"),
    "svg-cdata": ("<html><body><svg><title><![CDATA[cdata]]></title></svg><title>Real</title></body></html>", "Real"),
    "math-only": ("<html><body><math><title>M</title></math></body></html>", None),
    "math-mi": ("<html><body><math><mi><title>In mi</title></mi></math><title>Later</title></body></html>", "In mi"),
    "foreign-object": ("<html><body><svg><foreignObject><title>FO</title></foreignObject></svg></body></html>", "FO"),
    "template": ("<html><head><template><title>Tpl</title></template><title>Real</title></head><body></body></html>", "Real"),
    "template-only": ("<html><head><template><title>Tpl</title></template></head><body>x</body></html>", None),
    "template-nested": ("<html><head><template><template><title>T</title></template></template></head>"
                        "<body><title>B</title></body></html>", "B"),
    "no-title": (HEAD + "</head><body><h1>No title</h1></body></html>", None),
    "blank-title": (HEAD + "<title>   \n\t </title></head><body>x</body></html>", None),
    "unclosed": (HEAD + "<title>Never closed</head><body>text</body></html>", "Never closed</head><body>text</body></html>"),
    "unclosed-at-eof": ("<title>Never closed", "Never closed"),
    "almost-an-end-tag": ("<title>x</title", "x</title"),
    "after-body": ("<html><head></head><body><p>x</p></body></html><title>Late</title>", "Late"),
    "after-html-comment": ("<html><head></head><body></body></html>\n<!-- c --><title>After html</title>", "After html"),
    "in-body": ("<html><head></head><body><title>Body title</title></body></html>", "Body title"),
    "after-head": ("<html><head></head><title>After head</title><body>x</body></html>", "After head"),
    "after-head-text": ("<html><head></head>x<title>After text</title><body></body></html>", "After text"),
    "table": ("<html><body><table><title>Table</title><tr><td>x</td></tr></table></body></html>", "Table"),
    "table-cell": ("<html><body><table><tr><td><title>Cell</title></td></tr></table></body></html>", "Cell"),
    "table-then-title": ("<table><title>T1</title></table><title>T2</title>", "T1"),
    "select": ("<html><body><select><title>Sel</title></select></body></html>", None),
    "object": ("<html><body><object><title>Obj</title></object></body></html>", "Obj"),
    "frameset-after-body-title": ("<html><head></head><body><title>Frame</title><frameset><frame></frameset></body></html>", "Frame"),
    "frameset-after-head-title": ("<html><head><title>Head</title></head><frameset><frame></frameset></html>", "Head"),
    "two-titles": (HEAD + "<title>First</title><title>Second</title></head><body></body></html>", "First"),
    "body-title-first": ("<html><body><title>Body first</title></body></html><title>x</title>", "Body first"),
    "html-tag-later": ("<html><head><title>T</title></head><body><html lang=en><head><title>Again</title></head></body></html>", "T"),
    "noscript": ("<html><head><noscript><title>NS</title></noscript></head><body></body></html>", "NS"),
    "noscript-svg": ("<html><head><noscript><svg><title>a</title></svg></noscript><title>b</title></head></html>", "b"),
    "end-tag-uppercase": (HEAD + "<TITLE>Upper</TITLE></head><body></body></html>", "Upper"),
    "end-tag-mixed-case": (HEAD + "<title>Mixed</TiTlE ></head><body></body></html>", "Mixed"),
    "end-tag-self-closing": (HEAD + "<title>Self</title/></head><body></body></html>", "Self"),
    "end-tag-newline": (HEAD + "<title>NL</title\n></head><body></body></html>", "NL"),
    "end-tag-attributes": (HEAD + '<title>Attrs</title class="x" id=y></head><body></body></html>', "Attrs"),
    "end-tag-quoted-gt": (HEAD + '<title>Real</title x=">">more</head><body></body></html>', "Real"),
    "not-an-end-tag": (HEAD + "<title>A</titlex>B</title></head><body></body></html>", "A</titlex>B"),
    "markup-in-title": (HEAD + "<title>a <b>bold</b> &lt;i&gt;</title></head></html>", "a <b>bold</b> <i>"),
    "comment-in-title": (HEAD + "<title>A<!--</title>-->B</title></head></html>", "A<!--"),
    "bare": ("<title>Bare</title>", "Bare"),
    "text-before-bare": ("hello <title>Late bare</title>", "Late bare"),
    "bom": ("\ufeff<!DOCTYPE html><html><head><title>BOM page</title></head><body></body></html>", "BOM page"),
    "bom-in-title": ("\ufeff<title>\ufeffBOM inside</title>", "\ufeffBOM inside"),
    "entities": (HEAD + "<title>&amp;&lt;&gt;&quot;&#39;&#x1F600;&eacute;&notanentity; &amp &nbsp;x</title></head></html>",
                 "&<>\"'\U0001F600\u00e9\u00acanentity; & \u00a0x"),
    "numeric-oddities": (HEAD + "<title>a&#0;b&#xD800;c&#128;d&#x110000;e</title></head></html>",
                         "a\ufffdb\ufffdc\u20acd\ufffde"),
    "whitespace": (HEAD + "<title>\r\n  Lots\t\tof \x0c  space\r </title></head></html>", "Lots of space"),
    "nbsp-not-collapsed": (HEAD + "<title>\u00a0nbsp\u00a0\u2003em</title></head></html>", "\u00a0nbsp\u00a0\u2003em"),
    "doctype-only": ("<!DOCTYPE html>", None),
    "lone-lt": ("<", None),
}
TITLE_TRAPS_BYTES = {
    "invalid-utf8-title": (b"<html><head><title>caf\xe9 \xff\xfe ok \xe2\x82</title></head><body></body></html>",
                           "caf\ufffd \ufffd\ufffd ok \ufffd"),
    "invalid-utf8-in-end-tag": (b"<html><head><title>x\xe2\x82</title\xc3>y</title></head></html>",
                                "x\ufffd</title\ufffd>y"),
    "invalid-utf8-after-title": (b"<html><head><title>Good</title></head><body>\xff\xfe\xc0\xaf</body></html>", "Good"),
    "invalid-utf8-before-title": (b'<html><head><meta content="\xff"><title>Good</title></head></html>', "Good"),
    "nul-in-title": (b"<html><head><title>a\x00b</title></head></html>", "a\ufffdb"),
    "nul-in-end-tag": (b"<html><head><title>A</title\x00>B</title></head></html>", "A</title\ufffd>B"),
    "overlong-and-surrogate": (b"<html><head><title>\xc0\xbc|\xed\xa0\x80x</title></head></html>",
                               "\ufffd\ufffd|\ufffd\ufffd\ufffdx"),
    "latin1-declared": (b'<html><head><meta charset="iso-8859-1"><title>Gr\xfc\xdfe</title></head></html>', ANY),
    "utf16-bom": (b"\xff\xfe<\x00t\x00i\x00t\x00l\x00e\x00>\x00x\x00<\x00/\x00t\x00i\x00t\x00l\x00e\x00>\x00", ANY),
    "bom-then-invalid": (b"\xef\xbb\xbf<title>\xef\xbb</title>", "\ufffd"),
}


def trap_documents():
    """name -> (bytes, expected title or None)."""
    out = {name: (doc.encode("utf-8"), title) for name, (doc, title) in TITLE_TRAPS.items()}
    out.update(TITLE_TRAPS_BYTES)
    return out


PAGE_TITLES = ["Plain", "  spaced \n\t out  ", "Caf&eacute; &amp; Cr&egrave;me", "Gr\u00fc\u00dfe \u6771\u4eac \U0001F600",
               "a<b>c</b>", "One</title><title>Two", "", "&lt;/title&gt;", "</TITLE >tail", "x</title><!--",
               "</title><script>", "<!--", "\u00a0nb", "T" * 3000]


def fast_path_urls(origin):
    """name -> URL: every kind of page the origin serves with HTML, and the traps via /raw."""
    q = lambda s: urllib.parse.quote(s, safe="")  # noqa: E731
    urls = {}
    for i, title in enumerate(PAGE_TITLES):
        urls["page-title-%d" % i] = origin.url("/page?title=%s" % q(title))
    for size in (0, 5000, 200000, 1900000, 3000000):
        urls["page-size-%d" % size] = origin.url("/page?title=Sized&size=%d" % size)
    for ct in ("text/html", "TEXT/HTML; charset=ISO-8859-1", "application/xhtml+xml", "text/plain"):
        urls["page-ct-" + ct] = origin.url("/page?title=Typed&ct=%s" % q(ct))
    urls["page-close"] = origin.url("/page?title=Closing&close=1")
    urls["page-v10"] = origin.url("/page?title=Old%20HTTP&v10=1")
    for ct in ("text/html", "", "application/json"):
        urls["type-" + ct] = origin.url("/type?ct=%s" % q(ct))
    for code in (200, 203, 404):
        urls["status-%d" % code] = origin.url("/status/%d" % code)
    urls["redirect"] = origin.url("/redirect/3")
    urls["redir"] = origin.url("/redir?code=301&to=%s" % q("/page?title=redirected"))
    urls["slow-headers"] = origin.url("/slow-headers?delay=0.05&title=Slow")
    urls["drip"] = origin.url("/drip?interval=0.01&count=5&title=Drip")
    urls["big-cl"] = origin.url("/big?size=300000&title=Big%20CL")
    urls["big-close"] = origin.url("/big?size=300000&cl=0&title=Big%20close")
    urls["big-chunked"] = origin.url("/big?size=300000&chunked=1&title=Big%20chunked")
    urls["chunked"] = origin.url("/chunked?title=Chunked%20title&size=20000&chunk=7")
    urls["chunked-1"] = origin.url("/chunked?title=One%20byte%20chunks&size=3000&chunk=1")
    urls["gzip"] = origin.url("/gzip?title=Zipped&size=50000")
    urls["gzip-chunked"] = origin.url("/gzip?title=Zipped%20chunked&size=30000&chunked=1")
    urls["gzip-corrupt"] = origin.url("/gzip?corrupt=1")
    urls["notitle"] = origin.url("/notitle")
    urls["notitle-empty"] = origin.url("/notitle?empty=1")
    for depth in (100, 4000, 4095, 4097, 6000):
        urls["nested-%d" % depth] = origin.url("/nested?depth=%d" % depth)
    urls["huge-header"] = origin.url("/huge-header?kib=20")
    urls["close-after-response"] = origin.url("/close-after-response?title=Stale&delay=0.05")
    for name, (doc, _) in trap_documents().items():
        urls["trap-" + name] = origin.url("/raw?hex=" + doc.hex())
    for name, (doc, _) in attribute_documents().items():
        urls[name] = origin.url(origin.put_response(doc))
    assert len(set(urls.values())) == len(urls)
    return urls


def attribute_documents():
    """name -> (bytes, error_type or None): pages whose title the prefix settles, with
    attributes at and past the pre-scan's bounds after it. The full parse refuses them; the
    fast path, which parses only the prefix, settles their title."""
    head = '<!DOCTYPE html><html><head><title>Attrs</title></head><body>'
    attrs = lambda n, first=0: "".join(" a%x" % i for i in range(first, first + n))  # noqa: E731
    docs = {
        "attrs-256": ("<div%s>x</div>" % attrs(256), None),
        "attrs-257": ("<div%s>x</div>" % attrs(257), "TooManyAttributes"),
        "attrs-end-tag": ("<div>x</div%s>" % attrs(300), "TooManyAttributes"),
        "attrs-body-merged": ("".join("<body%s>" % attrs(100, 100 * i) for i in range(3)),
                              "TooManyAttributes"),
        "attrs-html-twice": (("<html%s>" % attrs(100)) * 2, None),
    }
    return {name: ((head + body + "</body></html>").encode(), et) for name, (body, et) in docs.items()}


def comparable(rec):
    return {k: v for k, v in rec.items() if k not in ("fetched_at", "elapsed_ms")}


# What the pre-scan refuses in a whole page; the title fast path judges only what it parses.
PARSE_REFUSALS = ("TooDeeplyNested", "TooManyAttributes", "UnparsableDocument")


def settled_from_the_head(fast_rec, full_rec):
    """The one way the two paths may differ: the full parse refused the page for something
    after </title>, which the fast path never parses, and the fast path read the title in the
    head. Its record is then the full parse's with the title: ok, the same URL, status, bytes."""
    if full_rec.get("error_type") not in PARSE_REFUSALS or fast_rec["status"] != "ok":
        return False
    drop = ("fetched_at", "elapsed_ms", "status", "stage", "error_type", "error", "title")
    same = {k: v for k, v in fast_rec.items() if k not in drop} == \
        {k: v for k, v in full_rec.items() if k not in drop}
    return same and bool(fast_rec.get("title"))


def test_70_10_title_fast_path_gives_the_records_of_the_full_parse(run_harvestd, origin):
    urls = fast_path_urls(origin)
    fast = run_harvestd(list(urls.values()))
    full = run_harvestd(list(urls.values()), "--title-fast-path=no")
    assert fast.rc == 0 and full.rc == 0
    fast_by, full_by = by_url(fast.records), by_url(full.records)
    assert set(fast_by) == set(full_by) == set(urls.values())
    differ, from_head = [], []
    for name, url in urls.items():
        if settled_from_the_head(fast_by[url], full_by[url]):
            from_head.append(name)
        elif comparable(fast_by[url]) != comparable(full_by[url]):
            differ.append("%s:\n  fast: %r\n  full: %r" % (name, comparable(fast_by[url]), comparable(full_by[url])))
    assert not differ, "records differ with and without the fast path:\n" + "\n".join(differ)
    # The pages refused only for what follows their head: the deep one, the attribute bombs.
    expected = {"nested-4097", "nested-6000"} | {n for n, (_, et) in attribute_documents().items() if et}
    assert expected <= set(from_head), sorted(from_head)
    assert fast_by[urls["nested-4097"]]["title"] == "Nested"
    for name in from_head:
        assert name.startswith(("nested-", "attrs-", "trap-")), name
    # The traps reached the parser and got the title the HTML parsing algorithm gives.
    wrong = []
    for name, (_, title) in trap_documents().items():
        rec = full_by[urls["trap-" + name]]
        got = rec.get("title") if rec["status"] == "ok" else (None if rec.get("error_type") == "MissingTitle" else rec)
        if title is ANY:
            assert rec["status"] == "ok" or rec.get("stage") == "parse", rec
        elif got != title:
            wrong.append("%s: expected %r, got %r" % (name, title, got))
    assert not wrong, "\n".join(wrong)
    # And the ordinary pages are what they should be.
    assert full_by[urls["page-title-5"]]["title"] == "One"
    assert full_by[urls["gzip-chunked"]]["title"] == "Zipped chunked"
    assert full_by[urls["nested-4095"]]["title"] == "Nested"
    assert full_by[urls["nested-4097"]]["error_type"] == "TooDeeplyNested"
    for name, (_, error_type) in attribute_documents().items():
        assert full_by[urls[name]].get("error_type") == error_type, full_by[urls[name]]
    assert full_by[urls["page-size-3000000"]]["error_type"] == "PageTooLarge"
    assert fast.summary["ok"] == full.summary["ok"] + len(from_head)
    assert fast.summary["failed"] == full.summary["failed"] - len(from_head)


# ---------------------------------------------------------------------------- title_equiv (C)


EQUIV_RE = re.compile(r"^checked=(\d+) fast=(\d+) beyond=(\d+) mismatches=(\d+)$")


def run_title_equiv(tool, args, timeout=120):
    done = subprocess.run([tool] + list(args), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, timeout=timeout * SLOWDOWN)
    out = done.stdout.decode("utf-8", "replace")
    err = done.stderr.decode("utf-8", "replace")
    check_sanitizer(err)
    lines = out.splitlines()
    m = EQUIV_RE.match(lines[-1]) if lines else None
    return done.returncode, out, err, (tuple(int(x) for x in m.groups()) if m else None)


# Fragments of random documents: tags that switch the tokenizer or the tree builder, end tags
# of title in every form, comments, foreign content, awkward bytes.
FRAGMENTS = [
    "<title>", "</title>", "<head>", "</head>", "<body>", "</body>", "<html>", "</html>", "<!--", "-->",
    "<!-- x -->", "<script>", "</script>", "<style>", "</style>", "<textarea>", "</textarea>", "<svg>",
    "</svg>", "<math>", "<mi>", "<foreignObject>", "</foreignObject>", "<desc>", "<template>",
    "</template>", "<table>", "<tr>", "<td>", "</table>", "<caption>", "<select>", "<option>",
    "<frameset>", "<frame>", "<noscript>", "</noscript>", "<noframes>", "</noframes>", "<iframe>",
    "</iframe>", "<xmp>", "</xmp>", "<plaintext>", "<p>", "<b>", "</b>", "<i>", "<a>", "</a>", "<div>",
    "</div>", "<meta charset=utf-8>", "<base href=/>", "<link rel=x>", "<!DOCTYPE html>", "</TITLE >",
    '</title x=">">', '<title x=">">', "</title/>", "</titlex>", "<![CDATA[", "]]>", "text", " ", "\n",
    "&amp;", "&lt;/title&gt;", "&#0;", "\x00", "\ufeff", b"\xff", b"\xe2\x82", "Title words", "<object>",
    "</object>", "<image>", "<isindex>", "<html lang=x>", "<br>", "<li>", "<ul>", "<dl><dd>",
    "<ruby><rt>", "<button>", "<form>", "<font color=r>", "<nobr>", "<marquee>", "<applet>", "<noembed>",
    "</noembed>", "<listing>", "<pre>", "<h1>", "<tbody>", "<col>", "<colgroup>", "<input type=hidden>",
    "<svg><title>", "<math><annotation-xml encoding=text/html>", "<script><!--<script>", "--></script>",
    "</", "<", ">", '"', "'", "<?pi?>", "<!x>", "<title><!--", "</title><!--", "<keygen>", "<embed>",
    "<hr>", "<param>", "<dialog>", "<details>", "<summary>", "<rp>", "<rtc>", "<rb>", "<optgroup>",
    "<menu>", "</head><title>", "</p>", "</td>", "</tr>", "</select>", "</frameset>", "</svg></math>",
    "<title>A</title>", "<head><title>H</title>",
    # Control characters, and the private-use characters harvestd carries them as through gumbo.
    "\x1b", "\x01", "\x0b", "\U0010ff00", "\U0010ff1b", "&#x10FF1B;", "&#1113856;",
]
TITLE_ENDS = ["</title>", "</TITLE >", "</title/>", '</title x=">">', "</title\n>"]


def random_documents(rng, n):
    """n documents made of FRAGMENTS; most hold a <title>...</title> somewhere near the start,
    so that the fast path gets to decide on many of them."""
    def pick(lo, hi):
        return [rng.choice(FRAGMENTS) for _ in range(rng.randint(lo, hi))]
    docs = []
    for _ in range(n):
        if rng.random() < 0.3:
            parts = pick(1, 30)
        else:
            parts = pick(0, 4) + ["<title>"] + pick(0, 3) + [rng.choice(TITLE_ENDS)] + pick(0, 25)
        docs.append(b"".join(p if isinstance(p, bytes) else p.encode("utf-8") for p in parts))
    return docs


# Element chains around HV_HTML_MAX_DEPTH (4096): (start tags of one step, levels per step).
DEEP_STEPS = [("<div>", 1), ("<ul><li>", 2), ("<table><tr><td>", 4), ("<svg>" + "<g>", 1),
              ("<template>", 1), ("<ruby><rb><rt>", 2)]


def deep_documents():
    out = {}
    head = '<!DOCTYPE html><html><head><title>Deep</title></head><body>'
    for step, levels in DEEP_STEPS:
        n = 4096 // levels
        for reps in (n - 2, n, n + 1):
            name = "deep-%s-%d" % (re.sub(r"\W+", "", step), reps)
            out[name] = (head + step * reps + "x</body></html>").encode()
    return out


def origin_documents():
    """The HTML bodies the origin serves (see origin.py), by name."""
    out = {}
    for i, title in enumerate(PAGE_TITLES):
        for size in (0, 5000, 200000):
            out["page-%d-%d" % (i, size)] = html_page(title, size)
    out["notitle"] = b"<!DOCTYPE html>\n<html><head></head><body><h1>No title here</h1></body></html>\n"
    out["notitle-empty"] = b"<!DOCTYPE html>\n<html><head><title> \n\t </title></head><body>x</body></html>\n"
    for depth in (100, 4000, 4095, 4096, 4097, 6000):
        out["nested-%d" % depth] = ("<!DOCTYPE html>\n<html><head><title>Nested</title></head><body>"
                                    + "<div>" * depth + "deep" + "</div>" * depth + "</body></html>\n").encode()
    return out


def test_70_11_title_equiv_on_generated_pages(tmp_path):
    tool = tool_path("title_equiv")
    seed = int(os.environ.get("HARVESTD_TEST_SEED") or time.time_ns() % 1000000)
    print("random documents from seed %d (HARVESTD_TEST_SEED=%d replays them)" % (seed, seed))
    docs = {}
    docs.update(("trap-" + k, v[0]) for k, v in trap_documents().items())
    docs.update(origin_documents())
    docs.update(deep_documents())
    docs.update((k, v[0]) for k, v in attribute_documents().items())
    for i, doc in enumerate(random_documents(random.Random(seed), 1500)):
        docs["random-%04d" % i] = doc
    pages = tmp_path / "pages"
    pages.mkdir()
    paths = []
    for i, (name, body) in enumerate(sorted(docs.items())):
        path = pages / ("%05d-%s.html" % (i, name))
        path.write_bytes(body)
        paths.append(str(path))
    listing = tmp_path / "pages.list"
    listing.write_text("# generated pages\n" + "".join(p + "\n" for p in paths))

    rc, out, err, counts = run_title_equiv(tool, ["@" + str(listing)])
    print(out[-5000:], err[-2000:])
    assert counts is not None, "no count line:\n%s\n%s" % (out[-2000:], err[-2000:])
    checked, fast, beyond, mismatches = counts
    assert mismatches == 0 and rc == 0, "fast path and full parse disagree (seed %d):\n%s" % (seed, out[-5000:])
    assert checked == len(paths)
    # Both paths were taken, the fast one on most ordinary pages; the deep pages with a title
    # in their head were settled from the head, which is all that the fast path parses.
    assert 0.1 * checked < fast < checked, counts
    assert beyond >= 4, counts

    # Files named on the command line, mixed with a list; I/O errors are exit status 2.
    rc, out, _, counts = run_title_equiv(tool, [paths[0], "@" + str(listing), paths[1]])
    assert rc == 0 and counts[0] == len(paths) + 2 and counts[3] == 0, out[-500:]
    rc, _, err, _ = run_title_equiv(tool, [str(tmp_path / "missing.html")])
    assert rc == 2 and "missing.html" in err
    assert run_title_equiv(tool, [])[0] == 2


# Pages of the corpus checked (evenly spread over it); HARVESTD_CORPUS_LIMIT=0 checks them all.
CORPUS_LIMIT = int(os.environ.get("HARVESTD_CORPUS_LIMIT") or 600)


def corpus_dir():
    candidates = []
    if os.environ.get("BENCH_DIR"):
        candidates.append(os.path.join(os.environ["BENCH_DIR"], "corpus"))
    if HARVESTD_BIN:
        candidates.append(os.path.join(os.path.dirname(HARVESTD_BIN), "bench", "corpus"))
    candidates.append(os.path.join(REPO, "build", "bench", "corpus"))
    for c in candidates:
        if os.path.isdir(c):
            return c
    return None


def test_70_12_title_equiv_on_the_benchmark_corpus(tmp_path):
    tool = tool_path("title_equiv")
    root = corpus_dir()
    if root is None:
        pytest.skip("no benchmark corpus (build/bench/corpus): `make bench` creates it")
    files = []
    for d, _, names in os.walk(root):
        files.extend(os.path.join(d, n) for n in names if n.endswith((".html", ".htm")))
    if not files:
        pytest.skip("the benchmark corpus at %s holds no .html files" % root)
    files.sort()
    limit = CORPUS_LIMIT if CORPUS_LIMIT > 0 else len(files)
    step = max(1, len(files) // limit)
    sample = files[::step][:limit]
    print("%d of the %d pages under %s" % (len(sample), len(files), root))
    # Split over the CPUs: the full parse of a page costs a few milliseconds.
    parts = max(1, min(os.cpu_count() or 1, 8))
    lists = []
    for k in range(parts):
        path = tmp_path / ("corpus-%d.list" % k)
        path.write_text("".join(p + "\n" for p in sample[k::parts]))
        lists.append(str(path))
    procs = [subprocess.Popen([tool, "@" + p], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE) for p in lists]
    checked = fast = 0
    problems = []
    try:
        for p in procs:
            out, err = p.communicate(timeout=120 * SLOWDOWN)
            out = out.decode("utf-8", "replace")
            err = err.decode("utf-8", "replace")
            check_sanitizer(err)
            last = out.splitlines()[-1] if out.strip() else ""
            m = EQUIV_RE.match(last)
            if p.returncode != 0 or not m or int(m.group(3)) != 0:
                problems.append("exit %d:\n%s\n%s" % (p.returncode, out[-3000:], err[-1000:]))
            if m:
                checked += int(m.group(1))
                fast += int(m.group(2))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    assert not problems, "\n".join(problems)
    assert checked == len(sample)
    assert fast > 0, "the fast path settled no page of the corpus"
