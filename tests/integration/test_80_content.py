"""Content fidelity: charsets (BOM, Content-Type, <meta> prescan, sniffing, WHATWG labels),
content codings (gzip, deflate, br, zstd; decompression bombs, corrupt and truncated streams),
extraction rules (--extract, --extract-all, --links, [rules "NAME"] sections, the daemon's
"#! rules=NAME" line), invalid selectors, and the parser's limits on pages with rules.

Pages are served by the origin's /stored endpoint (Origin.put_response): exact bytes with any
Content-Type and extra headers (Content-Encoding), of any size.

Brotli: Python's standard library has none, so a small C helper (BROTLI_HELPER_SOURCE) is
compiled once per module with `cc ... -lbrotlienc -lbrotlidec` (package libbrotli-dev). It
compresses standard input, or with -d decodes it and says by its exit status whether the stream
is complete (0), corrupt (2) or truncated (3): the tests use that to check their own premises.
The brotli tests are skipped when there is no C compiler or no brotli library."""

import gzip
import os
import subprocess
import time
import urllib.parse
import zlib

import pytest

from harness import (MIB, SANITIZER, SLOWDOWN, assert_failed, assert_key_order, assert_ok,
                     by_url, check_batch, wait_complete)

HTML = "text/html"


def serve(origin, body, content_type=HTML, headers=()):
    """URL of a response with exactly `body` (bytes or str) on the origin."""
    return origin.url(origin.put_response(body, content_type, headers))


def doc(title, head=b"", body=b"x"):
    """An HTML document (bytes) whose <title> holds the bytes `title`."""
    return (b"<!DOCTYPE html>\n<html><head>" + head + b"<title>" + title + b"</title></head><body>"
            + body + b"</body></html>\n")


def requests_for(origin, url):
    """Requests the origin received for exactly the target of `url`."""
    target = url.split(str(origin.port), 1)[1]
    return [r for r in origin.find_request(target) if r.target == target]


def one_ok(run):
    assert run.rc == 0, run.stderr[-2000:]
    assert len(run.records) == 1, run.records
    rec = run.records[0]
    assert_ok(rec)
    assert_key_order(rec)
    return rec


# ---------------------------------------------------------------------------- charsets

JA = "\u65e5\u672c\u8a9e\u306e\u30da\u30fc\u30b8 \uff5e\u2460 C:\\dir"   # 日本語のページ ～① C:\dir
ZH = "\u4e2d\u6587\u7f51\u9875 \u5011"                                  # 中文网页 們 (們: GBK only)
W1252_BYTES = b"\x80 5 \x93quoted\x94 caf\xe9"
W1252_TEXT = "\u20ac 5 \u201cquoted\u201d caf\u00e9"

# (id, body, Content-Type, expected title, expected charset)
CHARSET_CASES = [
    # 0x80 is the euro sign and 0x93/0x94 curly quotes in windows-1252 (C1 controls in latin-1).
    ("windows-1252", doc(W1252_BYTES), HTML + "; charset=windows-1252", W1252_TEXT, "windows-1252"),
    ("latin1-label", doc(W1252_BYTES), HTML + "; charset=latin1", W1252_TEXT, "windows-1252"),
    ("iso-8859-1-quoted", doc(W1252_BYTES), HTML + '; charset="ISO-8859-1"', W1252_TEXT,
     "windows-1252"),
    # CP932: 0x8160 is U+FF5E (not U+301C), 0x8740 is the NEC circled one, 0x5C a backslash.
    ("shift_jis", doc(JA.encode("cp932")), HTML + "; charset=Shift_JIS", JA, "shift_jis"),
    # gb2312 decodes as GBK: 們 (0x8283) is outside GB 2312.
    ("gb2312-as-gbk", doc(ZH.encode("gbk")), HTML + "; charset=gb2312", ZH, "gbk"),
    ("gbk", doc(ZH.encode("gbk")), HTML + "; charset=GBK", ZH, "gbk"),
    # A BOM beats the header.
    ("utf-8-bom", b"\xef\xbb\xbf" + doc("caf\u00e9 \u20ac".encode("utf-8")),
     HTML + "; charset=windows-1252", "caf\u00e9 \u20ac", "utf-8"),
    ("utf-16le-bom", ("\ufeff" + doc(b"@").decode().replace("@", "caf\u00e9 \u6771\u4eac \U0001F600"))
     .encode("utf-16-le"), HTML, "caf\u00e9 \u6771\u4eac \U0001F600", "utf-16le"),
    ("utf-16be-bom", ("\ufeff" + doc(b"@").decode().replace("@", "caf\u00e9 \u6771\u4eac \U0001F600"))
     .encode("utf-16-be"), HTML + "; charset=utf-8", "caf\u00e9 \u6771\u4eac \U0001F600", "utf-16be"),
    # The header beats <meta>: read as Shift_JIS, 0xE9 would swallow the next byte.
    ("header-beats-meta", doc(b"caf\xe9", head=b'<meta charset="shift_jis">'),
     HTML + "; charset=windows-1252", "caf\u00e9", "windows-1252"),
    ("meta-charset", doc(JA.encode("cp932"), head=b'<meta charset="Shift_JIS">'), HTML, JA,
     "shift_jis"),
    ("meta-http-equiv", doc(ZH.encode("gbk"),
                            head=b'<meta http-equiv="Content-Type" content="text/html; charset=gbk">'),
     HTML, ZH, "gbk"),
    # An unknown label in the header is ignored: the prescan decides.
    ("unknown-header-label", doc(ZH.encode("gbk"), head=b'<meta charset="gb2312">'),
     HTML + "; charset=x-no-such-charset", ZH, "gbk"),
    # A <meta> beyond the first 1024 bytes is not seen: the page is sniffed as valid UTF-8.
    ("meta-after-1024-bytes", doc("caf\u00e9".encode("utf-8"),
                                  head=b"<!--" + b"-" * 1100 + b'--><meta charset="windows-1252">'),
     HTML, "caf\u00e9", "utf-8"),
    ("sniffed-utf-8", doc("Gr\u00fc\u00dfe \u6771\u4eac".encode("utf-8")), HTML,
     "Gr\u00fc\u00dfe \u6771\u4eac", "utf-8"),
    ("sniffed-windows-1252", doc(W1252_BYTES), HTML, W1252_TEXT, "windows-1252"),
]


@pytest.mark.parametrize("body,ct,title,charset", [c[1:] for c in CHARSET_CASES],
                         ids=[c[0] for c in CHARSET_CASES])
def test_80_01_charset_decoding(run_harvestd, origin, body, ct, title, charset):
    run = run_harvestd([serve(origin, body, ct)])
    rec = one_ok(run)
    assert rec["title"] == title, rec
    assert rec.get("charset") == charset, rec
    assert rec["content_type"] == ct, rec
    assert list(rec).index("charset") == list(rec).index("content_type") + 1, rec


# WHATWG labels and the encoding each names (a label is matched case-insensitively).
LABELS = {
    "windows-1252": ["latin1", "ISO-8859-1", "iso_8859-1", "l1", "us-ascii", "ascii", "cp1252",
                     "x-cp1252", "cp819"],
    "shift_jis": ["shift_jis", "sjis", "ms_kanji", "windows-31j", "x-sjis", "csshiftjis", "ms932"],
    "gbk": ["gbk", "gb2312", "chinese", "x-gbk", "csgb2312", "csiso58gb231280", "iso-ir-58", "GB_2312-80"],
    "utf-8": ["utf8", "unicode-1-1-utf-8", "UTF-8"],
}
LABEL_PAGES = {
    "windows-1252": (doc(W1252_BYTES), W1252_TEXT),
    "shift_jis": (doc(JA.encode("cp932")), JA),
    "gbk": (doc(ZH.encode("gbk")), ZH),
    "utf-8": (doc(ZH.encode("utf-8")), ZH),
}


def test_80_02_whatwg_labels(run_harvestd, origin):
    expect = {}
    for charset, labels in LABELS.items():
        body, title = LABEL_PAGES[charset]
        for label in labels:
            expect[serve(origin, body, HTML + "; charset=" + label)] = (label, charset, title)
    run = run_harvestd(list(expect))
    assert run.rc == 0
    recs = by_url(run.records)
    wrong = []
    for url, (label, charset, title) in expect.items():
        rec = recs[url]
        if rec["status"] != "ok" or rec.get("charset") != charset or rec.get("title") != title:
            wrong.append((label, charset, rec.get("charset"), rec.get("title"), rec.get("error")))
    assert not wrong, "labels decoded wrongly (label, expected, got charset, title, error): %r" % wrong


def test_80_03_invalid_bytes_become_replacement_characters(run_harvestd, origin):
    # Shift_JIS: 0x81 then 0x20 (not a trail byte: the space is kept), a lone 0xFF, and a lead
    # byte cut by the end of the page.
    sjis = doc("\u65e5\u672c".encode("cp932") + b"\x81\x20\xff" + "\u8a9e".encode("cp932"),
               body=b"\x81\x7f\xfd body") + b"\x88"
    # UTF-16LE: an unpaired surrogate in the title and an odd byte at the end.
    utf16 = ("\ufeff" + doc(b"A@B").decode()).encode("utf-16-le").replace(
        "@".encode("utf-16-le"), b"\x00\xd8") + b"\x41"
    # UTF-8 declared, with bytes that are not UTF-8.
    utf8 = doc(b"ok\xc3 \xe2\x82 \xffend")
    urls = {serve(origin, sjis, HTML + "; charset=shift_jis"): ("\u65e5\u672c\ufffd \ufffd\u8a9e", "shift_jis"),
            serve(origin, utf16, HTML): ("A\ufffdB", "utf-16le"),
            serve(origin, utf8, HTML + "; charset=utf-8"): ("ok\ufffd \ufffd \ufffdend", "utf-8")}
    run = run_harvestd(list(urls))
    assert run.rc == 0
    recs = by_url(run.records)
    for url, (title, charset) in urls.items():
        rec = recs[url]
        assert_ok(rec)
        assert rec.get("charset") == charset, rec
        assert rec["title"] == title, rec
    assert run.summary["ok"] == 3 and run.summary["failed"] == 0


# ---------------------------------------------------------------------------- compression

BROTLI_HELPER_SOURCE = r"""
#include <brotli/decode.h>
#include <brotli/encode.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* brotli-helper [QUALITY]: compress stdin to stdout. brotli-helper -d: decode stdin to stdout;
 * exit 0 when the stream is complete, 2 when it is corrupt, 3 when it ends too early. */
int main(int argc, char **argv)
{
    size_t cap = 1 << 20, n = 0, r;
    unsigned char *in = malloc(cap);
    while (in != NULL && (r = fread(in + n, 1, cap - n, stdin)) > 0) {
        n += r;
        if (n == cap)
            in = realloc(in, cap *= 2);
    }
    if (in == NULL)
        return 1;
    if (argc > 1 && strcmp(argv[1], "-d") == 0) {
        BrotliDecoderState *s = BrotliDecoderCreateInstance(NULL, NULL, NULL);
        const uint8_t *next_in = in;
        size_t avail_in = n, total = 0;
        static unsigned char buf[65536];
        for (;;) {
            uint8_t *next_out = buf;
            size_t avail_out = sizeof(buf);
            BrotliDecoderResult res = BrotliDecoderDecompressStream(s, &avail_in, &next_in,
                                                                    &avail_out, &next_out, &total);
            fwrite(buf, 1, sizeof(buf) - avail_out, stdout);
            if (res == BROTLI_DECODER_RESULT_SUCCESS)
                return 0;
            if (res == BROTLI_DECODER_RESULT_ERROR)
                return 2;
            if (res == BROTLI_DECODER_RESULT_NEEDS_MORE_INPUT)
                return 3;
        }
    }
    int quality = argc > 1 ? atoi(argv[1]) : BROTLI_DEFAULT_QUALITY;
    size_t outn = BrotliEncoderMaxCompressedSize(n) + 1024;
    unsigned char *out = malloc(outn);
    if (out == NULL || !BrotliEncoderCompress(quality, BROTLI_DEFAULT_WINDOW, BROTLI_MODE_GENERIC,
                                              n, in, &outn, out))
        return 1;
    fwrite(out, 1, outn, stdout);
    return 0;
}
"""


class Brotli:
    def __init__(self, exe):
        self.exe = exe

    def compress(self, data, quality=5):
        done = subprocess.run([self.exe, str(quality)], input=data, stdout=subprocess.PIPE,
                              check=True, timeout=60)
        return done.stdout

    def check(self, data):
        """(exit status of the reference decoder: 0 complete, 2 corrupt, 3 truncated, output)"""
        done = subprocess.run([self.exe, "-d"], input=data, stdout=subprocess.PIPE, timeout=60)
        return done.returncode, done.stdout


@pytest.fixture(scope="module")
def brotli(tmp_path_factory):
    cc = os.environ.get("CC") or "cc"
    d = tmp_path_factory.mktemp("brotli")
    src, exe = str(d / "brotli-helper.c"), str(d / "brotli-helper")
    with open(src, "w") as f:
        f.write(BROTLI_HELPER_SOURCE)
    try:
        done = subprocess.run([cc, "-O2", "-o", exe, src, "-lbrotlienc", "-lbrotlidec"],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=120)
    except (OSError, subprocess.TimeoutExpired) as e:
        pytest.skip("no C compiler (%s) to build the brotli test helper: %s" % (cc, e))
    if done.returncode != 0:
        pytest.skip("cannot build the brotli test helper (is libbrotli-dev installed?): %s"
                    % done.stdout.decode("utf-8", "replace")[-1000:])
    b = Brotli(exe)
    rc, out = b.check(b.compress(b"self-test " * 100))
    assert (rc, out) == (0, b"self-test " * 100), "the brotli helper does not round-trip"
    return b


def raw_deflate(data):
    c = zlib.compressobj(9, zlib.DEFLATED, -15)
    return c.compress(data) + c.flush()


PAGE = doc(b"Compressed caf\xc3\xa9", body=b"lorem ipsum dolor sit amet " * 2000)


def zstd_compress(data, level=3):
    """`data` as one zstd frame, by Debian's zstd command (`make deps` installs it)."""
    import subprocess
    return subprocess.run(["zstd", "-q", "-c", "-%d" % level], input=data, check=True,
                          stdout=subprocess.PIPE).stdout


def encoded(coding, data, brotli=None):
    if coding == "zstd":
        return zstd_compress(data)
    if coding == "gzip":
        return gzip.compress(data, mtime=0)
    if coding == "deflate":
        return zlib.compress(data)
    if coding == "deflate-raw":
        return raw_deflate(data)
    return brotli.compress(data)


@pytest.mark.parametrize("coding", ["gzip", "deflate", "deflate-raw", "br", "zstd"])
def test_80_10_content_codings(run_harvestd, fresh_origin, coding, request):
    br = request.getfixturevalue("brotli") if coding == "br" else None
    wire = encoded(coding, PAGE, br)
    assert len(wire) < len(PAGE) // 10
    header = "Content-Encoding: " + ("deflate" if coding == "deflate-raw" else coding)
    url = serve(fresh_origin, wire, HTML, [header])
    rec = one_ok(run_harvestd([url]))
    assert rec["title"] == "Compressed caf\u00e9", rec
    assert rec["bytes"] == len(PAGE), "bytes is the decoded size (%d on the wire): %r" % (len(wire), rec)
    assert rec["charset"] == "utf-8", rec
    req = requests_for(fresh_origin, url)[0]
    offered = {t.split(";")[0].strip().lower() for t in (req.header("accept-encoding") or "").split(",")}
    assert {"gzip", "deflate", "br", "zstd"} <= offered, req.headers


def test_80_11_compressed_page_in_a_legacy_charset(run_harvestd, origin, brotli):
    """Content decoding comes first, then the charset (here from the <meta> prescan)."""
    body = doc(JA.encode("cp932"), head=b'<meta charset="shift_jis">', body=b"x" * 5000)
    urls = [serve(origin, brotli.compress(body), HTML, ["Content-Encoding: br"]),
            serve(origin, gzip.compress(body), HTML, ["Content-Encoding: gzip"])]
    run = run_harvestd(urls)
    assert run.rc == 0
    for rec in run.records:
        assert_ok(rec, JA)
        assert rec["charset"] == "shift_jis" and rec["bytes"] == len(body), rec


@pytest.mark.parametrize("coding", ["gzip", "br", "zstd"])
def test_80_12_decompression_bomb_stops_at_the_limit(run_harvestd, origin, coding, request):
    # 64 MiB of zeros after a title: well under 512 KiB in any coding.
    bomb = doc(b"bomb", body=bytes(64 * MIB))
    if coding == "gzip":
        wire = gzip.compress(bomb, compresslevel=1, mtime=0)
    elif coding == "zstd":
        wire = zstd_compress(bomb, 1)
    else:
        wire = request.getfixturevalue("brotli").compress(bomb, quality=1)
    assert len(wire) < 512 * 1024
    bomb_url = serve(origin, wire, HTML, ["Content-Encoding: " + coding])
    fine = serve(origin, encoded("gzip", PAGE), HTML, ["Content-Encoding: gzip"])
    run = run_harvestd([bomb_url, fine], "--max-bytes", "1m")
    assert run.rc == 0
    recs = by_url(run.records)
    assert_failed(recs[bomb_url], "download", "PageTooLarge", "response_exceeds_1_mib")
    assert_ok(recs[fine], "Compressed caf\u00e9")
    assert run.elapsed < 5 * SLOWDOWN, "%.1fs for a bomb cut at 1 MiB" % run.elapsed
    if not SANITIZER:
        # Inflating the whole bomb would take more than 64 MiB.
        assert run.maxrss_kib < 40 * 1024, "peak RSS %d KiB: the bomb was not stopped early" % run.maxrss_kib


def zlib_verdict(data, wbits):
    """What zlib makes of a whole stream: "complete", "corrupt" or "truncated"."""
    d = zlib.decompressobj(wbits)
    try:
        d.decompress(data)
        d.flush()
    except zlib.error:
        return "corrupt"
    return "complete" if d.eof else "truncated"


def _gzip_bad_crc():
    data = bytearray(gzip.compress(PAGE, mtime=0))
    data[-8] ^= 0xFF   # first byte of the CRC-32 in the trailer
    return bytes(data)


def _gzip_garbled():
    data = bytearray(gzip.compress(PAGE, mtime=0))
    data[12:40] = b"\xff" * 28   # the deflate data right after the 10-byte header
    return bytes(data)


GZ = gzip.compress(PAGE, mtime=0)
ZL = zlib.compress(PAGE)

# (id, coding header, body or a function of the brotli helper, expected error)
BROKEN_STREAMS = [
    ("gzip-cut-in-half", "gzip", GZ[:len(GZ) // 2], "gzip_truncated"),
    ("gzip-no-trailer", "gzip", GZ[:-8], "gzip_truncated"),
    ("gzip-not-gzip", "gzip", b"this is not gzip data, it only claims to be" * 10, "gzip_corrupt"),
    ("gzip-garbled", "gzip", _gzip_garbled(), "gzip_corrupt"),
    ("gzip-bad-crc", "gzip", _gzip_bad_crc(), "gzip_corrupt"),
    ("deflate-not-deflate", "deflate", b"\xff\xff\xff\xff this is not deflate" * 10, "deflate_corrupt"),
    ("deflate-cut", "deflate", ZL[:len(ZL) // 2], "deflate_"),
    ("brotli-corrupt", "br", lambda b: b"this is not brotli data" * 10, "brotli_corrupt"),
    ("brotli-cut", "br", lambda b: b.compress(PAGE)[:60], "brotli_truncated"),
    ("zstd-corrupt", "zstd", b"this is not zstd data" * 10, "zstd_corrupt"),
    ("zstd-cut", "zstd", lambda b: zstd_compress(PAGE)[:60], "zstd_truncated"),
]


@pytest.mark.parametrize("coding,body,error", [c[1:] for c in BROKEN_STREAMS],
                         ids=[c[0] for c in BROKEN_STREAMS])
def test_80_13_corrupt_and_truncated_streams(run_harvestd, origin, coding, body, error, request):
    if coding == "zstd":
        # The premise: the zstd command sees the same fault.
        import subprocess
        data = body(None) if callable(body) else body
        check = subprocess.run(["zstd", "-q", "-d", "-c"], input=data, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE)
        assert check.returncode != 0, "zstd decodes it"
        body = data
    elif coding != "br":
        # The premise: zlib sees the same fault (deflate: with and without the zlib wrapper).
        expected = "truncated" if "truncated" in error or error == "deflate_" else "corrupt"
        modes = (31,) if coding == "gzip" else (15, -15) if expected == "corrupt" else (15,)
        verdicts = {zlib_verdict(body, w) for w in modes}
        assert verdicts == {expected}, verdicts
    if callable(body):
        br = request.getfixturevalue("brotli")
        body = body(br)
        # The premise: the reference decoder sees the same fault.
        assert br.check(body)[0] == (2 if error == "brotli_corrupt" else 3)
    url = serve(origin, body, HTML, ["Content-Encoding: " + coding])
    good = serve(origin, GZ, HTML, ["Content-Encoding: gzip"])
    run = run_harvestd([url, good])
    assert run.rc == 0
    recs = by_url(run.records)
    rec = recs[url]
    assert_failed(rec, "download", "ProtocolError")
    if error.endswith("_"):
        assert rec["error"].startswith(error), rec
    else:
        assert rec["error"] == error, rec
    assert_ok(recs[good], "Compressed caf\u00e9")


# ---------------------------------------------------------------------------- extraction

CATALOGUE = """<!DOCTYPE html>
<html><head><title>All products | Books to Scrape</title></head><body>
<h1>All products</h1>
<p class="price_color">\u00a30.00</p>
<ol class="row">
<li><article class="product_pod">
  <div class="image_container"><a href="catalogue/a-light-in-the-attic_1000/"><img src="media/a.jpg" alt="A Light in the Attic"></a></div>
  <h3><a href="catalogue/a-light-in-the-attic_1000/index.html" title="A Light in the Attic">A Light in the ...</a></h3>
  <div class="product_price"><p class="price_color">\u00a351.77</p><p class="instock availability">In stock</p></div>
</article></li>
<li><article class="product_pod">
  <h3><a href="catalogue/tipping-the-velvet_999/index.html" title="Tipping the Velvet">Tipping the Velvet</a></h3>
  <div class="product_price"><p class="price_color">\u00a353.74</p></div>
</article></li>
<li><article class="product_pod featured">
  <h3><a href="catalogue/soumission_998/index.html" title="Soumission &amp; Co">Soumission</a></h3>
  <div class="product_price"><p class="price_color">
     \u00a350.10
  </p><p class="price_color">\u00a399.99</p></div>
</article></li>
</ol>
<article class="product"><h3><a title="Not a product pod">x</a></h3><p class="price_color">\u00a31.00</p></article>
</body></html>
"""

CATALOGUE_PRODUCTS = [
    {"title": "A Light in the Attic", "price": "\u00a351.77"},
    {"title": "Tipping the Velvet", "price": "\u00a353.74"},
    {"title": "Soumission & Co", "price": "\u00a350.10"},
]

CATALOGUE_ARGS = ["--extract", "products.item=article.product_pod",
                  "--extract", "products.title=h3 a @title",
                  "--extract", "products.price=p.price_color"]


@pytest.mark.parametrize("form", ["utf-8", "windows-1252-gzip"])
def test_80_20_catalogue_end_to_end(run_harvestd, origin, form):
    if form == "utf-8":
        url = serve(origin, CATALOGUE, HTML + "; charset=utf-8")
    else:
        # The same page in windows-1252 (the pound sign is the byte 0xA3), gzipped.
        url = serve(origin, gzip.compress(CATALOGUE.encode("windows-1252")), HTML + "; charset=latin1",
                    ["Content-Encoding: gzip"])
    run = run_harvestd([url], *CATALOGUE_ARGS)
    rec = one_ok(run)
    assert rec["title"] == "All products | Books to Scrape", rec
    assert rec["fields"] == {"products": CATALOGUE_PRODUCTS}, rec
    assert list(rec).index("fields") == list(rec).index("title") + 1, rec


def test_80_20b_fields_without_a_title(run_harvestd, origin):
    # The rules took something: the page is ok, without a title (a MissingTitle failure would
    # send it back to be fetched on every resume). Nothing taken and no title: MissingTitle.
    found = serve(origin, "<p class=price>12</p>")
    empty = serve(origin, "<p>nothing here</p>")
    run = run_harvestd([found, empty], "--extract", "price=p.price", "--extract-all", "n=b")
    assert run.rc == 0
    recs = by_url(run.records)
    assert recs[found]["status"] == "ok", recs[found]
    assert "title" not in recs[found]
    assert recs[found]["fields"] == {"price": "12", "n": []}, recs[found]
    assert_failed(recs[empty], "parse", "MissingTitle", "no_title")


ATTR_PAGE = """<!DOCTYPE html>
<html lang="fr"><head><title>Attributes</title></head><body>
<div id="box" data-n="1"><p class="note">Hello <b>bold</b> &amp; more</p></div>
<p class="note">second note</p>
<img class="cover" src="media/cover.jpg" alt="The cover">
<a class="more" href="/next?page=2&amp;x=1">next</a>
</body></html>
"""


def test_80_21_attribute_html_and_first_match(run_harvestd, origin):
    url = serve(origin, ATTR_PAGE)
    run = run_harvestd([url], "--extract", "lang=html @lang", "--extract", "src=img.cover @src",
                       "--extract", "alt=img @alt", "--extract", "href=a.more @href",
                       "--extract", "box=#box ::html", "--extract", "note=p.note",
                       "--extract", "inner=#box > p ::html")
    rec = one_ok(run)
    assert rec["fields"] == {
        "lang": "fr",
        "src": "media/cover.jpg",            # attributes as written, not resolved
        "alt": "The cover",
        "href": "/next?page=2&x=1",          # but character references are decoded
        "box": '<div id="box" data-n="1"><p class="note">Hello <b>bold</b> &amp; more</p></div>',
        "note": "Hello bold & more",         # the first match, as text
        "inner": '<p class="note">Hello <b>bold</b> &amp; more</p>',
    }, rec


SERIALISED_PAGE = """<!DOCTYPE html><html><head><title>Serialised</title></head><body>
<div id="mis"><p><b>one<p>two</b></p></div>
<div id="stray"></p>after</div>
<div id="esc" title='a&amp;b "q" &nbsp;'>1 < 2 &amp; 3&nbsp;<br/><IMG SRC=x><!-- c --></div>
<div id="raw"><script>if (a < b && c) {}</script><noscript><i>1 > 0</i></noscript></div>
<svg viewbox="0 0 1 1"><clippath id=c><rect width=1 /></clippath></svg>
<template id="t"><b>t</b></template>
</body></html>
"""


def test_80_21b_html_is_serialised_from_the_tree(run_harvestd, origin):
    """::html gives what browsers' outerHTML gives, whatever the source spelled."""
    url = serve(origin, SERIALISED_PAGE)
    run = run_harvestd([url], "--extract-all", "b=#mis b ::html", "--extract", "stray=#stray ::html",
                       "--extract", "esc=#esc ::html", "--extract", "raw=#raw ::html",
                       "--extract", "svg=svg ::html", "--extract", "t=template ::html")
    rec = one_ok(run)
    assert rec["fields"] == {
        "b": ["<b>one</b>", "<b>two</b>"],
        "stray": '<div id="stray"><p></p>after</div>',
        "esc": '<div id="esc" title="a&amp;b &quot;q&quot; &nbsp;">1 &lt; 2 &amp; 3&nbsp;<br>'
               '<img src="x"><!-- c --></div>',
        "raw": '<div id="raw"><script>if (a < b && c) {}</script>'
               '<noscript><i>1 &gt; 0</i></noscript></div>',
        "svg": '<svg viewBox="0 0 1 1"><clipPath id="c"><rect width="1"></rect></clipPath></svg>',
        "t": '<template id="t"><b>t</b></template>',
    }, rec


@pytest.mark.parametrize("charset", ["utf-8", "windows-1252"])
def test_80_21c_control_characters_are_kept(run_harvestd, origin, charset):
    """C0 controls (ESC in vim's help pages) stay in the title, text, attributes and ::html, as
    browsers keep them; NUL in the title is U+FFFD, as the HTML standard says."""
    page = ('<!DOCTYPE html><html><head><title>help \x1b[1m caf\u00e9\x00</title></head><body>'
            '<pre title="\x1b\x01">\x1b[1mbold\x1b[0m &#x10FF1B;</pre></body></html>\n')
    url = serve(origin, page.encode(charset), HTML + "; charset=" + charset)
    run = run_harvestd([url], "--extract", "text=pre", "--extract", "attr=pre @title",
                       "--extract", "html=pre ::html")
    rec = one_ok(run)
    assert rec["charset"] == charset
    assert rec["title"] == "help \x1b[1m caf\u00e9\ufffd", rec
    assert rec["fields"] == {
        "text": "\x1b[1mbold\x1b[0m \U0010ff1b",
        "attr": "\x1b\x01",
        "html": '<pre title="\x1b\x01">\x1b[1mbold\x1b[0m \U0010ff1b</pre>',
    }, rec


def test_80_22_extract_all(run_harvestd, origin):
    page = """<!DOCTYPE html><html><head><title>Lists</title></head><body>
    <h2>One</h2><section><h2>Two
      <small>and a half</small></h2></section>
    <ul class="tags"><li>red</li><li> green </li><li><a href="#">blue</a></li></ul>
    <ul><li>not a tag</li></ul>
    </body></html>"""
    url = serve(origin, page)
    run = run_harvestd([url], "--extract-all", "headings=h2", "--extract-all", "tags=ul.tags li",
                       "--extract-all", "none=table td", "--extract-all", "both=li, h2")
    rec = one_ok(run)
    f = rec["fields"]
    assert f["headings"] == ["One", "Two and a half"], rec
    assert f["tags"] == ["red", "green", "blue"], rec
    assert f["none"] == [], rec
    # A group's matches come in document order, each element once.
    assert f["both"] == ["One", "Two and a half", "red", "green", "blue", "not a tag"], rec


SELECTOR_PAGE = """<!DOCTYPE html><html lang="en"><head><title>Selectors</title></head><body>
<div id="d1" class="box big" data-x="alpha beta"><p id="p1" class="lead">one</p><p id="p2" lang="en-GB">two</p><span id="s1"><p id="p3" title="prefix-mid-suffix">three</p></span></div>
<div id="d2" class="box"><a id="a1" href="https://x.example/file.pdf">pdf</a><a id="a2" href="/local.html">local</a></div>
<ul id="u1"><li id="l1">1</li><li id="l2">2</li><li id="l3">3</li></ul>
</body></html>"""

# (selector, ids of its matches in document order)
SELECTORS = [
    ("p", ["p1", "p2", "p3"]),
    ("#d2 > *", ["a1", "a2"]),
    (".box", ["d1", "d2"]),
    ("div.box.big", ["d1"]),
    ("#p2", ["p2"]),
    ("[data-x]", ["d1"]),
    ("p[lang]", ["p2"]),
    ("[class=box]", ["d2"]),
    ("[class~=box]", ["d1", "d2"]),
    ("[data-x~=beta]", ["d1"]),
    ("[href^=https]", ["a1"]),
    ('[href$=".pdf"]', ["a1"]),
    ("[title*=mid]", ["p3"]),
    ("div p", ["p1", "p2", "p3"]),
    ("div > p", ["p1", "p2"]),
    ("body > div > span > p", ["p3"]),
    ("li:first-child", ["l1"]),
    ("p:first-child", ["p1", "p3"]),
    ("li:nth-child(2)", ["l2"]),
    ("ul > :nth-child(3)", ["l3"]),
    ("#l3, #p1", ["p1", "l3"]),
    ("h1, #nothing", []),
]


def test_80_23_selector_subset(run_harvestd, origin):
    url = serve(origin, SELECTOR_PAGE)
    args = []
    for n, (sel, _) in enumerate(SELECTORS):
        args += ["--extract-all", "s%d=%s @id" % (n, sel)]
    rec = one_ok(run_harvestd([url], *args))
    wrong = [(sel, ids, rec["fields"].get("s%d" % n)) for n, (sel, ids) in enumerate(SELECTORS)
             if rec["fields"].get("s%d" % n) != ids]
    assert not wrong, "(selector, expected ids, got): %r" % wrong


LINKS_PAGE = """<!DOCTYPE html><html><head><title>Links</title><base href="/docs/v2/">
<link rel="stylesheet" href="style.css"></head><body>
<a href="page.html">relative</a> <a href="../up.html">parent</a> <a href="/root.html">root</a>
<a href="//other.example/x">scheme-relative</a> <a href="https://abs.example/a?b=1">absolute</a>
<a href="mailto:someone@example.com">mail</a> <a href="javascript:void(0)">js</a>
<a href="ftp://ftp.example/f">ftp</a> <a href="?q=1">query</a> <a name="anchor">no href</a>
<a href="  spaced.html  ">spaces</a> <map><area href="area.html"></map>
<div><p><a href="deep/x.html">nested</a></p></div>
</body></html>"""


def test_80_24_links(run_harvestd, origin):
    base = "http://127.0.0.1:%d" % origin.port
    with_base = serve(origin, LINKS_PAGE)
    # Without <base>, links resolve against the final URL (after a redirect), here told apart
    # by query-only and empty references.
    target = origin.put_response("<html><head><title>NoBase</title></head><body>"
                                 "<a href='sib.html'>a</a><a href='?q=2'>b</a><a href=''>c</a>"
                                 "<a href='http://127.0.0.1:%d/abs'>d</a></body></html>" % origin.port)
    redirected = origin.url("/redir?code=302&to=" + urllib.parse.quote(target))
    run = run_harvestd([with_base, redirected], "--links")
    assert run.rc == 0
    recs = by_url(run.records)
    for r in recs.values():
        assert_ok(r)
        assert_key_order(r)
    assert recs[with_base]["fields"] == {"links": [
        base + "/docs/v2/page.html",
        base + "/docs/up.html",
        base + "/root.html",
        "http://other.example/x",
        "https://abs.example/a?b=1",
        base + "/docs/v2/?q=1",
        base + "/docs/v2/spaced.html",
        base + "/docs/v2/deep/x.html",
    ]}, recs[with_base]
    final = origin.url(target)
    assert recs[redirected]["url"] == final, recs[redirected]
    assert recs[redirected]["fields"] == {"links": [
        base + "/sib.html", base + "/stored?q=2", final, base + "/abs"]}, recs[redirected]


RULES_CONFIG = """# rule sets for the content tests
default_rules = headline

[rules "books"]
products.item = article.product_pod
products.title = h3 a @title
products.price = p.price_color
first = h1
headings[] = h3 a
where = @links

[rules "headline"]
headline = h1 ::html
"""


def write_text(path, text):
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
    return str(path)


def test_80_25_rules_section_from_the_config(run_harvestd, origin, tmp_path):
    conf = write_text(tmp_path / "rules.conf", RULES_CONFIG)
    url = serve(origin, CATALOGUE)
    links = [origin.url("/catalogue/" + p)
             for p in ("a-light-in-the-attic_1000/", "a-light-in-the-attic_1000/index.html",
                       "tipping-the-velvet_999/index.html", "soumission_998/index.html")]
    books = one_ok(run_harvestd([url], "-c", conf, "--rules", "books"))
    assert books["fields"] == {
        "products": CATALOGUE_PRODUCTS,
        "first": "All products",
        "headings": ["A Light in the ...", "Tipping the Velvet", "Soumission", "x"],
        "where": links,
    }, books
    # Without --rules, the config's default_rules applies.
    default = one_ok(run_harvestd([url], "-c", conf))
    assert default["fields"] == {"headline": "<h1>All products</h1>"}, default


def test_80_26_unknown_rule_set_for_once(run_harvestd, fresh_origin, tmp_path):
    conf = write_text(tmp_path / "rules.conf", RULES_CONFIG)
    run = run_harvestd([fresh_origin.url("/page?title=never")], "-c", conf, "--rules", "nope",
                       parse=False)
    assert run.rc == 2, run.stderr
    assert "nope" in run.stderr, run.stderr
    assert fresh_origin.snapshot()["requests_served"] == 0


def test_80_26b_once_honours_the_rule_set_the_list_names(run_harvestd, fresh_origin, tmp_path):
    """`#! rules=NAME` on a list's first line picks the set for --once as it does for a spool
    file (before, --once -c ignored it and used default_rules); --rules still wins, and an
    unknown name is a usage error naming the file's line 1, before anything is fetched."""
    conf = write_text(tmp_path / "rules.conf", RULES_CONFIG)
    url = serve(fresh_origin, CATALOGUE)
    named = one_ok(run_harvestd(["#! rules=books", url], "-c", conf))
    assert named["fields"]["first"] == "All products", named
    assert "headline" not in named["fields"], named
    with_bom = one_ok(run_harvestd(b"\xef\xbb\xbf#! rules=books\n" + url.encode() + b"\n", "-c", conf))
    assert with_bom["fields"] == named["fields"]
    cli = one_ok(run_harvestd(["#! rules=books", url], "-c", conf, "--rules", "headline"))
    assert cli["fields"] == {"headline": "<h1>All products</h1>"}, cli
    served = fresh_origin.snapshot()["requests_served"]
    out = tmp_path / "never.jsonl"
    run = run_harvestd(["#! rules=bokos", url], "-c", conf, out=str(out), parse=False)
    assert run.rc == 2, run.stderr
    assert ":1: unknown rule set 'bokos'" in run.stderr, run.stderr
    assert not out.exists()
    assert fresh_origin.snapshot()["requests_served"] == served


# (selector, the position of the fault, counted in characters from 1, and what is expected)
BAD_SELECTORS = [
    ("div[id", "position 7: expected ']'"),
    ("div[foo=bar", "position 12: expected ']'"),
    ('a[title="h\u00e9llo"', "position 16: expected ']'"),
    ("div >> p", "position 6:"),
    ("p,,a", "position 3:"),
    ("ul >", "position 5:"),
    ("li:nth-child(", "position 14:"),
]


@pytest.mark.parametrize("selector,message", BAD_SELECTORS, ids=[s for s, _ in BAD_SELECTORS])
def test_80_27_invalid_selector_on_the_command_line(run_harvestd, fresh_origin, selector, message):
    run = run_harvestd([fresh_origin.url("/page?title=never")], "--extract", "f=" + selector,
                       parse=False)
    assert run.rc == 2, run.stderr
    assert message in run.stderr, "expected %r in:\n%s" % (message, run.stderr)
    assert fresh_origin.snapshot()["requests_served"] == 0


@pytest.mark.parametrize("mode", ["once", "check-config"])
def test_80_28_invalid_selector_in_the_config(harvestd, run_harvestd, fresh_origin, tmp_path, spool,
                                              mode):
    lines = RULES_CONFIG.splitlines()
    bad_line = lines.index("first = h1") + 1
    lines[bad_line - 1] = "first = h1[id"
    text = "\n".join(lines) + "\n"
    if mode == "check-config":
        text = "spool_dir = %s\n" % spool.root + text
        bad_line += 1
    conf = write_text(tmp_path / "bad-rules.conf", text)
    if mode == "once":
        run = run_harvestd([fresh_origin.url("/page?title=never")], "-c", conf, "--rules", "books",
                           parse=False)
        rc, stderr = run.rc, run.stderr
        assert fresh_origin.snapshot()["requests_served"] == 0
    else:
        done = harvestd.command("--check-config", "-c", conf)
        rc, stderr = done.returncode, done.stderr
    assert rc == 2, stderr
    assert "%s:%d:" % (conf, bad_line) in stderr, stderr
    assert "position 6: expected ']'" in stderr, stderr
    assert "configuration OK" not in stderr


def test_80_29_daemon_rules_line(harvestd, spool, origin):
    config = harvestd.daemon_config(spool.root, {"default_rules": "headline"})
    with open(config, "a", encoding="utf-8") as f:
        f.write("\n" + RULES_CONFIG.split("default_rules = headline", 1)[1])
    d = harvestd.start_daemon(config)
    d.wait_ready()
    url = serve(origin, CATALOGUE)
    never = serve(origin, CATALOGUE)   # only in the rejected file
    books = spool.drop("books.txt", [b"#! rules=books", url])
    plain = spool.drop("plain.txt", ["# a comment, not a rules line", url])
    spool.drop("unknown.txt", [b"#! rules=nope", never])
    wait_complete(d, spool, ["books.txt", "plain.txt"], timeout=10)
    d.poll_until(lambda: "unknown.txt.reason" in spool.files("rejected"), 5, "unknown.txt rejected")

    rec = check_batch(spool, "books.txt", books)[0]
    assert_ok(rec, "All products | Books to Scrape")
    assert rec["fields"]["products"] == CATALOGUE_PRODUCTS, rec
    assert set(rec["fields"]) == {"products", "first", "headings", "where"}, rec
    rec = check_batch(spool, "plain.txt", plain)[0]
    assert rec["fields"] == {"headline": "<h1>All products</h1>"}, rec

    assert spool.files("rejected") == ["unknown.txt", "unknown.txt.reason"]
    with open(spool.path("rejected", "unknown.txt.reason"), encoding="utf-8") as f:
        reason = f.read()
    assert "nope" in reason and "rule" in reason, reason
    assert not os.path.exists(spool.path("out", "unknown.txt.jsonl"))
    assert not spool.has_summary("unknown.txt")
    assert requests_for(origin, never) == [], "a URL of the rejected file was fetched"
    d.poll_until(lambda: len(d.events("rejected")) == 1, 2, "the rejected event")
    assert d.events("rejected")[0].get("file") == "unknown.txt", d.events("rejected")
    assert d.stop() == 0


# ---------------------------------------------------------------------------- limits with rules

# How a page is parsed: the title fast path (gumbo reads the head only), the whole page for the
# title, or the whole page for rules. The pre-scan judges what gumbo is about to read, so a page
# refused for its body still has its title in the first mode.
PARSE_MODES = {"title-fast-path": [], "title-full-parse": ["--title-fast-path=no"],
               "with-rules": ["--extract", "first=div"]}


@pytest.mark.parametrize("rules", [False, True, "full"], ids=["title-only", "with-rules", "title-full-parse"])
def test_80_30_deep_nesting_fails_promptly(run_harvestd, origin, rules):
    deep = origin.url("/nested?depth=100000")   # 1.1 MB of nested <div>s
    fine = origin.url("/nested?depth=1000")
    others = [origin.url("/page?title=beside%d" % i) for i in range(5)]
    args = ["--extract-all", "divs=div div", "--extract", "first=div > div:first-child ::html",
            "--links"] if rules is True else ["--title-fast-path=no"] if rules == "full" else []
    run = run_harvestd([deep, fine] + others, *args)
    assert run.rc == 0
    recs = by_url(run.records)
    assert len(recs) == 7
    if rules is False:
        assert_ok(recs[deep], "Nested")   # its head alone was parsed
    else:
        assert_failed(recs[deep], "parse", "TooDeeplyNested")
    assert_ok(recs[fine], "Nested")
    for i, u in enumerate(others):
        assert_ok(recs[u], "beside%d" % i)
    if rules is True:
        assert recs[fine]["fields"]["divs"] == ["deep"] * 999, recs[fine]["fields"]["divs"][:3]
    assert run.elapsed < 5 * SLOWDOWN, "the run took %.1fs" % run.elapsed


def test_80_31_fifty_thousand_matches(run_harvestd, origin):
    items = "".join('<b class=m>%05d</b>' % i for i in range(50000))
    head = "<!DOCTYPE html><html><head><title>Many</title></head><body><div>"
    tail = "</div></body></html>\n"
    filler = MIB - len(head) - len(items) - len(tail) - len("<!---->")
    assert filler > 0
    page = (head + items + "<!--" + "f" * filler + "-->" + tail).encode()
    assert len(page) == MIB
    big = serve(origin, page)
    others = [origin.url("/page?title=other%d&size=20000" % i) for i in range(8)]
    started = time.monotonic()
    run = run_harvestd([big] + others, "--extract-all", "m=b.m")
    wall = time.monotonic() - started
    assert run.rc == 0
    recs = by_url(run.records)
    rec = recs[big]
    assert_ok(rec, "Many")
    assert rec["bytes"] == MIB
    assert rec["fields"]["m"] == ["%05d" % i for i in range(50000)]
    for i, u in enumerate(others):
        assert_ok(recs[u], "other%d" % i)
        assert recs[u]["fields"] == {"m": []}, recs[u]
    assert wall < 5 * SLOWDOWN, "the run took %.1fs" % wall


# ---------------------------------------------------------------------------- pre-scan refusals

def refused_page(body):
    return ("<!DOCTYPE html><html><head><title>Refused</title></head><body>" + body
            + "</body></html>\n").encode()


def refused_early(body):
    """`body` before the only </title> of the page: inside what the fast path parses."""
    return ("<!DOCTYPE html><html><head></head><body>" + body + "<title>Late</title>"
            + "</body></html>\n").encode()


REOPENED_BODY = ("<p>" + "".join("<b id=%d>" % i for i in range(200))
                 + "</p><p>x" * 2000)

# (id, body, error_type, error): each refusal of the pre-scan names the bound it met.
# (`None` for the error: the page-dependent bound of reopened elements, computed below.)
PRESCAN_REFUSALS = [
    ("nesting", "<div>" * 5000, "TooDeeplyNested", "nesting_exceeds_4096"),
    ("table-cells", "<table><tr><td>" * 300 + "x", "TooDeeplyNested",
     "table_cells_nested_beyond_256"),
    ("templates", "<template>" * 300 + "x", "TooDeeplyNested", "templates_nested_beyond_256"),
    ("objects", "<object>" * 300 + "x", "TooDeeplyNested", "objects_nested_beyond_256"),
    ("formatting-open", "".join("<b id=%d>" % i for i in range(300)) + "x", "TooDeeplyNested",
     "formatting_elements_open_beyond_256"),
    ("formatting-reopened", REOPENED_BODY, "TooDeeplyNested", None),
    ("depth-sum", "<div>" * 4000 + "<br>" * 35000, "TooDeeplyNested",
     "depth_sum_exceeds_134217728"),
    ("svg-select", "<table><svg><select><title><select><td>", "UnparsableDocument",
     "document_known_to_crash_the_parser"),
    ("svg-cdata-in-table", "<table><svg><desc><![CDATA[ ]]> ", "UnparsableDocument",
     "document_known_to_crash_the_parser"),
]


@pytest.mark.parametrize("mode", list(PARSE_MODES))
def test_80_32_prescan_refusals_say_what_they_refused(run_harvestd, origin, mode):
    urls = {name: serve(origin, refused_page(body)) for name, body, _, _ in PRESCAN_REFUSALS}
    # The same shapes before </title>: gumbo would read them on every path.
    early = {name: serve(origin, refused_early(body)) for name, body, _, _ in PRESCAN_REFUSALS}
    fine = origin.url("/page?title=fine")
    run = run_harvestd(list(urls.values()) + list(early.values()) + [fine], *PARSE_MODES[mode])
    assert run.rc == 0, run.stderr[-2000:]
    recs = by_url(run.records)
    for name, body, error_type, error in PRESCAN_REFUSALS:
        if mode == "title-fast-path":
            assert_ok(recs[urls[name]], "Refused")
        else:
            exact = error
            if exact is None:   # half the page's length plus 4096
                exact = "formatting_elements_reopened_beyond_%d" % (len(refused_page(body)) // 2 + 4096)
            assert_failed(recs[urls[name]], "parse", error_type, exact)
        rec = recs[early[name]]
        assert rec["status"] == "failed" and rec["stage"] == "parse", (name, rec)
        assert rec["error_type"] == error_type, (name, rec)
    assert_ok(recs[fine], "fine")


def attrs(n, start=0, fmt="a%x"):
    return "".join(" " + fmt % i for i in range(start, start + n))


NOAH_BODY = "".join("<b%s z=%d>" % (attrs(64), i) for i in range(250))
COPIES_BODY = "<p><b%s>x</p>" % attrs(64) + "<p>y</p>" * 2000

# (id, body, error): gumbo's time grows with the square of a tag's attributes (and of those
# merged into html and body, and compared between formatting elements); the pre-scan refuses
# such pages with TooManyAttributes.
ATTRIBUTE_REFUSALS = [
    ("one-tag", "<div%s>x</div>" % attrs(20000), "attributes_exceed_256"),
    ("end-tag", "<div>x</div%s>" % attrs(20000), "attributes_exceed_256"),
    ("html-merged", ("<html%s>" % attrs(200)) * 50 + "x", "merged_attributes_exceed_256"),
    ("body-merged", "x" + "".join("<body%s>" % attrs(200, 200 * i) for i in range(20)),
     "merged_attributes_exceed_256"),
    ("noahs-ark", NOAH_BODY, "attribute_comparisons_exceed_67108864"),
    ("copies", COPIES_BODY, None),
]


@pytest.mark.parametrize("mode", list(PARSE_MODES))
def test_80_33_too_many_attributes_fail_promptly(run_harvestd, origin, mode):
    urls = {name: serve(origin, refused_page(body)) for name, body, _ in ATTRIBUTE_REFUSALS}
    fine = {
        "256-attributes": serve(origin, refused_page("<div%s>x</div>" % attrs(256))),
        "html-twice": serve(origin, refused_page(("<html%s>" % attrs(100)) * 2 + "x")),
        "many-tags": serve(origin, refused_page(("<div%s>x</div>" % attrs(30)) * 2000)),
    }
    early = {name: serve(origin, refused_early(body)) for name, body, _ in ATTRIBUTE_REFUSALS}
    # The title fast path parses (and so judges) only up to </title>; the others, whole pages.
    started = time.monotonic()
    run = run_harvestd(list(urls.values()) + list(early.values()) + list(fine.values()),
                       *PARSE_MODES[mode])
    wall = time.monotonic() - started
    assert run.rc == 0, run.stderr[-2000:]
    recs = by_url(run.records)
    for name, body, error in ATTRIBUTE_REFUSALS:
        if mode == "title-fast-path":
            assert_ok(recs[urls[name]], "Refused")
        else:
            if error is None:   # half the page's length plus 4096
                error = "attribute_copies_exceed_%d" % (len(refused_page(body)) // 2 + 4096)
            assert_failed(recs[urls[name]], "parse", "TooManyAttributes", error)
        assert_failed(recs[early[name]], "parse", "TooManyAttributes")
    for name, url in fine.items():
        assert_ok(recs[url], "Refused")
    assert wall < 3 * SLOWDOWN, "the run took %.1fs" % wall


# ---------------------------------------------------------------------------- extraction budget

CUT = "\u2026[cut]"


def test_80_34_nested_matches_fail_the_page_not_the_batch(run_harvestd, origin):
    """Every match of a rule keeps its value, so N nested matches around T bytes cost N x T:
    a page whose fields would pass the budget (8 MiB) fails alone, and the run goes on."""
    text = "word " * 6000   # 30 KB inside 1000 nested divs: 30 MB of fields
    nested = serve(origin, refused_page("<div>" * 1000 + text + "</div>" * 1000))
    base = "http://127.0.0.1/" + "b" * 8000 + "/"   # a URL is at most 8 KiB
    links = serve(origin, ('<!DOCTYPE html><html><head><title>Links</title><base href="%s">'
                           '</head><body>%s</body></html>' % (base, '<a href=a>x</a>' * 2000))
                  .encode())
    fine = origin.url("/nested?depth=1000")
    run = run_harvestd([nested, links, fine], "--extract-all", "d=div", "--links")
    assert run.rc == 0, run.stderr[-2000:]
    recs = by_url(run.records)
    assert_failed(recs[nested], "parse", "ExtractionTooLarge", "fields_exceed_8_mib")
    assert "fields" not in recs[nested], recs[nested]
    assert_failed(recs[links], "parse", "ExtractionTooLarge", "fields_exceed_8_mib")
    assert_ok(recs[fine], "Nested")
    assert recs[fine]["fields"]["d"] == ["deep"] * 1000
    assert recs[fine]["fields"]["links"] == []


def test_80_35_long_values_are_cut_with_a_mark(run_harvestd, origin):
    """A value longer than 1 MiB is cut at a character boundary and ends with the mark."""
    text = "\u00e9" * 700000   # 1.4 MB of two-byte characters
    page = ('<!DOCTYPE html><html><head><title>Long</title></head><body>'
            '<p title="%s">%s</p><i>short</i></body></html>' % ("t" * 1200000, text)).encode()
    url = serve(origin, page)
    run = run_harvestd([url], "--max-bytes", "4m", "--extract", "text=p",
                       "--extract", "attr=p @title", "--extract", "html=p ::html",
                       "--extract", "short=i")
    rec = one_ok(run)
    f = rec["fields"]
    assert f["short"] == "short"
    for key in ("text", "attr", "html"):
        assert f[key].endswith(CUT), (key, f[key][-20:])
        kept = f[key][:-len(CUT)].encode("utf-8")
        assert MIB - 1 <= len(kept) <= MIB, (key, len(kept))
    assert f["text"] == "\u00e9" * (MIB // 2) + CUT
    assert f["attr"] == "t" * MIB + CUT
    assert f["html"].startswith('<p title="ttt'), f["html"][:20]
