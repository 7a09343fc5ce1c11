"""Input lines, output files and the command line."""

import pytest

from harness import assert_failed, assert_key_order, assert_ok, by_url, count_by

LONG_LINE = "http://127.0.0.1/" + "a" * (9000 - len("http://127.0.0.1/"))

INVALID_LINES = [
    # id, line as written to the file, expected error_type, requested_url if it is printable
    ("ftp", b"ftp://x/", "UnsupportedScheme", "ftp://x/"),
    ("not-a-url", b"not a url", "InvalidUrl", "not a url"),
    ("inner-space", b"http://exa mple.com/", "InvalidUrl", "http://exa mple.com/"),
    ("control-char", b"http://127.0.0.1/a\x01b", "InvalidUrl", "http://127.0.0.1/a\x01b"),
    ("invalid-utf8", b"http://127.0.0.1/\xff\xfe\xc3", "InvalidUrl", None),
    ("9000-bytes", LONG_LINE.encode(), "InvalidUrl", None),
    ("scheme-relative", b"//127.0.0.1/x", "InvalidUrl", "//127.0.0.1/x"),
    ("path-only", b"/relative/path", "InvalidUrl", "/relative/path"),
    ("empty-host", b"http://", "InvalidUrl", "http://"),
    ("bad-port", b"http://127.0.0.1:99999/", "InvalidUrl", "http://127.0.0.1:99999/"),
    # A NUL byte is shown as U+FFFD, like invalid UTF-8: the line is not cut there.
    ("nul", b"http://127.0.0.1/a\x00b", "InvalidUrl", "http://127.0.0.1/a\ufffdb"),
    ("leading-nul", b"\x00http://127.0.0.1/", "InvalidUrl", "\ufffdhttp://127.0.0.1/"),
]


@pytest.mark.parametrize("line,error_type,requested", [c[1:] for c in INVALID_LINES],
                         ids=[c[0] for c in INVALID_LINES])
def test_10_01_invalid_line_yields_one_input_record(run_harvestd, line, error_type, requested):
    run = run_harvestd([line])
    assert run.rc == 0
    assert len(run.records) == 1, run.records
    rec = run.records[0]
    assert_failed(rec, "input", error_type)
    assert_key_order(rec)
    assert rec["requested_url"], rec
    if requested is not None:
        assert rec["requested_url"] == requested
    for key in ("url", "http_status", "bytes"):
        assert key not in rec, rec
    assert run.summary["failed"] == 1 and run.summary["ok"] == 0
    assert run.summary.get("error_type." + error_type) == 1, run.summary


def test_10_02_all_invalid_lines_together(run_harvestd):
    run = run_harvestd([c[1] for c in INVALID_LINES])
    assert run.rc == 0
    assert len(run.records) == len(INVALID_LINES)
    assert all(r["stage"] == "input" for r in run.records)
    expected = count_by([{"e": c[2]} for c in INVALID_LINES], "e")
    assert count_by(run.records, "error_type") == expected
    long_recs = [r for r in run.records if r["requested_url"].startswith("http://127.0.0.1/aaaaaaaa")]
    assert len(long_recs) == 1


def test_10_03_blank_and_comment_lines_yield_nothing(run_harvestd, origin):
    a, b = origin.url("/page?title=A"), origin.url("/page?title=B")
    lines = ["", "   ", "\t", "# a comment", "#" + a, a, "", "#", b, "   \t  "]
    run = run_harvestd(lines)
    assert run.rc == 0
    recs = by_url(run.records)
    assert set(recs) == {a, b}
    assert_ok(recs[a], "A")
    assert_ok(recs[b], "B")


def test_10_04_crlf_and_surrounding_whitespace_are_trimmed(run_harvestd, origin):
    a, b, c = (origin.url("/page?title=" + t) for t in "XYZ")
    data = ("  %s \r\n\t%s\t\r\n\r\n# comment\r\n%s\r" % (a, b, c)).encode()
    run = run_harvestd(data)
    assert run.rc == 0
    recs = by_url(run.records)
    assert set(recs) == {a, b, c}
    for url, title in ((a, "X"), (b, "Y"), (c, "Z")):
        assert_ok(recs[url], title)
        assert recs[url]["url"] == url


def test_10_05_last_line_without_newline(run_harvestd, origin):
    a, b = origin.url("/page?title=first"), origin.url("/page?title=last")
    run = run_harvestd(("%s\n%s" % (a, b)).encode())
    assert run.rc == 0
    recs = by_url(run.records)
    assert set(recs) == {a, b}
    assert_ok(recs[b], "last")


def test_10_06_duplicate_lines_each_yield_a_record(run_harvestd, fresh_origin):
    url = fresh_origin.url("/page?title=dup")
    run = run_harvestd([url] * 5 + ["not a url"] * 3)
    assert run.rc == 0
    assert len(run.records) == 8
    oks = [r for r in run.records if r["requested_url"] == url]
    assert len(oks) == 5
    for r in oks:
        assert_ok(r, "dup")
    bad = [r for r in run.records if r["requested_url"] == "not a url"]
    assert len(bad) == 3 and all(r["error_type"] == "InvalidUrl" for r in bad)
    # Duplicates are fetched, not answered from a cache.
    assert len(fresh_origin.requests_to("/page")) == 5


def test_10_07_https_url_is_fetched_not_refused_at_input(run_harvestd, closed_port):
    """An https URL passes the input stage: to a port nothing listens on it fails at stage
    download as ConnectError connection_refused, like an http one, before any handshake."""
    url = "https://127.0.0.1:%d/page?title=tls" % closed_port
    run = run_harvestd([url])
    assert run.rc == 0
    assert len(run.records) == 1
    rec = run.records[0]
    assert_failed(rec, "download", "ConnectError", "connection_refused")
    assert_key_order(rec)
    assert rec["requested_url"] == url and rec["url"] == url, rec
    assert "http_status" not in rec, rec
    assert run.summary.get("error_type.ConnectError") == 1, run.summary
    assert (run.summary["tls_handshakes"], run.summary["tls_failures"]) == (0, 0), run.summary


def test_10_08_url_length_limit_is_8192_bytes(run_harvestd, origin):
    base = origin.url("/page?title=long&pad=")
    at_limit = base + "a" * (8192 - len(base))
    over = base + "b" * (8193 - len(base))
    assert len(at_limit) == 8192 and len(over) == 8193
    run = run_harvestd([at_limit, over])
    assert run.rc == 0
    assert len(run.records) == 2
    recs = {r["requested_url"][len(base)]: r for r in run.records}
    assert_ok(recs["a"], "long")
    assert recs["a"]["requested_url"] == at_limit
    assert_failed(recs["b"], "input", "InvalidUrl")


def test_10_09_megabyte_line_does_not_derail_the_reader(run_harvestd, origin):
    after = origin.url("/page?title=after")
    huge = b"http://127.0.0.1/" + b"x" * (1 << 20)
    run = run_harvestd([huge, after, huge[:20000]])
    assert run.rc == 0
    assert len(run.records) == 3
    ok = [r for r in run.records if r["status"] == "ok"]
    assert len(ok) == 1 and ok[0]["requested_url"] == after
    bad = [r for r in run.records if r["status"] == "failed"]
    assert all(r["stage"] == "input" and r["error_type"] == "InvalidUrl" for r in bad), bad


def test_10_10_empty_input(run_harvestd):
    run = run_harvestd([])
    assert run.rc == 0
    assert run.records == []
    assert run.summary["records"] == 0 and run.summary["ok"] == 0 and run.summary["failed"] == 0


def test_10_11_existing_output_file_is_refused(harvestd, origin, tmp_path):
    out = tmp_path / "precious.jsonl"
    out.write_bytes(b"precious\n")
    run = harvestd.run([origin.url("/page?title=refused-run")], out=str(out), parse=False)
    assert run.rc == 2
    assert str(out) in run.stderr or out.name in run.stderr, run.stderr
    assert out.read_bytes() == b"precious\n"
    assert run.stdout == b""
    assert origin.find_request("refused-run") == []


def test_10_12_output_to_stdout(run_harvestd, origin):
    urls = [origin.url("/page?title=s%d" % i) for i in range(3)] + ["not a url"]
    run = run_harvestd(urls, out="-")
    assert run.rc == 0
    recs = by_url(run.records)
    assert set(recs) == set(urls)
    for i in range(3):
        assert_ok(recs[urls[i]], "s%d" % i)
    # stdout holds records only; the summary goes to stderr.
    assert b"harvestd: summary" not in run.stdout
    assert run.summary["records"] == 4 and run.summary["ok"] == 3 and run.summary["failed"] == 1


@pytest.mark.parametrize("args", [
    ["--no-such-option", "1"],
    ["--concurrency", "many"],
    ["--max-bytes", "12q"],
    ["--read-timeout", "soon"],
    ["--log-level", "loud"],
    ["--per-host"],
], ids=["unknown-option", "bad-number", "bad-size", "bad-duration", "bad-log-level", "missing-value"])
def test_10_13_usage_errors_exit_2(harvestd, origin, tmp_path, args):
    out = tmp_path / "never.jsonl"
    run = harvestd.run([origin.url("/page?title=usage")], *args, out=str(out), parse=False,
                       fast=False)
    assert run.rc == 2, "expected a usage error for %r" % args
    assert run.stderr.strip(), "a usage error says why on stderr"
    assert not out.exists() or out.read_bytes() == b""
    assert run.stdout == b""


def test_10_14_missing_input_file(harvestd, tmp_path):
    run = harvestd.run(None, input_path=str(tmp_path / "no-such-file.txt"), parse=False)
    assert run.rc != 0
    assert "no-such-file.txt" in run.stderr


def test_10_15_input_that_cannot_be_read_is_a_usage_error_and_creates_nothing(harvestd, tmp_path):
    """An input that cannot be read (here a directory, which opens but fails at its first
    read) is refused with exit 2 before any output exists, so that the corrected rerun is not
    refused for an empty output."""
    bad = tmp_path / "urls.d"
    bad.mkdir()
    out = tmp_path / "out.jsonl"
    run = harvestd.run(None, input_path=str(bad), out=str(out), parse=False)
    assert run.rc == 2, run.stderr
    assert str(bad) in run.stderr, run.stderr
    assert not out.exists(), "an output was created for an input that cannot be read"


def test_10_16_byte_order_mark_before_the_first_line_is_not_part_of_it(run_harvestd, origin):
    """A list saved with a UTF-8 byte order mark: line 1 is its URL, not `InvalidUrl` with an
    invisible U+FEFF in front. A BOM anywhere else is left as it is (it is not a mark there)."""
    first = origin.url("/page?title=bom-first")
    second = origin.url("/page?title=bom-second")
    run = run_harvestd(b"\xef\xbb\xbf" + first.encode() + b"\n\xef\xbb\xbf" + second.encode() + b"\n")
    assert run.rc == 0
    recs = run.records
    by = {r["requested_url"]: r for r in run.records}
    assert first in by, [r["requested_url"] for r in run.records]
    assert_ok(by[first], "bom-first")
    others = [r for r in run.records if r["requested_url"] != first]
    assert len(others) == 1 and others[0]["status"] == "failed", recs
    assert others[0]["requested_url"] == "\ufeff" + second, others[0]
