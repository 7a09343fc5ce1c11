"""`harvestd merge`: per-daemon outputs of a stream batch, made by hand here, merged into one
record per line (the last one winning) in line order."""

import json
import os
import random


def rec(line, title=None, status="ok", at=None, batch="b", **extra):
    """A record as the daemon writes it (keys in its order, compact, UTF-8)."""
    r = {"requested_url": "http://x.test/%d" % line, "batch": batch, "line": line,
         "url": "http://x.test/%d" % line, "status": status}
    if status == "ok":
        r["http_status"] = 200
    if title is not None:
        r["title"] = title
    if at is not None:
        r["fetched_at"] = at
    if status == "failed":
        r.update(stage="download", error_type="ConnectionError", error="connect_refused")
    r.update(extra)
    return json.dumps(r, separators=(",", ":"), ensure_ascii=False)


def write(path, lines, tail=b""):
    os.makedirs(os.path.dirname(str(path)), exist_ok=True)
    with open(str(path), "wb") as f:
        f.write("".join(x + "\n" for x in lines).encode() + tail)


def merged_lines(path):
    return [json.loads(x) for x in open(str(path), "rb").read().split(b"\n")[:-1]]


def summary(stderr):
    lines = [x for x in stderr.splitlines() if x.startswith("harvestd: merged batch ")]
    assert len(lines) == 1, stderr
    return lines[0]


T1, T2, T3 = "2026-12-01T10:00:00.000Z", "2026-12-01T10:00:01.000Z", "2026-12-02T09:00:00.500Z"


def test_91_01_three_spools_last_record_wins_in_line_order(harvestd, tmp_path):
    a = [rec(1, "a1-old", at=T1), rec(2, "a2 – später", at=T3), rec(3, "a3", status="failed"),
         rec(9, "other", at=T3, batch="other"), rec(1, "a1", at=T2)]
    b = [rec(2, "b2", at=T2), rec(3, "b3", at=T1), rec(4, "b4-no-time"), rec(5, "b5", at=T1)]
    c = [rec(4, "c4", at=T1), rec(5, "c5", at=T1), rec(7, "c7", at=T1)]
    write(tmp_path / "a" / "out" / "b.node-a.jsonl", a, tail=b'{"requested_url":"http://x.te')
    write(tmp_path / "b" / "out" / "b.node-b.jsonl", b)
    write(tmp_path / "b" / "out" / "other.node-b.jsonl", [rec(8, batch="other")])
    write(tmp_path / "c" / "out" / "b.node-c.jsonl", c)
    out = tmp_path / "merged.jsonl"
    r = harvestd.command("merge", "--batch", "b", "-o", out,
                         tmp_path / "a", tmp_path / "b", tmp_path / "c")
    assert r.returncode == 0, r.stderr
    # 1: the later fetched_at in one file; 2: across files; 3: one with fetched_at beats a
    # later one without; 4: likewise across files; 5: a tie, the one read later (spool c).
    want = [a[4], a[1], b[1], c[0], c[1], c[2]]
    assert open(str(out), "rb").read() == "".join(x + "\n" for x in want).encode()
    assert summary(r.stderr) == (
        "harvestd: merged batch b: 6 records (lines 1-7, 1 without a record) from 3 files; "
        "5 duplicates dropped; 0 invalid lines, 1 torn line, 1 of other batches")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a", "b", "c", "merged.jsonl"]


def test_91_02_torn_invalid_and_other_lines_are_skipped_and_counted(harvestd, tmp_path):
    f = tmp_path / "o.jsonl"
    write(f, [rec(1), "not json", rec(2, batch="other"), '{"batch":"b","line":0}',
              '{"batch":"b","line":1.5}', '[1,2]', rec(3) + " ", rec(4)],
          tail=b'{"requested_url":"ht')
    out = tmp_path / "m.jsonl"
    r = harvestd.command("merge", "--batch", "b", "-o", out, f)
    assert r.returncode == 0, r.stderr
    assert [x["line"] for x in merged_lines(out)] == [1, 4]
    assert summary(r.stderr) == (
        "harvestd: merged batch b: 2 records (lines 1-4, 2 without a record) from 1 file; "
        "0 duplicates dropped; 5 invalid lines, 1 torn line, 1 of other batches")


def test_91_03_directories_hold_only_their_batch_files(harvestd, tmp_path):
    d = tmp_path / "spool"
    write(d / "out" / "b.n1.jsonl", [rec(1)])
    write(d / "b.n2.jsonl", [rec(2)])                           # beside out/ too
    write(d / "out" / "b.x.n3.jsonl", [rec(3, batch="b.x")])    # batch b.x, not b
    write(d / "out" / "b.jsonl", [rec(4)])                      # no consumer part
    write(d / "out" / "b.n4.jsonl.tmp.77", [rec(5)])            # not .jsonl
    write(d / "incoming" / "b.n5.jsonl", [rec(6)])              # not out/
    # A spool batch's output whose name reads as batch b's (consumer "txt"): its records
    # name no batch, so none of them is taken.
    write(d / "out" / "b.txt.jsonl", ['{"requested_url":"http://x.test/","status":"ok"}'])
    out = tmp_path / "m.jsonl"
    r = harvestd.command("merge", "--batch", "b", "-o", out, d)
    assert r.returncode == 0, r.stderr
    assert [x["line"] for x in merged_lines(out)] == [1, 2]
    assert "from 3 files" in r.stderr and "; 1 invalid line," in r.stderr
    # A file is read whatever its name; named twice (itself and by its spool), it counts once.
    out2 = tmp_path / "m2.jsonl"
    r = harvestd.command("merge", "--batch", "b", "-o", out2, d / "out" / "b.jsonl", d,
                         d / "out" / "b.n1.jsonl")
    assert r.returncode == 0, r.stderr
    assert [x["line"] for x in merged_lines(out2)] == [1, 2, 4]
    assert "from 4 files; 0 duplicates dropped" in r.stderr


def test_91_04_batch_names_are_matched_as_file_names_spell_them(harvestd, tmp_path):
    # enqueue's batch is the file's base name by default; ' ' and '/' are %-encoded in file
    # names, dots are kept (but the consumer's are encoded, so the last one separates them).
    write(tmp_path / "s" / "out" / "urls.txt.node%2E1.jsonl", [rec(1, batch="urls.txt")])
    write(tmp_path / "s" / "out" / "my%20list.n.jsonl", [rec(2, batch="my list")])
    r = harvestd.command("merge", "--batch", "urls.txt", "-o", "-", tmp_path / "s")
    assert r.returncode == 0, r.stderr
    assert [json.loads(x)["line"] for x in r.stdout.splitlines()] == [1]
    r = harvestd.command("merge", "--batch", "my list", "-o", "-", tmp_path / "s")
    assert r.returncode == 0, r.stderr
    assert [json.loads(x)["line"] for x in r.stdout.splitlines()] == [2]
    r = harvestd.command("merge", "--batch", "urls", "-o", "-", tmp_path / "s")
    assert r.returncode == 2 and "no output files of batch urls" in r.stderr, r.stderr


def test_91_05_standard_output(harvestd, tmp_path):
    f = tmp_path / "x.jsonl"
    write(f, [rec(2), rec(1)])
    r = harvestd.command("merge", "--batch=b", "--output=-", f)
    assert r.returncode == 0, r.stderr
    assert r.stdout == rec(1) + "\n" + rec(2) + "\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x.jsonl"]


def test_91_06_usage_errors_exit_2(harvestd, tmp_path):
    f = tmp_path / "x.jsonl"
    write(f, [rec(1)])
    existing = tmp_path / "exists.jsonl"
    existing.write_text("keep\n")
    os.symlink(str(tmp_path / "nowhere"), str(tmp_path / "dangling"))
    (tmp_path / "empty-spool" / "out").mkdir(parents=True)
    cases = [
        (["-o", tmp_path / "m1", f], "missing --batch NAME"),
        (["--batch", "b", f], "missing -o FILE"),
        (["--batch", "b", "-o", tmp_path / "m2"], "no inputs"),
        (["--batch", "b", "-o", tmp_path / "m3", "--frob", f], "unknown option: --frob"),
        (["--batch", "b", "-o", tmp_path / "m4", tmp_path / "missing"],
         "missing: No such file or directory"),
        (["--batch", "b", "-o", existing, f], "output %s already exists" % existing),
        (["--batch", "b", "-o", tmp_path / "dangling", f], "already exists"),
        (["--batch", "zzz", "-o", tmp_path / "m5", tmp_path / "empty-spool"],
         "no output files of batch zzz"),
        (["--batch", "b", "-o"], "-o needs a value"),
        (["--batch", "b", "--batch", "c", "-o", tmp_path / "m6", f], "--batch given twice"),
        (["--batch", "", "-o", tmp_path / "m7", f], "bad batch name"),
        (["--batch", "b", "-o", tmp_path / "m8", "-"], "standard input cannot be an input"),
    ]
    for args, text in cases:
        r = harvestd.command("merge", *args)
        assert r.returncode == 2, (args, r.stderr)
        assert r.stderr.startswith("harvestd: ") and text in r.stderr, (args, r.stderr)
        assert "Try 'harvestd merge --help'." in r.stderr, (args, r.stderr)
        assert r.stdout == "", (args, r.stdout)
    assert existing.read_text() == "keep\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == \
        ["dangling", "empty-spool", "exists.jsonl", "x.jsonl"]
    r = harvestd.command("merge", "--help")
    assert r.returncode == 0 and r.stdout.startswith("usage: harvestd merge --batch NAME")
    assert r.stderr == ""


def test_91_07_io_errors_exit_1_and_leave_no_output(harvestd, tmp_path):
    out = tmp_path / "m.jsonl"
    # A file that cannot be read, even by root.
    r = harvestd.command("merge", "--batch", "b", "-o", out, "/proc/self/mem")
    assert r.returncode == 1, r.stderr
    assert "harvestd: cannot read /proc/self/mem: Input/output error" in r.stderr
    # A directory where a spool's output file should be.
    spool = tmp_path / "spool"
    write(spool / "out" / "b.n1.jsonl", [rec(1)])
    (spool / "out" / "b.n2.jsonl").mkdir()
    r = harvestd.command("merge", "--batch", "b", "-o", out, spool)
    assert r.returncode == 1, r.stderr
    assert "cannot read %s: not a regular file" % (spool / "out" / "b.n2.jsonl") in r.stderr
    # A pipe or device: read twice, so refused.
    r = harvestd.command("merge", "--batch", "b", "-o", out, "/dev/null")
    assert r.returncode == 1 and "not a regular file" in r.stderr, r.stderr
    # An output directory that does not exist.
    f = tmp_path / "x.jsonl"
    write(f, [rec(1)])
    r = harvestd.command("merge", "--batch", "b", "-o", tmp_path / "no" / "m.jsonl", f)
    assert r.returncode == 1, r.stderr
    assert "cannot create %s/no/m.jsonl.tmp." % tmp_path in r.stderr
    assert "No such file or directory" in r.stderr
    assert not out.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["spool", "x.jsonl"]


def test_91_08_lines_without_a_record_are_counted_not_refused(harvestd, tmp_path):
    f = tmp_path / "x.jsonl"
    write(f, [rec(7), rec(3), rec(2)])
    out = tmp_path / "m.jsonl"
    r = harvestd.command("merge", "--batch", "b", "-o", out, f)
    assert r.returncode == 0, r.stderr
    assert [x["line"] for x in merged_lines(out)] == [2, 3, 7]
    assert "3 records (lines 2-7; 4 of lines 1-7 without a record) from 1 file" in r.stderr
    # Nothing of the batch at all: an empty output, still a success.
    g = tmp_path / "spool" / "out" / "b.n.jsonl"
    write(g, [rec(1, batch="c")])
    out2 = tmp_path / "m2.jsonl"
    r = harvestd.command("merge", "--batch", "b", "-o", out2, tmp_path / "spool")
    assert r.returncode == 0, r.stderr
    assert out2.read_bytes() == b""
    assert summary(r.stderr) == (
        "harvestd: merged batch b: 0 records from 1 file; 0 duplicates dropped; "
        "0 invalid lines, 0 torn lines, 1 of other batches")


def test_91_09_many_records_agree_with_a_plain_scan(harvestd, tmp_path):
    rng = random.Random(91)
    times = [None, T1, T2, T3, "2026-12-02T09:00:00.501Z"]
    best = {}
    spools = []
    total = 0
    for n in range(3):
        lines = []
        for i in range(4000):
            line = rng.randint(1, 3000)
            at = rng.choice(times)
            text = rec(line, "s%d-%d" % (n, i), at=at, status="ok" if at else "failed")
            lines.append(text)
            key = at or ""
            if line not in best or key >= best[line][0]:
                best[line] = (key, text)
            total += 1
        spool = tmp_path / ("spool%d" % n)
        # Split over two files per spool, one of them beside out/: read before out/'s.
        write(spool / ("b.n%d-x.jsonl" % n), lines[:1000])
        write(spool / "out" / ("b.n%d.jsonl" % n), lines[1000:])
        spools.append(spool)
    out = tmp_path / "m.jsonl"
    r = harvestd.command("merge", "--batch", "b", "-o", out, *spools)
    assert r.returncode == 0, r.stderr
    want = "".join(best[k][1] + "\n" for k in sorted(best)).encode()
    assert open(str(out), "rb").read() == want
    top = max(best)
    assert "%d records (lines %d-%d" % (len(best), min(best), top) in r.stderr
    assert "from 6 files; %d duplicates dropped" % (total - len(best)) in r.stderr


def test_91_10_an_output_that_leads_nowhere_cannot_be_read(harvestd, tmp_path):
    # A spool's output that is a symbolic link to nothing (a volume not mounted, a file moved
    # away) is an input that cannot be read, as any other: exit 1, naming it.
    spool = tmp_path / "spool"
    write(spool / "out" / "b.a.jsonl", [rec(1)])
    os.symlink("missing", str(spool / "out" / "b.c.jsonl"))
    out = tmp_path / "m.jsonl"
    r = harvestd.command("merge", "--batch", "b", "-o", out, spool)
    assert r.returncode == 1, r.stderr
    assert r.stderr == "harvestd: cannot read %s: dangling symbolic link (to missing)\n" % (
        spool / "out" / "b.c.jsonl")
    # Named itself, likewise; a name that is not there at all stays a usage error.
    r = harvestd.command("merge", "--batch", "b", "-o", out, spool / "out" / "b.c.jsonl")
    assert r.returncode == 1, r.stderr
    assert "cannot read %s: dangling symbolic link" % (spool / "out" / "b.c.jsonl") in r.stderr
    r = harvestd.command("merge", "--batch", "b", "-o", out, spool / "out" / "b.x.jsonl")
    assert r.returncode == 2, r.stderr
    assert not out.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["spool"]


def test_91_11_the_merged_file_is_json_line_by_line(harvestd, tmp_path):
    # Damaged or hand-made outputs: records cJSON reads but that are no JSON as written. The
    # merged file must parse line by line with a strict parser (UTF-8, no raw control
    # characters, RFC 8259 numbers); a valid record beside them stays byte for byte.
    valid = (rec(9, "été – ok", at=T1)[:-1] + ',"x":"\\u0000\\t\\u00e9"}').encode()
    damaged = [
        b'{"batch":"b","line":1,"title":"a\x00b"}',
        b'{"batch":"b","line":2,"title":"caf\xe9"}',
        b'{"batch":"b","line":3,"title":"x\x01\x1fy\tz"}',
        b'{"batch":"b","line":4,"title":"cut \xe2\x82"}',
        b'\x00\x00\x00\x00{"batch":"b","line":5}',
        b'{"batch":"b","line":06,"x":1.}',
        b'\xef\xbb\xbf{"batch":"b","line":7,\x01"t\xffitle":"k"}',
    ]
    f = tmp_path / "spool" / "out" / "b.n1.jsonl"
    f.parent.mkdir(parents=True)
    f.write_bytes(b"".join(x + b"\n" for x in damaged + [valid]))
    out = tmp_path / "m.jsonl"
    r = harvestd.command("merge", "--batch", "b", "-o", out, tmp_path / "spool")
    assert r.returncode == 0, r.stderr
    raw = out.read_bytes()
    assert raw.endswith(b"\n")
    got = [json.loads(x.decode("utf-8", errors="strict"), strict=True)
           for x in raw.split(b"\n")[:-1]]
    assert [x["line"] for x in got] == [1, 2, 3, 4, 5, 6, 7, 9]
    assert got[0]["title"] == "a\ufffdb" and got[1]["title"] == "caf\ufffd"
    assert got[2]["title"] == "x\x01\x1fy\tz" and got[3]["title"] == "cut \ufffd"
    assert got[5]["x"] == 1 and got[6]["t\ufffditle"] == "k"
    assert raw.split(b"\n")[7] == valid
    assert summary(r.stderr) == (
        "harvestd: merged batch b: 8 records (lines 1-9, 1 without a record) from 1 file; "
        "0 duplicates dropped; 0 invalid lines, 0 torn lines, 0 of other batches; "
        "7 records repaired (not valid JSON as written)")


def test_91_12_entries_without_a_record_apart_from_lines_that_were_none(
        harvestd, tmp_path, redis_server):
    # enqueue numbers entries by their line in the file, so the file's comment and blank
    # lines are numbers no record carries; the batch's total is its number of entries.
    urls = tmp_path / "urls.txt"
    urls.write_text("# pages\nhttp://x.test/a\n\nhttp://x.test/b\n  # more\n"
                    "http://x.test/c\nhttp://x.test/d\n\nhttp://x.test/e\n")
    r = harvestd.command("enqueue", "--redis", redis_server.url, urls)
    assert r.returncode == 0, r.stderr
    c = redis_server.client()
    got = c.call("XRANGE", "harvestd:urls", "-", "+")
    lines = [int(dict(zip(e[1][0::2], e[1][1::2]))["line"]) for e in got]
    assert lines == [2, 4, 6, 7, 9]
    total = int(dict(zip(*[iter(c.call("HGETALL", "harvestd:urls:batch:urls.txt"))] * 2))["total"])
    assert total == 5
    # Two daemons took them; line 7's record is nowhere (its daemon's disk was lost, say).
    write(tmp_path / "a" / "out" / "urls.txt.n1.jsonl",
          [rec(2, batch="urls.txt", at=T1), rec(6, batch="urls.txt", at=T1)])
    write(tmp_path / "b" / "out" / "urls.txt.n2.jsonl",
          [rec(4, batch="urls.txt", at=T1), rec(9, batch="urls.txt", at=T1),
           rec(2, batch="urls.txt", at=T2)])
    spools = [tmp_path / "a", tmp_path / "b"]

    # Without the count, line numbers are all merge knows: 1, 3, 5, 7 and 8 have no record.
    r = harvestd.command("merge", "--batch", "urls.txt", "-o", tmp_path / "m1.jsonl", *spools)
    assert r.returncode == 0, r.stderr
    assert summary(r.stderr) == (
        "harvestd: merged batch urls.txt: 4 records (lines 2-9; 5 of lines 1-9 without a "
        "record) from 2 files; 1 duplicate dropped; 0 invalid lines, 0 torn lines, "
        "0 of other batches")
    # Told the batch's total: one entry without a record, and the lines that were none
    # are not counted as missing.
    r = harvestd.command("merge", "--batch", "urls.txt", "--entries", str(total),
                         "-o", tmp_path / "m2.jsonl", *spools)
    assert r.returncode == 0, r.stderr
    assert summary(r.stderr) == (
        "harvestd: merged batch urls.txt: 4 records (lines 2-9; 1 of 5 entries without a "
        "record) from 2 files; 1 duplicate dropped; 0 invalid lines, 0 torn lines, "
        "0 of other batches")
    assert (tmp_path / "m2.jsonl").read_bytes() == (tmp_path / "m1.jsonl").read_bytes()
    assert [x["line"] for x in merged_lines(tmp_path / "m2.jsonl")] == [2, 4, 6, 9]
    # A count below what the records show is said so, not hidden.
    r = harvestd.command("merge", "--batch", "urls.txt", "--entries=3",
                         "-o", tmp_path / "m3.jsonl", *spools)
    assert r.returncode == 0, r.stderr
    assert ("4 records (lines 2-9; 4 lines with a record, more than the 3 entries given)"
            in r.stderr)
    r = harvestd.command("merge", "--batch", "urls.txt", "--entries", "5", "-o", "-",
                         tmp_path / "nothing-here")
    assert r.returncode == 2
    for bad in ["x", "-1", "", "5x", "99999999999999999999999"]:
        r = harvestd.command("merge", "--batch", "urls.txt", "--entries", bad,
                             "-o", tmp_path / "m4.jsonl", *spools)
        assert r.returncode == 2 and "--entries: '%s' is not a count" % bad in r.stderr, r.stderr
    r = harvestd.command("merge", "--batch", "urls.txt", "--entries", "1", "--entries", "2",
                         "-o", tmp_path / "m4.jsonl", *spools)
    assert r.returncode == 2 and "--entries given twice" in r.stderr, r.stderr
    assert not (tmp_path / "m4.jsonl").exists()
    # Nothing of the batch at all, and the count given: every entry is without a record.
    write(tmp_path / "c" / "out" / "urls.txt.n3.jsonl", [])
    r = harvestd.command("merge", "--batch", "urls.txt", "--entries", "5", "-o", "-",
                         tmp_path / "c")
    assert r.returncode == 0, r.stderr
    assert "merged batch urls.txt: 0 records (5 of 5 entries without a record) from 1 file" \
        in r.stderr
