"""`harvestd merge`: per-daemon outputs of a stream batch, made by hand here, merged into one
record per line (the last one winning) in line order."""

import json
import os


def rec(line, url=None, status="ok", at=None, batch="b", **extra):
    r = {"requested_url": url or "http://x.test/%d" % line, "batch": batch, "line": line,
         "status": status}
    if at is not None:
        r["fetched_at"] = at
    r.update(extra)
    return json.dumps(r, separators=(",", ":"))


def write(path, lines, tail=b""):
    os.makedirs(os.path.dirname(str(path)), exist_ok=True)
    with open(str(path), "wb") as f:
        f.write("".join(x + "\n" for x in lines).encode() + tail)


def merged_lines(path):
    return [json.loads(x) for x in open(str(path), "rb").read().split(b"\n")[:-1]]


T1, T2, T3 = "2026-12-01T10:00:00.000Z", "2026-12-01T10:00:01.000Z", "2026-12-02T09:00:00.500Z"


def test_91_01_last_record_wins_in_line_order(harvestd, tmp_path):
    a, b = tmp_path / "a" / "out" / "b.node-a.jsonl", tmp_path / "b" / "out" / "b.node-b.jsonl"
    write(a, [rec(3, at=T1), rec(1, status="failed", at=T1), rec(2, at=T3, title="a2"),
              rec(1, at=T2, title="a1")])
    write(b, [rec(2, at=T2, title="b2"), rec(4, title="b4-no-time"), rec(4, at=T1, title="b4"),
              rec(5, title="first"), rec(5, title="second")])
    out = tmp_path / "m.jsonl"
    r = harvestd.command("merge", "--batch", "b", "-o", out, tmp_path / "a", tmp_path / "b")
    assert r.returncode == 0, r.stderr
    got = merged_lines(out)
    assert [x["line"] for x in got] == [1, 2, 3, 4, 5]
    assert got[0]["title"] == "a1"            # the later fetched_at, same file
    assert got[1]["title"] == "a2"            # the later fetched_at, across files
    assert got[3]["title"] == "b4"            # one with fetched_at beats one without
    assert got[4]["title"] == "second"        # neither: the one read later
    # The winners' bytes, as they were written.
    assert open(str(out), "rb").read().split(b"\n")[1] == rec(2, at=T3, title="a2").encode()
    assert "merged batch b: 5 records (lines 1-5, 0 without a record) from 2 files; " \
           "4 duplicates dropped" in r.stderr


def test_91_02_torn_invalid_and_other_lines_are_skipped_and_counted(harvestd, tmp_path):
    f = tmp_path / "o.jsonl"
    write(f, [rec(1), "not json", rec(2, batch="other"), '{"batch":"b","line":0}',
              '{"batch":"b","line":1.5}', '[1,2]', rec(4)], tail=b'{"requested_url":"ht')
    out = tmp_path / "m.jsonl"
    r = harvestd.command("merge", "--batch", "b", "-o", out, f)
    assert r.returncode == 0, r.stderr
    assert [x["line"] for x in merged_lines(out)] == [1, 4]
    assert "2 records (lines 1-4, 2 without a record)" in r.stderr
    assert "4 invalid lines, 1 torn, 1 of other batches" in r.stderr


def test_91_03_directories_hold_only_their_batch_files(harvestd, tmp_path):
    d = tmp_path / "spool"
    write(d / "out" / "b.n1.jsonl", [rec(1)])
    write(d / "b.n2.jsonl", [rec(2)])                           # beside out/ too
    write(d / "out" / "b.x.n3.jsonl", [rec(3, batch="b.x")])    # batch b.x, not b
    write(d / "out" / "b.jsonl", [rec(4)])                      # no consumer part
    # A spool batch's output whose name reads as batch b's (consumer "txt"): its records
    # name no batch, so none of them is taken.
    write(d / "out" / "b.txt.jsonl", ['{"requested_url":"http://x.test/","status":"ok"}'])
    out = tmp_path / "m.jsonl"
    r = harvestd.command("merge", "--batch", "b", "-o", out, d)
    assert r.returncode == 0, r.stderr
    assert [x["line"] for x in merged_lines(out)] == [1, 2]
    assert "from 3 files" in r.stderr and "1 invalid lines" in r.stderr


def test_91_04_standard_output(harvestd, tmp_path):
    f = tmp_path / "x.jsonl"
    write(f, [rec(2), rec(1)])
    r = harvestd.command("merge", "--batch=b", "--output=-", f)
    assert r.returncode == 0, r.stderr
    assert [json.loads(x)["line"] for x in r.stdout.splitlines()] == [1, 2]


def test_91_05_usage_errors(harvestd, tmp_path):
    f = tmp_path / "x.jsonl"
    write(f, [rec(1)])
    existing = tmp_path / "exists.jsonl"
    existing.write_text("keep\n")
    cases = [
        (["-o", tmp_path / "m1", f], "give the batch"),
        (["--batch", "b", f], "give the output"),
        (["--batch", "b", "-o", tmp_path / "m2"], "give the daemons' outputs"),
        (["--batch", "b", "-o", tmp_path / "m3", "--frob", f], "unknown option: --frob"),
        (["--batch", "b", "-o", tmp_path / "m4", tmp_path / "missing"], "No such file"),
        (["--batch", "b", "-o", existing, f], "already exists"),
        (["--batch", "zzz", "-o", tmp_path / "m5", tmp_path], "no output files of batch zzz"),
        (["--batch", "b", "-o"], "missing value for -o"),
    ]
    for args, text in cases:
        r = harvestd.command("merge", *args)
        assert r.returncode == 2, (args, r.stderr)
        assert text in r.stderr, (args, r.stderr)
    assert existing.read_text() == "keep\n"
    assert not any(p.name.startswith("m") for p in tmp_path.iterdir())
    r = harvestd.command("merge", "--help")
    assert r.returncode == 0 and "usage: harvestd merge" in r.stdout


def test_91_06_io_errors_exit_1_and_leave_no_output(harvestd, tmp_path):
    # A file that cannot be read, even by root.
    out = tmp_path / "m.jsonl"
    r = harvestd.command("merge", "--batch", "b", "-o", out, "/proc/self/mem")
    assert r.returncode == 1, r.stderr
    assert "cannot read /proc/self/mem" in r.stderr
    # An output directory that does not exist.
    f = tmp_path / "x.jsonl"
    write(f, [rec(1)])
    r = harvestd.command("merge", "--batch", "b", "-o", tmp_path / "no" / "m.jsonl", f)
    assert r.returncode == 1 and "cannot create" in r.stderr
    assert not out.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x.jsonl"]
