"""`harvestd state`: the per-URL state store inspected and trimmed from the command line.
The entries are put there by tests/tools/store_put (hv_store_write() itself, keys used as
given): stats, get (the key normalised as the daemon does), forget, prune by age, the JSON
answers, a missing, empty, corrupt or damaged store (data.mdb cut short, wrong meta pages),
verify reading every page, and usage errors."""

import json
import os
import re
import subprocess
import time

import pytest

from harness import (HARVESTD_BIN, SLOWDOWN, check_sanitizer, lmdb_damage_page, lmdb_leaf_pages,
                     lmdb_meta, lmdb_newest, lmdb_set_meta, tool_path)

GIB = 1 << 30
DAY_MS = 24 * 3600 * 1000
USAGE_HINT = "Try 'harvestd state --help'."


def now_ms():
    return int(time.time() * 1000)


def put(harvestd, store, *pairs):
    """Write entries: pairs of (key, dict of entry fields, see tests/tools/store_put.c)."""
    argv = [tool_path("store_put"), str(store)]
    for key, fields in pairs:
        argv += [key, json.dumps(fields)]
    done = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, env=harvestd.env, timeout=30 * SLOWDOWN)
    err = done.stderr.decode("utf-8", "replace")
    check_sanitizer(err)
    assert done.returncode == 0, err


def state(harvestd, store, *args):
    return harvestd.command("state", "--state-dir", store, *args)


def one_line(out):
    """The single line of an answer (exactly one, newline-terminated)."""
    assert out.endswith("\n") and out.count("\n") == 1, repr(out)
    return out[:-1]


FULL = {"url": "http://a.test/final", "etag": '"v1"', "last_modified": "Wed, 02 Dec 2026 10:00:00 GMT",
        "body_hash": "ab" * 32, "title": "Tétre \"quoted\"", "fields": {"a": [1, "x"], "b": None},
        "content_type": "text/html", "charset": "utf-8", "bytes": 1234, "rules": "fedcba9876543210",
        "fetched_at": 1796210000123, "modified_at": 1796209995123}


def test_94_01_no_store_in_the_directory_is_an_error_and_nothing_is_created(harvestd, tmp_path):
    missing = tmp_path / "missing"
    for args in (["stats"], ["get", "http://a.test/"], ["forget", "http://a.test/"],
                 ["prune", "--older-than", "1d"], ["--json", "stats"]):
        r = state(harvestd, missing, *args)
        assert r.returncode == 1, r.stderr
        assert r.stderr == "harvestd: no state store at %s\n" % missing
        assert r.stdout == ""
        assert not missing.exists()
    # A directory without data.mdb: nothing is created in it either (no lock.mdb).
    empty = tmp_path / "empty"
    empty.mkdir()
    r = state(harvestd, empty, "stats")
    assert r.returncode == 1
    assert r.stderr == "harvestd: no state store at %s\n" % empty
    assert list(empty.iterdir()) == []
    # An empty data.mdb would become a new store: it is not one yet.
    (empty / "data.mdb").write_bytes(b"")
    r = state(harvestd, empty, "get", "http://a.test/")
    assert r.returncode == 1
    assert r.stderr.startswith("harvestd: no state store at %s (" % empty), r.stderr
    assert sorted(p.name for p in empty.iterdir()) == ["data.mdb"]
    assert (empty / "data.mdb").stat().st_size == 0
    # A file where the directory should be.
    f = tmp_path / "file"
    f.write_bytes(b"x")
    r = state(harvestd, f, "stats")
    assert r.returncode == 1
    assert r.stderr.startswith("harvestd: no state store at %s" % f), r.stderr


def test_94_02_stats_in_text_and_json(harvestd, tmp_path):
    store = tmp_path / "state"
    put(harvestd, store, ("http://a.test/", FULL), ("http://b.test/", {}), ("http://c.test/", {}))
    r = state(harvestd, store, "stats")
    assert r.returncode == 0, r.stderr
    m = re.fullmatch(r"entries=(\d+) bytes_used=(\d+) map_bytes=(\d+)", one_line(r.stdout))
    assert m, r.stdout
    entries, used, mapped = (int(x) for x in m.groups())
    assert entries == 3
    assert 0 < used <= os.path.getsize(store / "data.mdb")
    assert mapped >= GIB  # never below the file, and at least 1 GiB
    # Options after the verb, the --state-dir=DIR form, --json.
    r = harvestd.command("state", "stats", "--json", "--state-dir=%s" % store)
    assert r.returncode == 0, r.stderr
    assert json.loads(one_line(r.stdout)) == {"entries": 3, "bytes_used": used, "map_bytes": mapped}
    assert list(json.loads(one_line(r.stdout))) == ["entries", "bytes_used", "map_bytes"]


def test_94_03_get_finds_the_entry_by_its_normalised_url(harvestd, tmp_path):
    store = tmp_path / "state"
    put(harvestd, store, ("http://a.test/", FULL),
        ("http://b.test/p/q?x=1", {"fetched_at": 1796210000000, "bytes": 0}))
    want = {"url_key": "http://a.test/", "url": "http://a.test/final", "etag": '"v1"',
            "last_modified": "Wed, 02 Dec 2026 10:00:00 GMT", "body_hash": "ab" * 32,
            "title": "Tétre \"quoted\"", "fields": {"a": [1, "x"], "b": None},
            "content_type": "text/html", "charset": "utf-8", "bytes": 1234,
            "rules": "fedcba9876543210", "fetched_at": "2026-12-02T11:13:20.123Z",
            "modified_at": "2026-12-02T11:13:15.123Z"}
    for url in ("HTTP://A.TEST", "http://a.test/", "http://a.test:80/#frag", "http://A.test/x/.."):
        for mode in ([], ["--json"]):
            r = state(harvestd, store, *mode, "get", url)
            assert r.returncode == 0, r.stderr
            got = json.loads(one_line(r.stdout))
            assert got == want
            assert list(got) == list(want)  # the documented key order
            assert r.stderr == ""
    # Absent fields are left out; a zero is not absent.
    r = state(harvestd, store, "get", "http://B.test/p/./q?x=1")
    assert r.returncode == 0, r.stderr
    assert json.loads(one_line(r.stdout)) == {
        "url_key": "http://b.test/p/q?x=1", "bytes": 0, "rules": "0000000000000000",
        "fetched_at": "2026-12-02T11:13:20.000Z", "modified_at": "2026-12-02T11:13:20.000Z"}
    # Not there: exit 3, said on stderr, nothing on stdout; also for a query that differs.
    for url in ("http://nope.test/", "http://b.test/p/q?x=2", "https://a.test/"):
        for mode in ([], ["--json"]):
            r = state(harvestd, store, *mode, "get", url)
            assert r.returncode == 3, r.stderr
            assert r.stdout == ""
            assert r.stderr == "harvestd: no entry for %s\n" % url


def test_94_04_forget_deletes_one_entry(harvestd, tmp_path):
    store = tmp_path / "state"
    put(harvestd, store, ("http://a.test/", FULL), ("http://b.test/", FULL), ("http://c.test/", FULL))
    r = state(harvestd, store, "forget", "HTTP://A.TEST")
    assert r.returncode == 0, r.stderr
    assert r.stdout == "forgot http://a.test/\n"
    assert state(harvestd, store, "get", "http://a.test/").returncode == 3
    assert state(harvestd, store, "get", "http://b.test/").returncode == 0
    r = state(harvestd, store, "forget", "http://a.test/")
    assert r.returncode == 3
    assert r.stdout == ""
    assert r.stderr == "harvestd: no entry for http://a.test/\n"
    # JSON answers, present and absent.
    r = state(harvestd, store, "forget", "http://B.TEST", "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(one_line(r.stdout)) == {"forgot": True, "url": "http://b.test/"}
    r = state(harvestd, store, "--json", "forget", "http://b.test")
    assert r.returncode == 3
    assert json.loads(one_line(r.stdout)) == {"forgot": False, "url": "http://b.test/"}
    r = state(harvestd, store, "stats", "--json")
    assert json.loads(r.stdout)["entries"] == 1


def test_94_05_prune_drops_entries_fetched_before_now_minus_the_age(harvestd, tmp_path):
    store = tmp_path / "state"
    t = now_ms()
    ages = {"d10": 10 * DAY_MS, "d2": 2 * DAY_MS, "h1": 3600 * 1000, "new": 0}
    put(harvestd, store, *[("http://%s.test/" % k, {"fetched_at": t - age}) for k, age in ages.items()])

    def present():
        return sorted(k for k in ages
                      if state(harvestd, store, "get", "http://%s.test/" % k).returncode == 0)

    r = state(harvestd, store, "prune", "--older-than", "3d")
    assert r.returncode == 0, r.stderr
    assert r.stdout == "pruned=1 entries=3\n"
    assert present() == ["d2", "h1", "new"]
    # Nothing older than a year: nothing pruned.
    r = state(harvestd, store, "--older-than=365d", "prune")
    assert r.stdout == "pruned=0 entries=3\n"
    r = state(harvestd, store, "prune", "--older-than", "36h", "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(one_line(r.stdout)) == {"pruned": 1, "entries": 2}
    assert present() == ["h1", "new"]
    # A bare number is seconds: 600 s removes the hour-old entry and keeps the new one.
    r = state(harvestd, store, "prune", "--older-than", "600")
    assert r.stdout == "pruned=1 entries=1\n"
    assert present() == ["new"]
    r = state(harvestd, store, "prune", "--older-than", "10m")
    assert r.stdout == "pruned=0 entries=1\n"


def test_94_06_a_corrupt_store_is_named_with_the_way_to_discard_it(harvestd, tmp_path):
    store = tmp_path / "state"
    store.mkdir()
    garbage = bytes((i * 37 + 11) % 256 for i in range(8192))
    (store / "data.mdb").write_bytes(garbage)
    for args in (["stats"], ["get", "http://a.test/"], ["forget", "http://a.test/"],
                 ["prune", "--older-than", "1d"]):
        r = state(harvestd, store, *args)
        assert r.returncode == 1, r.stderr
        assert r.stdout == ""
        line = one_line(r.stderr)
        assert line.startswith("harvestd: the state store %s is not a usable LMDB store" % store), line
        assert "%s/data.mdb" % store in line and "%s/lock.mdb" % store in line
    # The store is left as it was, for whoever looks into it.
    assert (store / "data.mdb").read_bytes() == garbage


def test_94_07_usage_errors(harvestd, tmp_path):
    store = tmp_path / "state"
    put(harvestd, store, ("http://a.test/", FULL))
    before = (store / "data.mdb").read_bytes()
    cases = [
        ([], "missing --state-dir DIR"),
        (["stats"], "missing --state-dir DIR"),
        (["--state-dir"], "--state-dir needs a value"),
        (["--state-dir=", "stats"], "--state-dir needs a directory"),
        (["--state-dir", store, "--state-dir", store, "stats"], "--state-dir given twice"),
        (["--state-dir", store], "missing a verb"),
        (["--state-dir", store, "list"], "unknown verb: list"),
        (["--state-dir", store, "get"], "get needs a URL"),
        (["--state-dir", store, "forget"], "forget needs a URL"),
        (["--state-dir", store, "get", "http://a.test/", "http://b.test/"],
         "unexpected argument: http://b.test/"),
        (["--state-dir", store, "stats", "extra"], "unexpected argument: extra"),
        (["--state-dir", store, "get", "not a url"], "not a URL the daemon fetches (contains_space)"),
        (["--state-dir", store, "get", "example.com/x"], "(not_absolute)"),
        (["--state-dir", store, "forget", "ftp://a.test/"], "(unsupported_scheme)"),
        (["--state-dir", store, "prune"], "prune needs --older-than DURATION"),
        (["--state-dir", store, "prune", "--older-than", "soon"], "'soon' is not a duration"),
        (["--state-dir", store, "prune", "--older-than", "5x"], "'5x' is not a duration"),
        (["--state-dir", store, "prune", "--older-than", "d"], "'d' is not a duration"),
        (["--state-dir", store, "prune", "--older-than", "1hd"], "'1hd' is not a duration"),
        (["--state-dir", store, "prune", "--older-than", "99999999999999999999d"], "too long"),
        (["--state-dir", store, "prune", "--older-than"], "--older-than needs a value"),
        (["--state-dir", store, "stats", "--older-than", "1d"], "--older-than is for prune only"),
        (["--state-dir", store, "--jsn", "stats"], "unknown option: --jsn"),
    ]
    for args, what in cases:
        r = harvestd.command("state", *args)
        assert r.returncode == 2, (args, r.stderr)
        assert r.stdout == ""
        lines = r.stderr.splitlines()
        assert len(lines) == 2 and lines[0].startswith("harvestd: ") and what in lines[0], (args, r.stderr)
        assert lines[1] == USAGE_HINT
    assert (store / "data.mdb").read_bytes() == before


def test_94_08_help(harvestd, tmp_path):
    for args in (["--help"], ["-h"], ["--state-dir", tmp_path / "missing", "stats", "--help"]):
        r = harvestd.command("state", *args)
        assert r.returncode == 0, r.stderr
        assert r.stdout.startswith("usage: harvestd state --state-dir DIR [--json] stats\n")
        assert "Exit status: 0 answered; 1 no store" in r.stdout
        assert "       harvestd state --state-dir DIR [--json] verify\n" in r.stdout
        assert "is not detected until verify" in r.stdout.replace("\n", " ")
        assert r.stderr == ""
    assert not (tmp_path / "missing").exists()
    r = harvestd.command("--help")
    assert "harvestd state --state-dir DIR" in r.stdout


def many(n, title_len=300):
    """n entries whose titles fill a few pages each (a tree of depth 2 for a few hundred)."""
    return [("http://k.test/%d" % i, {"url": "http://k.test/%d" % i, "title": "t" * title_len,
                                      "fetched_at": 1796210000000}) for i in range(n)]


def assert_refused(r, store, what):
    """One line on stderr that names the store, says `what` is wrong and how to discard it;
    exit status 1, not a signal."""
    assert r.returncode == 1, (r.returncode, r.stderr)
    assert r.stdout == ""
    line = one_line(r.stderr)
    assert line.startswith("harvestd: the state store %s is " % store), line
    assert what in line, line
    assert line.endswith(": move it away or delete %s/data.mdb and %s/lock.mdb to start with an "
                         "empty one" % (store, store)), line


VERBS = (["stats"], ["get", "http://k.test/5"], ["get", "http://k.test/399"],
         ["forget", "http://k.test/7"], ["prune", "--older-than", "1d"], ["--json", "stats"])


def test_94_09_a_data_file_cut_short_is_refused_not_a_crash(harvestd, tmp_path):
    """LMDB opens a data.mdb cut short (stats counted its entries) and a lookup that reaches a
    page past the end died of SIGBUS: every verb refuses it now, with exit status 1."""
    store = tmp_path / "state"
    put(harvestd, store, *many(400))
    data = store / "data.mdb"
    sound = data.read_bytes()
    page = lmdb_meta(data, 0)["page_size"]
    assert len(sound) >= 40 * page
    for size in (len(sound) // page // 3 * page, len(sound) - page, len(sound) - 1):
        data.write_bytes(sound[:size])
        for args in VERBS:
            assert_refused(state(harvestd, store, *args), store, "is damaged (%s/data.mdb: cut "
                           "short" % store)
        assert data.read_bytes() == sound[:size], "the refused store was changed"
    # Whole again, it is as it was.
    data.write_bytes(sound)
    r = state(harvestd, store, "stats")
    assert r.returncode == 0 and r.stdout.startswith("entries=400 "), r.stderr


def test_94_10_wrong_meta_pages_are_refused_not_a_crash(harvestd, tmp_path):
    """A root page number LMDB would follow into an assertion (SIGABRT) or a wrong page, a last
    page beyond the file, a lost magic number: refused, with what is wrong."""
    store = tmp_path / "state"
    put(harvestd, store, *many(400))
    data = store / "data.mdb"
    sound = data.read_bytes()
    m = lmdb_newest(data)
    meta = lmdb_meta(data, m)
    cases = [
        (m, {"main_root": 1}, "names page 1 as the root of the entries"),
        (m, {"main_root": meta["last_page"] + 10}, "as the root of the entries"),
        (m, {"main_root": meta["main_root"] + 1}, "is not a branch page"),
        (m, {"last_page": 1 << 40}, "cut short"),
        (m, {"magic": 0}, "has no LMDB magic number" if m == 1 else "not a usable LMDB store"),
        (0, {"magic": 0}, "is not a usable LMDB store (%s/data.mdb: meta page 0 has no LMDB "
                          "magic number)" % store),
        (1 - m, {"last_page": meta["last_page"] + 1}, "older meta page"),
    ]
    for which, values, what in cases:
        data.write_bytes(sound)
        lmdb_set_meta(data, which, **values)
        for args in VERBS:
            assert_refused(state(harvestd, store, *args), store, what)
    data.write_bytes(sound)
    assert state(harvestd, store, "get", "http://k.test/399").returncode == 0


def test_94_11_verify_reads_every_page(harvestd, tmp_path):
    """verify: 0 and the counts on a sound store; 1 and what is wrong on one damaged inside its
    pages, which every other verb opens (the cheap checks cannot see it): the walk that dies
    (an LMDB assertion, SIGBUS) is a child's, and the command says so."""
    store = tmp_path / "state"
    put(harvestd, store, *many(400))
    data = store / "data.mdb"
    sound = data.read_bytes()
    r = state(harvestd, store, "verify")
    assert r.returncode == 0, r.stderr
    m = re.fullmatch(r"sound entries=400 pages=(\d+) free_pages=(\d+)", one_line(r.stdout))
    assert m, r.stdout
    assert int(m.group(1)) == lmdb_meta(data, lmdb_newest(data))["last_page"] + 1
    assert r.stderr == ""
    r = state(harvestd, store, "--json", "verify")
    assert json.loads(one_line(r.stdout)) == {"sound": True, "entries": 400,
                                              "pages": int(m.group(1)),
                                              "free_pages": int(m.group(2))}
    # Freed pages are counted too.
    assert state(harvestd, store, "prune", "--older-than", "0s").returncode == 0
    r = state(harvestd, store, "verify")
    assert r.returncode == 0 and r.stdout.startswith("sound entries=0 "), r.stdout + r.stderr
    data.write_bytes(sound)

    leaf = lmdb_leaf_pages(data)[3]
    for how, what in (("zero", None), ("size", "killed after ")):
        data.write_bytes(sound)
        lmdb_damage_page(data, leaf, how)
        assert state(harvestd, store, "stats").returncode == 0  # opens: not detected there
        r = state(harvestd, store, "verify")
        assert r.returncode == 1, r.stderr
        walked = int(re.fullmatch(r"damaged entries_walked=(\d+)", one_line(r.stdout)).group(1))
        assert walked < 400
        line = r.stderr.splitlines()[-1]
        assert line.startswith("harvestd: the state store %s is damaged (" % store), r.stderr
        assert line.endswith("to start with an empty one"), line
        if what:
            assert what in line and "SIGBUS" in line, line
        else:
            assert "SIGABRT (an LMDB assertion)" in line or "LMDB stopped the walk" in line, line
        r = state(harvestd, store, "--json", "verify")
        got = json.loads(one_line(r.stdout))
        assert got["sound"] is False and got["entries_walked"] == walked and got["damage"], got
    # What the cheap checks refuse, verify reports too; no store at all is an error.
    data.write_bytes(sound[:len(sound) // 2])
    r = state(harvestd, store, "verify")
    assert r.returncode == 1 and r.stdout == "damaged entries_walked=0\n", r.stdout
    assert "cut short" in r.stderr
    r = state(harvestd, tmp_path / "none", "verify")
    assert r.returncode == 1 and r.stderr == "harvestd: no state store at %s\n" % (tmp_path / "none")


def test_94_12_get_prints_valid_json_whatever_bytes_the_entry_holds(harvestd, tmp_path):
    """An ETag is the bytes a server sent, Latin-1 included, and is stored as they came (to be
    sent back so); `get` printed them raw, which is not UTF-8 and so not JSON. It shows
    U+FFFD for them, as records do."""
    store = tmp_path / "state"
    raw = (b'{"url":"http://a.test/","etag":"\\"caf\xe9\\"","last_modified":"Wed, 02 Dec 2026 '
           b'\xff GMT","title":"T\xc3\xa9tre","fetched_at":1796210000123}')
    done = subprocess.run([tool_path("store_put").encode(), str(store).encode(), b"http://a.test/",
                           raw], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, env=harvestd.env, timeout=30 * SLOWDOWN)
    assert done.returncode == 0, done.stderr
    for mode in ([], ["--json"]):
        argv = [HARVESTD_BIN, "state", "--state-dir", str(store)] + mode + ["get", "http://a.test/"]
        r = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, env=harvestd.env, timeout=30 * SLOWDOWN)
        check_sanitizer(r.stderr.decode("utf-8", "replace"))
        assert r.returncode == 0, r.stderr
        got = json.loads(r.stdout.decode("utf-8"))  # strict: valid UTF-8, valid JSON
        assert got["etag"] == '"caf\ufffd"'
        assert got["last_modified"] == "Wed, 02 Dec 2026 \ufffd GMT"
        assert got["title"] == "Tétre"
