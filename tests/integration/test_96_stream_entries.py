"""Stream entries nobody checked: added with XADD by hand or by another tool, with batch names
that `enqueue` would spell differently. A real redis-server of the test's own on 127.0.0.1;
what is checked is that no such entry can stop a daemon, and that merge finds its records."""

import json
import os

import pytest

from redisd import REDIS_SERVER
from test_92_stream import batch_hash, stream_config, wait_for, xadd_lines

pytestmark = pytest.mark.skipif(not REDIS_SERVER, reason="redis-server is not installed")

# 24 CJK characters and ".txt": 76 bytes, 220 once spelled for a file name (%XX a byte).
CJK = "\u6570\u636e\u6293\u53d6\u4efb\u52a1" * 4 + ".txt"


def test_96_01_a_batch_name_too_long_for_a_file_name(redis_server, start_daemon, spool, origin,
                                                      harvestd, tmp_path):
    """The name's spelling with the default consumer (HOSTNAME:SPOOL_DIR) is longer than a file
    name may be: creating the output failed with ENAMETOOLONG, fatal, at every restart. The
    output name is now shortened with a hash of the whole name; the daemon goes on, and merge
    finds the output by the batch's name."""
    c = redis_server.client()
    lines = xadd_lines(c, CJK, [origin.url("/page?title=n%d" % i) for i in range(3)])
    xadd_lines(c, "plain", [origin.url("/page?title=p")])
    d = start_daemon(**stream_config(redis_server))
    wait_for(lambda: batch_hash(c, CJK).get("done", 0) == 3 and
             batch_hash(c, "plain").get("done", 0) == 1, 20, "every entry acknowledged", [d])
    assert batch_hash(c, CJK)["ok"] == 3
    names = [n for n in os.listdir(spool.path("out")) if n.endswith(".jsonl")]
    assert len(names) == 2, names
    for n in names:
        assert len(n.encode()) + len(".crashes") - len(".jsonl") <= 255, n
    assert d.stop() == 0
    merged = tmp_path / "merged.jsonl"
    r = harvestd.command("merge", "--batch", CJK, "-o", merged, spool.root)
    assert r.returncode == 0, r.stderr
    recs = [json.loads(x) for x in merged.read_bytes().split(b"\n")[:-1]]
    assert sorted(r["line"] for r in recs) == sorted(lines)
    assert all(r["batch"] == CJK and r["status"] == "ok" for r in recs)


def test_96_02_two_long_names_alike_but_for_their_end(redis_server, start_daemon, spool, origin):
    """Two 10 KB batch names that differ only at their end shared one output and one counter
    (S:batch:?). Each now has its own output and its own counts."""
    c = redis_server.client()
    a, b = "x" * 9999 + "a", "x" * 9999 + "b"
    xadd_lines(c, a, [origin.url("/page?title=a%d" % i) for i in range(2)])
    xadd_lines(c, b, [origin.url("/page?title=b")])
    d = start_daemon(**stream_config(redis_server, redis_consumer="n"))
    wait_for(lambda: batch_hash(c, a).get("done", 0) == 2 and batch_hash(c, b).get("done", 0) == 1,
             20, "each batch's own acknowledgements", [d])
    assert c.call("EXISTS", "harvestd:urls:batch:?") == 0
    outs = sorted(n for n in os.listdir(spool.path("out")) if n.endswith(".jsonl"))
    assert len(outs) == 2, outs
    counts = sorted(len(open(spool.path("out", n), "rb").read().splitlines()) for n in outs)
    assert counts == [1, 2]
    assert d.stop() == 0
