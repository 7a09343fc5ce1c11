"""HTTP behaviour: records of good pages, statuses, redirects, encodings, content types, parse
failures, malformed responses, request headers and output order."""

import re
import time
import urllib.parse

import pytest

from harness import (assert_failed, assert_key_order, assert_ok, by_url, check_single_ok_record,
                     count_by, parse_fetched_at)
from origin import html_page


def page(origin, title, **query):
    query = dict(title=title, **query)
    return origin.url("/page?" + urllib.parse.urlencode(query, quote_via=urllib.parse.quote))


def test_20_01_ok_record_fields(run_harvestd, origin):
    url = origin.url("/page?title=Hello%20World&size=5000")
    before = time.time()
    run = run_harvestd([url])
    after = time.time()
    assert run.rc == 0
    assert len(run.records) == 1
    check_single_ok_record(run.records[0], url, "Hello World", 5000, before, after)
    assert run.summary["ok"] == 1 and run.summary["failed"] == 0 and run.summary["records"] == 1


@pytest.mark.parametrize("raw,expected", [
    ("  Hello \n\t  World  ", "Hello World"),
    ("Caf&eacute; &amp; Cr&egrave;me", "Caf\u00e9 & Cr\u00e8me"),
    ("Gr\u00fc\u00dfe \u6771\u4eac \U0001F600", "Gr\u00fc\u00dfe \u6771\u4eac \U0001F600"),
    ("a<b>c</b>", "a<b>c</b>"),
], ids=["whitespace", "entities", "utf8", "markup-is-text"])
def test_20_02_title_text(run_harvestd, origin, raw, expected):
    run = run_harvestd([page(origin, raw)])
    assert run.rc == 0
    assert_ok(run.records[0], expected)


def test_20_03_first_title_wins(run_harvestd, origin):
    url = origin.url("/page?title=" + urllib.parse.quote("One</title><title>Two"))
    run = run_harvestd([url])
    assert_ok(run.records[0], "One")


@pytest.mark.parametrize("code", [404, 500, 403, 503])
def test_20_04_http_status_failure(run_harvestd, origin, code):
    url = origin.url("/status/%d" % code)
    run = run_harvestd([url])
    assert run.rc == 0
    rec = run.records[0]
    assert_failed(rec, "download", "HttpStatus", "http_%d" % code)
    assert_key_order(rec)
    assert rec["http_status"] == code
    assert run.summary.get("error_type.HttpStatus") == 1


def test_20_05_relative_redirect_chain(run_harvestd, fresh_origin):
    url = fresh_origin.url("/redirect/5")
    run = run_harvestd([url])
    assert run.rc == 0
    rec = run.records[0]
    assert_ok(rec, "final")
    assert rec["requested_url"] == url
    assert rec["url"] == fresh_origin.url("/redirect/0")
    assert rec["redirects"] == 5
    assert rec["http_status"] == 200
    assert [r.path for r in fresh_origin.snapshot()["requests"]] == \
        ["/redirect/%d" % n for n in range(5, -1, -1)]


@pytest.mark.parametrize("code", [301, 302, 303, 307, 308])
def test_20_06_redirect_status_codes(run_harvestd, origin, code):
    target = "page?title=via-%d" % code  # relative to /redir
    url = origin.url("/redir?" + urllib.parse.urlencode({"code": code, "to": target}))
    run = run_harvestd([url])
    rec = run.records[0]
    assert_ok(rec, "via-%d" % code)
    assert rec["redirects"] == 1
    assert rec["url"] == origin.url("/page?title=via-%d" % code)


@pytest.mark.parametrize("form", ["absolute", "scheme-relative", "dot-segments", "query-only"])
def test_20_07_redirect_reference_forms(run_harvestd, origin, form):
    final = "/page?title=" + form
    to = {
        "absolute": origin.url(final),
        "scheme-relative": "//127.0.0.1:%d%s" % (origin.port, final),
        "dot-segments": "./a/b/../../page?title=" + form,
        "query-only": "?code=302&to=" + urllib.parse.quote(final, safe=""),
    }[form]
    url = origin.url("/redir?" + urllib.parse.urlencode({"code": 302, "to": to}))
    run = run_harvestd([url])
    rec = run.records[0]
    assert_ok(rec, form)
    assert rec["url"] == origin.url(final)
    assert rec["redirects"] == (2 if form == "query-only" else 1)


def test_20_08_redirect_limit(run_harvestd, origin):
    at_limit, over = origin.url("/redirect/3"), origin.url("/redirect/4")
    run = run_harvestd([at_limit, over], "--max-redirects", "3")
    assert run.rc == 0
    recs = by_url(run.records)
    assert_ok(recs[at_limit], "final")
    assert recs[at_limit]["redirects"] == 3
    assert_failed(recs[over], "download", "TooManyRedirects")


def test_20_09_default_redirect_limit_is_10(run_harvestd, origin):
    ten, eleven = origin.url("/redirect/10"), origin.url("/redirect/11")
    run = run_harvestd([ten, eleven])
    recs = by_url(run.records)
    assert_ok(recs[ten], "final")
    assert recs[ten]["redirects"] == 10
    assert_failed(recs[eleven], "download", "TooManyRedirects")


def test_20_10_redirect_loop(run_harvestd, fresh_origin):
    url = fresh_origin.url("/loop")
    run = run_harvestd([url], "--max-redirects", "4")
    assert run.rc == 0
    rec = run.records[0]
    assert_failed(rec, "download", "TooManyRedirects")
    # Four redirects followed, the fifth refused: five requests, no more.
    assert len(fresh_origin.requests_to("/loop")) == 5
    assert run.summary.get("error_type.TooManyRedirects") == 1


@pytest.mark.parametrize("ct", ["application/json", "image/png", "text/plain; charset=utf-8",
                                "application/octet-stream"],
                         ids=["json", "png", "text-plain", "octet-stream"])
def test_20_11_unexpected_content_type(run_harvestd, origin, ct):
    url = origin.url("/type?" + urllib.parse.urlencode({"ct": ct}))
    run = run_harvestd([url])
    rec = run.records[0]
    assert_failed(rec, "download", "UnexpectedContentType")
    assert rec.get("http_status", 200) == 200


@pytest.mark.parametrize("ct", ["text/html", "application/xhtml+xml", "Text/HTML; charset=UTF-8",
                                "application/xhtml+xml; charset=utf-8"])
def test_20_12_accepted_content_types(run_harvestd, origin, ct):
    url = origin.url("/type?" + urllib.parse.urlencode({"ct": ct}))
    run = run_harvestd([url])
    rec = run.records[0]
    assert_ok(rec, "Typed")
    assert rec["content_type"].split(";")[0].strip().lower() == ct.split(";")[0].lower()


@pytest.mark.parametrize("chunked", ["0", "1"], ids=["content-length", "chunked"])
def test_20_13_gzip_body_is_decoded(run_harvestd, fresh_origin, chunked):
    url = fresh_origin.url("/gzip?title=Zipped&size=50000&chunked=" + chunked)
    run = run_harvestd([url])
    rec = run.records[0]
    assert_ok(rec, "Zipped")
    assert rec["bytes"] == 50000  # decoded size, not the ~400 bytes on the wire
    req = fresh_origin.requests_to("/gzip")[0]
    assert "gzip" in (req.header("accept-encoding") or "").lower()


def test_20_14_corrupt_gzip_is_a_protocol_error(run_harvestd, origin):
    run = run_harvestd([origin.url("/gzip?title=bad&corrupt=1")])
    assert_failed(run.records[0], "download", "ProtocolError")


@pytest.mark.parametrize("size,chunk", [(200, 1), (20000, 7), (300000, 65536)])
def test_20_15_chunked_body(run_harvestd, origin, size, chunk):
    run = run_harvestd([origin.url("/chunked?title=Chunky&size=%d&chunk=%d" % (size, chunk))])
    rec = run.records[0]
    assert_ok(rec, "Chunky")
    assert rec["bytes"] == len(html_page("Chunky", size))


def test_20_16_close_delimited_body(run_harvestd, origin):
    run = run_harvestd([origin.url("/big?size=300000&cl=0&title=Closing")])
    rec = run.records[0]
    assert_ok(rec, "Closing")
    assert rec["bytes"] == 300000


@pytest.mark.parametrize("path", ["/notitle", "/notitle?empty=1"], ids=["absent", "blank"])
def test_20_17_missing_title(run_harvestd, origin, path):
    run = run_harvestd([origin.url(path)])
    rec = run.records[0]
    assert_failed(rec, "parse", "MissingTitle")
    assert_key_order(rec)
    assert rec.get("http_status") == 200
    assert run.summary.get("error_type.MissingTitle") == 1


def test_20_18_nesting_depth(run_harvestd, origin):
    deep, fine = origin.url("/nested?depth=10000"), origin.url("/nested?depth=1000")
    # A whole parse refuses the deep page; a title-only run parses the head alone, which is
    # fine, and gets its title.
    run = run_harvestd([deep, fine], "--title-fast-path=no")
    recs = by_url(run.records)
    assert_failed(recs[deep], "parse", "TooDeeplyNested")
    assert_ok(recs[fine], "Nested")
    run = run_harvestd([deep, fine])
    recs = by_url(run.records)
    assert_ok(recs[deep], "Nested")
    assert_ok(recs[fine], "Nested")


@pytest.mark.parametrize("path", ["/garbage", "/huge-header?kib=70", "/bad-content-length"])
def test_20_19_malformed_response_is_a_protocol_error(run_harvestd, origin, path):
    run = run_harvestd([origin.url(path)])
    assert_failed(run.records[0], "download", "ProtocolError")


def test_20_20_large_but_allowed_headers(run_harvestd, origin):
    run = run_harvestd([origin.url("/huge-header?kib=32")])
    assert_ok(run.records[0], "Huge header")


def test_20_21_request_headers(run_harvestd, fresh_origin):
    url = fresh_origin.url("/page?title=hdr&marker=default-ua")
    run = run_harvestd([url])
    assert_ok(run.records[0], "hdr")
    (req,) = fresh_origin.find_request("marker=default-ua")
    assert req.method == "GET"
    assert req.target == "/page?title=hdr&marker=default-ua"
    assert req.version == "HTTP/1.1"
    assert req.header_all("host") == ["127.0.0.1:%d" % fresh_origin.port]
    assert re.fullmatch(r"harvestd/\d+\.\d+\.\d+\S*", req.header("user-agent") or ""), req.headers
    assert "gzip" in (req.header("accept-encoding") or "").lower()


def test_20_22_custom_user_agent(run_harvestd, fresh_origin):
    agent = "ExampleBot/2.5 (+http://127.0.0.1/bot)"
    url = fresh_origin.url("/redirect/2")
    run = run_harvestd([url], "--user-agent", agent)
    assert_ok(run.records[0], "final")
    reqs = fresh_origin.snapshot()["requests"]
    assert len(reqs) == 3
    assert [r.header("user-agent") for r in reqs] == [agent] * 3  # redirects too


def test_20_23_records_in_completion_order_and_streamed(harvestd, fresh_origin):
    held = fresh_origin.url("/hold?key=order&title=held")
    fast = fresh_origin.url("/page?title=fast")
    proc = harvestd.start([held, fast], "--flush-ms", "50", "--concurrency", "4")
    # The fast page's record is in the file while the first URL is still being answered.
    proc.poll_until(lambda: len(proc.complete_lines()) >= 1, 10, "the first record")
    assert proc.popen.poll() is None, "the run should still wait for the held page"
    fresh_origin.release("order")
    run = proc.wait()
    assert run.rc == 0
    assert [r["requested_url"] for r in run.records] == [fast, held]
    assert_ok(run.records[1], "held")


def test_20_24_mixed_run_shape_and_summary(run_harvestd, origin, closed_port):
    urls = [
        origin.url("/page?title=m1"), origin.url("/page?title=m2&size=3000"),
        origin.url("/redirect/2"), origin.url("/status/404"), origin.url("/notitle"),
        origin.url("/type?ct=image/png"), "http://127.0.0.1:%d/" % closed_port, "not a url",
        "ftp://x/", origin.url("/gzip?title=m3"),
    ]
    run = run_harvestd(urls)
    assert run.rc == 0
    assert len(run.records) == len(urls)
    for rec in run.records:
        assert_key_order(rec)
        assert rec["status"] == ("ok" if "stage" not in rec else "failed"), rec
        if rec["status"] == "failed":
            assert rec["stage"] in ("input", "download", "parse")
            assert list(rec)[-3:] == ["stage", "error_type", "error"], rec
        if "fetched_at" in rec:
            parse_fetched_at(rec["fetched_at"])
    s = run.summary
    statuses = count_by(run.records, "status")
    assert s["records"] == len(urls)
    assert s["ok"] == statuses.get("ok", 0) == 4
    assert s["failed"] == statuses.get("failed", 0) == 6
    types = count_by([r for r in run.records if r["status"] == "failed"], "error_type")
    reported = {k[len("error_type."):]: v for k, v in s.items() if k.startswith("error_type.")}
    assert reported == types
    assert types == {"HttpStatus": 1, "MissingTitle": 1, "UnexpectedContentType": 1,
                     "ConnectError": 1, "InvalidUrl": 1, "UnsupportedScheme": 1}
    for key in ("elapsed_s", "pages_per_s", "hwm_jobs", "hwm_pages", "hwm_page_bytes",
                "hwm_results", "read_pauses", "connections_opened", "connections_reused"):
        assert key in s, "summary lacks %s: %r" % (key, s)
        assert isinstance(s[key], (int, float)) and s[key] >= 0, (key, s[key])
    assert s["connections_opened"] >= 1


HTML_CASES = [
    ("uppercase", "<HTML><HEAD><TITLE>Upper Case</TITLE></HEAD><BODY>x</BODY></HTML>", "Upper Case"),
    ("attributes", '<html><head><title lang="en" id=t>With attrs</title></head></html>', "With attrs"),
    ("comment-first", "<html><head><!-- <title>commented</title> --><title>real</title></head></html>",
     "real"),
    ("script-first", '<html><head><script>var s = "<title>scripted</title>";</script>'
                     "<title>real</title></head></html>", "real"),
    ("no-head", "<title>bare</title><p>text", "bare"),
    ("bom", "\ufeff<!DOCTYPE html><title>bom</title>", "bom"),
    ("json-escapes", '<title>He said "hi" \\ back\tslash /x/</title>', 'He said "hi" \\ back slash /x/'),
    ("char-refs", "<title>&#x41;&#66;&lt;&gt;&nbsp;z</title>", "AB<>\u00a0z"),
]


@pytest.mark.parametrize("body,title", [c[1:] for c in HTML_CASES], ids=[c[0] for c in HTML_CASES])
def test_20_25_title_extraction(run_harvestd, origin, body, title):
    url = origin.url("/raw?" + urllib.parse.urlencode({"body": body}, quote_via=urllib.parse.quote))
    run = run_harvestd([url])
    assert_ok(run.records[0], title)
    assert run.records[0]["bytes"] == len(body.encode("utf-8"))


def test_20_26_invalid_utf8_in_title(run_harvestd, origin):
    body = b"<html><head><title>\xff\xfeABC\xc3 end</title></head><body>\x80</body></html>"
    run = run_harvestd([origin.url("/raw?hex=" + body.hex())])
    rec = run.records[0]
    assert_ok(rec)
    # The harness already checked that the line is valid UTF-8.
    assert "ABC" in rec["title"] and rec["title"].endswith("end"), rec


def test_20_27_empty_body_has_no_title(run_harvestd, origin):
    run = run_harvestd([origin.url("/raw?body=")])
    rec = run.records[0]
    assert_failed(rec, "parse", "MissingTitle")
    assert rec.get("bytes", 0) == 0


def test_20_28_max_redirects_zero(run_harvestd, origin):
    direct, moved = origin.url("/page?title=direct"), origin.url("/redirect/1")
    run = run_harvestd([direct, moved], "--max-redirects", "0")
    recs = by_url(run.records)
    assert_ok(recs[direct], "direct")
    assert_failed(recs[moved], "download", "TooManyRedirects")


def test_20_29_debug_logging(run_harvestd, origin):
    urls = [origin.url("/page?title=dbg"), origin.url("/redirect/2"), origin.url("/status/404"),
            "not a url"]
    run = run_harvestd(urls, "--log-level", "debug")
    assert run.rc == 0
    assert len(run.records) == 4
    assert run.summary["ok"] == 2
    assert len(run.stderr.splitlines()) > 1, "debug logging printed nothing but the summary"


# ---------------------------------------------------------------------------- configured request headers


def header_config(tmp_path, lines):
    path = tmp_path / "headers.conf"
    path.write_text("# request headers\n" + "\n".join(lines) + "\n", encoding="utf-8")
    return str(path)


def test_20_30_configured_headers_reach_the_origin(run_harvestd, fresh_origin, tmp_path):
    """Global headers from the file and the command line go with every request, redirect hops
    to the same host included; a configured Accept-Encoding takes the default's place, an empty
    value sends nothing (not even the default), and the command line's replaces the file's."""
    conf = header_config(tmp_path, ["header = Accept-Language: en-GB, en;q=0.8",
                                    "header = Cookie: consent=yes; lang=en",
                                    "header = X-Trace: from-the-file",
                                    "header = Accept:"])
    run = run_harvestd([fresh_origin.url("/redirect/1")], "-c", conf,
                       "--header", "Accept-Encoding: identity", "--header=x-trace: from-the-command-line")
    assert_ok(run.records[0], "final")
    reqs = fresh_origin.snapshot()["requests"]
    assert [r.path for r in reqs] == ["/redirect/1", "/redirect/0"]
    for r in reqs:
        assert r.header_all("accept-language") == ["en-GB, en;q=0.8"], r.headers
        assert r.header_all("cookie") == ["consent=yes; lang=en"], r.headers
        assert r.header_all("x-trace") == ["from-the-command-line"], r.headers
        assert r.header_all("accept-encoding") == ["identity"], r.headers
        assert r.header_all("accept") == [], r.headers
        assert r.header_all("host") == ["127.0.0.1:%d" % fresh_origin.port]
        assert re.fullmatch(r"harvestd/\S+", r.header("user-agent") or ""), r.headers


def test_20_31_host_section_headers_go_to_that_host_only(run_harvestd, fresh_origin, tmp_path):
    """[host "localhost"] adds its own header and replaces a global one of the same name for
    localhost alone; 127.0.0.1 (the same server under another name) gets the global ones."""
    o = fresh_origin
    conf = header_config(tmp_path, ["header = Accept-Language: en",
                                    "header = X-Tenant: everyone",
                                    '[host "localhost"]',
                                    "header = X-Api-Key: k-local",
                                    "header = x-tenant: local"])
    local = "http://localhost:%d/page?title=local" % o.port
    other = o.url("/page?title=other")
    run = run_harvestd([local, other], "-c", conf)
    assert all(r["status"] == "ok" for r in run.records), run.records
    (lr,) = o.find_request("title=local")
    (orq,) = o.find_request("title=other")
    assert lr.header("host") == "localhost:%d" % o.port
    assert (lr.header_all("x-api-key"), lr.header_all("x-tenant"), lr.header("accept-language")) == \
        (["k-local"], ["local"], "en"), lr.headers
    assert (orq.header_all("x-api-key"), orq.header_all("x-tenant"), orq.header("accept-language")) == \
        ([], ["everyone"], "en"), orq.headers


def test_20_32_cross_host_redirect_drops_host_headers_and_credentials(run_harvestd, fresh_origin,
                                                                      tmp_path):
    """127.0.0.1 -> localhost -> 127.0.0.1: the hop to localhost carries neither 127.0.0.1's
    [host] header nor the global Authorization and Cookie, but the other global headers and
    localhost's own Cookie; back at the first origin the credentials are sent again."""
    o = fresh_origin
    back = o.url("/page?title=back")
    via_local = "http://localhost:%d/redir?%s" % (o.port, urllib.parse.urlencode({"to": back}))
    start = o.url("/redir?" + urllib.parse.urlencode({"to": via_local}))
    conf = header_config(tmp_path, ["header = Authorization: Bearer global-s3cret",
                                    "header = Cookie: consent=yes",
                                    "header = Accept-Language: en",
                                    '[host "127.0.0.1"]',
                                    "header = X-Site: first",
                                    '[host "localhost"]',
                                    "header = Cookie: local=1"])
    run = run_harvestd([start], "-c", conf)
    assert_ok(run.records[0], "back")
    assert run.records[0]["redirects"] == 2
    first, hop, last = o.snapshot()["requests"]
    assert (first.header("host"), hop.header("host"), last.header("host")) == \
        ("127.0.0.1:%d" % o.port, "localhost:%d" % o.port, "127.0.0.1:%d" % o.port)
    for r in (first, last):
        assert r.header_all("authorization") == ["Bearer global-s3cret"], r.headers
        assert r.header_all("cookie") == ["consent=yes"], r.headers
        assert r.header_all("x-site") == ["first"], r.headers
    assert hop.header_all("authorization") == [], hop.headers
    assert hop.header_all("cookie") == ["local=1"], hop.headers
    assert hop.header_all("x-site") == [], hop.headers
    assert [r.header("accept-language") for r in (first, hop, last)] == ["en"] * 3
    assert "s3cret" not in run.stderr


def test_20_33_credentials_stay_with_the_first_origin_port(run_harvestd, fresh_origin, other_origin,
                                                         tmp_path):
    """Another port of the same host is another origin: the global Authorization and Cookie
    stay behind, the other global headers go on."""
    to = other_origin.url("/page?title=there")
    start = fresh_origin.url("/redir?" + urllib.parse.urlencode({"to": to}))
    run = run_harvestd([start], "--header", "Authorization: Basic czNjcmV0", "--header", "Cookie: c=1",
                       "--header", "X-Trace: t")
    assert_ok(run.records[0], "there")
    (first,) = fresh_origin.snapshot()["requests"]
    (there,) = other_origin.find_request("title=there")
    assert (first.header("authorization"), first.header("cookie"), first.header("x-trace")) == \
        ("Basic czNjcmV0", "c=1", "t")
    assert (there.header("authorization"), there.header("cookie"), there.header("x-trace")) == \
        (None, None, "t")
