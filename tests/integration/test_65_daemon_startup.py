"""The daemon's start-up. Without inotify (the host's watch limit used up, no instance left) it
warns once and finds files by the periodic rescan alone; a watch refused for another reason
exits 2 with one line naming the cause, having touched nothing and leaked nothing (the harness
checks stderr for sanitizer reports and leftover handles on every exit).

The faults come from the fault-injection shim (harness.fault_shim, preloaded)."""

import pytest

from harness import page_urls, preload_env, wait_complete


def expect_startup_failure(d, *fragments, timeout=10):
    """The daemon `d` exits 2 before its start, with exactly one line on stderr that holds every
    fragment (case aside); returns that line."""
    rc = d.wait(timeout=timeout)
    stderr = d.stderr_text()
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert rc == 2, "exit status %d, expected 2 for a start-up failure\n%s" % (rc, stderr)
    assert len(lines) == 1, "a start-up failure says one line, got %d:\n%s" % (len(lines), stderr)
    line = lines[0]
    assert line.startswith("harvestd: ") and "event=start" not in line, line
    for fragment in fragments:
        assert fragment.lower() in line.lower(), "%r does not name %r" % (line, fragment)
    return line


# ---------------------------------------------------------------------------- without inotify


@pytest.mark.parametrize("fault,errno_name,text", [
    ("HV_FAULT_INOTIFY_ADD_WATCH", "ENOSPC", "no space left on device"),
    ("HV_FAULT_INOTIFY_INIT", "EMFILE", "too many open files"),
], ids=["watch-limit", "instance-limit"])
def test_65_01_without_inotify_the_rescan_finds_files(start_daemon, spool, origin, fault,
                                                      errno_name, text):
    """inotify refused (inotify_add_watch: ENOSPC when the host's watch limit is used up;
    inotify_init1: EMFILE): one warning naming the directory and the cause and saying that the
    periodic rescan (rescan_interval) takes over; files dropped before and after the start are
    processed all the same, and the daemon stops cleanly."""
    first = spool.drop("before.txt", page_urls(origin, "before", 2))
    d = start_daemon(env=preload_env(**{fault: errno_name}), rescan_interval="300ms")
    warnings = d.events("watch_unavailable")
    assert len(warnings) == 1, d.stderr_text()
    w = warnings[0]
    assert w["level"] == "warning", w
    assert w["dir"] == spool.path("incoming"), w
    assert text in w["error"].lower() and errno_name in w["error"], w
    assert w["rescan_interval_ms"] == "300", w
    assert "periodic rescan" in w["note"] and "rescan_interval" in w["note"], w
    wait_complete(d, spool, ["before.txt"], timeout=10)
    second = spool.drop("after.txt", page_urls(origin, "after", 2))
    wait_complete(d, spool, ["after.txt"], timeout=10)
    for name, data in (("before.txt", first), ("after.txt", second)):
        assert len(spool.records(name)) == len(data.splitlines())
    assert len(d.events("watch_unavailable")) == 1, "warned more than once"
    assert d.stop() == 0


def test_65_02_a_watch_refused_otherwise_is_a_start_up_failure(start_daemon, spool, origin):
    """A watch refused for another reason than a resource limit (EACCES: incoming/ cannot be
    read, so no rescan could list it either) stops the start: exit 2, one line, nothing
    claimed."""
    spool.drop("waiting.txt", page_urls(origin, "waiting", 1))
    d = start_daemon(env=preload_env(HV_FAULT_INOTIFY_ADD_WATCH="EACCES"), ready=False)
    expect_startup_failure(d, "cannot watch", spool.path("incoming"), "permission denied")
    assert spool.files("incoming") == ["waiting.txt"] and spool.files("active") == []
