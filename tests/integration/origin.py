"""A scripted HTTP/1.1 origin for the integration tests.

The server speaks HTTP/1.1 over raw asyncio streams, so it can misbehave in ways a real server
will not (reset mid-body, drip bytes, send garbage, close a keep-alive connection behind the
client's back). It listens on 127.0.0.1 on a kernel-chosen port and runs its own event loop in a
background thread: start() returns once it accepts connections, stop() closes the listener, every
client connection and the loop.

Behaviour is chosen by the request path and query string; see ROUTES at the bottom of the class.
Every response that carries an HTML page has a <title>, so a record that is not "ok" failed for the
reason the endpoint scripts and not for a missing title.

Counters (read them from the test thread with snapshot() or the attributes):
  connections_accepted, requests_served (complete responses handed to the socket), requests
  (every parsed request: method, target, version, headers), max_open_connections, max_inflight
  (requests being answered at the same time), stale_drops (requests that arrived on a connection
  the server had abandoned: /close-after-response, /page?close=1, /page?v10=1).
Every Request carries `time` (time.monotonic() when its head was parsed), so tests can measure
the gaps between requests at the server. /limit keeps a log per key (limit_log) and /robots.txt
one of its own (robots_log); see the handlers.

Politeness endpoints (retries, pacing, robots.txt): /seq?key=&steps= answers each request of a
key with the next scripted step (status, reset or ok), /limit?key=&max= refuses with 429 while
more than `max` requests of the key are in flight, /robots.txt serves what set_robots() chose
(404 until then), and serve_any_path=True answers any unknown path with a page.
"""

import asyncio
import email.utils
import functools
import gzip
import http
import math
import socket
import struct
import threading
import time
import urllib.parse

MAX_REQUEST_HEAD = 64 * 1024


class Request:
    """One parsed request (plain data, safe to read from any thread)."""

    def __init__(self, method, target, version, headers, conn_id):
        self.method = method
        self.target = target
        self.version = version
        self.headers = headers  # list of (name, value) in arrival order
        self.conn_id = conn_id
        self.time = time.monotonic()  # when the head was parsed (server side)
        split = urllib.parse.urlsplit(target)
        self.path = split.path
        self.query = {k: v[0] for k, v in urllib.parse.parse_qs(split.query, keep_blank_values=True).items()}

    def header(self, name):
        """First value of header `name` (case-insensitive), or None."""
        name = name.lower()
        for k, v in self.headers:
            if k.lower() == name:
                return v
        return None

    def header_all(self, name):
        name = name.lower()
        return [v for k, v in self.headers if k.lower() == name]

    def __repr__(self):
        return "Request(%s %s conn=%d)" % (self.method, self.target, self.conn_id)


class _Conn:
    """Per-connection state of the origin."""

    def __init__(self, conn_id, reader, writer):
        self.id = conn_id
        self.reader = reader
        self.writer = writer
        self.poisoned = False  # set by /close-after-response: the next request is dropped


class _Close(Exception):
    """Raised by a handler to end the connection without further writes."""


@functools.lru_cache(maxsize=128)
def html_page(title="Page", size=0, head_extra="", body_text=""):
    """An HTML document with `title`, padded with plain text to exactly `size` bytes when `size`
    is larger than the bare document."""
    head = ('<!DOCTYPE html>\n<html><head><meta charset="utf-8"><title>%s</title>%s</head><body>\n'
            % (title, head_extra)).encode("utf-8")
    body = body_text.encode("utf-8")
    tail = b"\n</body></html>\n"
    pad = size - len(head) - len(body) - len(tail)
    if pad > 0:
        filler = b"lorem ipsum dolor sit amet consectetur\n"
        body += (filler * (pad // len(filler) + 1))[:pad]
    return head + body + tail


def _int(query, name, default):
    try:
        return int(query.get(name, default))
    except ValueError:
        return default


def _float(query, name, default):
    try:
        return float(query.get(name, default))
    except ValueError:
        return default


class Origin:
    """The scripted origin server. Use as a context manager or call start()/stop()."""

    HTML = "text/html; charset=utf-8"

    def __init__(self, name="origin"):
        self.name = name
        self.port = None
        self._loop = None
        self._thread = None
        self._server = None
        self._ready = threading.Event()
        self._start_error = None
        self._conns = {}
        self._tasks = set()
        self._holds = {}
        self._lock = threading.Lock()
        self._next_conn = 0
        # /robots.txt: None answers 404 like any unknown path; set_robots() scripts it.
        self._robots = None
        # Unknown paths answer 404 unless this is set (then a 200 page titled with the path).
        self.serve_any_path = False
        self.reset()

    # ---------------------------------------------------------------- lifecycle

    def start(self):
        self._thread = threading.Thread(target=self._run, name="origin-" + self.name, daemon=True)
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("origin %s did not start" % self.name)
        if self._start_error:
            raise self._start_error
        return self

    def stop(self):
        if self._loop is None:
            return
        loop = self._loop
        try:
            fut = asyncio.run_coroutine_threadsafe(self._shutdown(), loop)
            fut.result(timeout=10)
        finally:
            loop.call_soon_threadsafe(loop.stop)
            self._thread.join(10)
            self._loop = None

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    def _run(self):
        loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        try:
            self._server = loop.run_until_complete(asyncio.start_server(
                self._on_client, "127.0.0.1", 0, limit=MAX_REQUEST_HEAD + 1024, backlog=1024))
            self.port = self._server.sockets[0].getsockname()[1]
            self._loop = loop
        except Exception as e:  # reported by start()
            self._start_error = e
            self._ready.set()
            loop.close()
            return
        self._ready.set()
        try:
            loop.run_forever()
        finally:
            pending = [t for t in asyncio.all_tasks(loop) if not t.done()]
            for t in pending:
                t.cancel()
            if pending:
                loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
            loop.close()

    async def _shutdown(self):
        self._server.close()
        for conn in list(self._conns.values()):
            conn.writer.transport.abort()
        tasks = [t for t in self._tasks if not t.done()]
        for t in tasks:
            t.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
        try:
            await asyncio.wait_for(self._server.wait_closed(), 5)
        except asyncio.TimeoutError:
            pass

    # ---------------------------------------------------------------- counters

    def reset(self):
        """Zero every counter (the server keeps running)."""
        with self._lock:
            self.connections_accepted = 0
            self.requests_served = 0
            self.requests = []
            self.open_connections = 0
            self.max_open_connections = 0
            self.inflight = 0
            self.max_inflight = 0
            self.stale_drops = 0
            self._seq_counts = {}
            self._limit_inflight = {}
            self.limit_log = {}
            self.robots_log = []

    def snapshot(self):
        with self._lock:
            return {
                "connections_accepted": self.connections_accepted,
                "requests_served": self.requests_served,
                "requests": list(self.requests),
                "open_connections": self.open_connections,
                "max_open_connections": self.max_open_connections,
                "max_inflight": self.max_inflight,
                "stale_drops": self.stale_drops,
            }

    def requests_to(self, path):
        """Requests whose path is `path` exactly."""
        with self._lock:
            return [r for r in self.requests if r.path == path]

    def find_request(self, marker):
        """Requests whose target contains `marker`."""
        with self._lock:
            return [r for r in self.requests if marker in r.target]

    def set_robots(self, body, status=200, delay=0.0, content_type="text/plain"):
        """Script /robots.txt: `body` (str or bytes) with `status`, answered after `delay`
        seconds. set_robots(None) goes back to 404 (no robots.txt)."""
        if body is None:
            self._robots = None
            return
        if isinstance(body, str):
            body = body.encode("utf-8")
        self._robots = (status, body, delay, content_type)

    def times(self, marker):
        """Server arrival times (monotonic) of the requests whose target contains `marker`."""
        return [r.time for r in self.find_request(marker)]

    def limit_entries(self, key):
        """The /limit?key=KEY log: (arrival time, requests of the key in flight counting this
        one, status answered), in arrival order."""
        with self._lock:
            return list(self.limit_log.get(key, []))

    def release(self, key):
        """Let the /hold?key=KEY requests (now waiting or still to come) answer."""
        def _set():
            self._holds.setdefault(key, asyncio.Event()).set()
        self._loop.call_soon_threadsafe(_set)

    def url(self, path_and_query="/"):
        return "http://127.0.0.1:%d%s" % (self.port, path_and_query)

    # ---------------------------------------------------------------- connection loop

    async def _on_client(self, reader, writer):
        task = asyncio.current_task()
        self._tasks.add(task)
        with self._lock:
            self._next_conn += 1
            conn = _Conn(self._next_conn, reader, writer)
            self.connections_accepted += 1
            self.open_connections += 1
            self.max_open_connections = max(self.max_open_connections, self.open_connections)
        self._conns[conn.id] = conn
        try:
            while True:
                req = await self._read_request(conn)
                if req is None:
                    break
                if conn.poisoned:
                    # Behave as if the server had closed this idle connection just before the
                    # request arrived: drop it without a byte of response.
                    with self._lock:
                        self.stale_drops += 1
                    break
                with self._lock:
                    self.inflight += 1
                    self.max_inflight = max(self.max_inflight, self.inflight)
                try:
                    keep = await self._dispatch(conn, req)
                finally:
                    with self._lock:
                        self.inflight -= 1
                if not keep:
                    break
        except (_Close, ConnectionError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
            pass
        except asyncio.CancelledError:
            pass
        finally:
            with self._lock:
                self.open_connections -= 1
            self._conns.pop(conn.id, None)
            writer.close()
            self._tasks.discard(task)

    async def _read_request(self, conn):
        try:
            head = await conn.reader.readuntil(b"\r\n\r\n")
        except asyncio.IncompleteReadError:
            return None
        except asyncio.LimitOverrunError:
            await self._respond(conn, None, 431, b"", keep_alive=False)
            return None
        lines = head[:-4].decode("latin-1").split("\r\n")
        parts = lines[0].split(" ")
        if len(parts) != 3:
            await self._respond(conn, None, 400, b"", keep_alive=False)
            return None
        headers = []
        for line in lines[1:]:
            name, sep, value = line.partition(":")
            if not sep:
                await self._respond(conn, None, 400, b"", keep_alive=False)
                return None
            headers.append((name.strip(), value.strip()))
        req = Request(parts[0], parts[1], parts[2], headers, conn.id)
        with self._lock:
            self.requests.append(req)
        length = req.header("content-length")
        if length:
            await conn.reader.readexactly(int(length))
        return req

    async def _dispatch(self, conn, req):
        handler = self.ROUTES.get(req.path)
        if handler is None:
            for prefix, h in self.PREFIX_ROUTES:
                if req.path.startswith(prefix):
                    handler = h
                    break
        if handler is None:
            handler = Origin._h_any if self.serve_any_path else Origin._h_not_found
        return await handler(self, conn, req)

    # ---------------------------------------------------------------- response helpers

    @staticmethod
    def _wants_close(req):
        if req is None:
            return True
        connection = (req.header("connection") or "").lower()
        if req.version == "HTTP/1.0":
            return "keep-alive" not in connection
        return "close" in connection

    async def _respond(self, conn, req, status, body, headers=(), keep_alive=True,
                       content_type=None, length=True, version="HTTP/1.1"):
        """Write a whole response. Returns whether the connection stays open."""
        keep_alive = keep_alive and not self._wants_close(req)
        phrase = http.HTTPStatus(status).phrase if status in http.HTTPStatus._value2member_map_ else "Status"
        out = ["%s %d %s" % (version, status, phrase)]
        if content_type:
            out.append("Content-Type: " + content_type)
        out.extend(headers)
        if length:
            out.append("Content-Length: %d" % len(body))
        if not keep_alive:
            out.append("Connection: close")
        data = ("\r\n".join(out) + "\r\n\r\n").encode("latin-1") + body
        self._count_served()
        conn.writer.write(data)
        await conn.writer.drain()
        return keep_alive

    def _count_served(self):
        # Counted before the last bytes are written, so a client that has read a whole response
        # always finds it counted.
        with self._lock:
            self.requests_served += 1

    def _abandon(self, conn, delay):
        """Treat `conn` as closed by the server: a request that still arrives on it is dropped
        unanswered (counted in stale_drops), and it is closed after `delay` seconds."""
        conn.poisoned = True
        asyncio.get_running_loop().call_later(delay, conn.writer.transport.close)

    async def _flush(self, conn):
        """Wait until asyncio handed every queued byte to the kernel."""
        await conn.writer.drain()
        while conn.writer.transport.get_write_buffer_size():
            await asyncio.sleep(0.005)

    async def _send_head(self, conn, status, headers):
        data = ("HTTP/1.1 %d %s\r\n" % (status, http.HTTPStatus(status).phrase)
                + "".join(h + "\r\n" for h in headers) + "\r\n").encode("latin-1")
        conn.writer.write(data)
        await conn.writer.drain()

    # ---------------------------------------------------------------- handlers

    async def _h_not_found(self, conn, req):
        return await self._respond(conn, req, 404, html_page("Not Found"), content_type=self.HTML)

    async def _h_page(self, conn, req):
        """/page?title=X&size=N&ct=TYPE&delay=S: a page of `size` bytes after `delay` seconds.

        close=1 answers with "Connection: close", v10=1 as HTTP/1.0 (no keep-alive): in both
        cases a client must not send another request on the connection. The server keeps it
        open for half a second and drops any request that arrives (see stale_drops), so a
        client that reuses it anyway is caught."""
        q = req.query
        delay = _float(q, "delay", 0)
        if delay:
            await asyncio.sleep(delay)
        body = html_page(q.get("title", "Page"), _int(q, "size", 0))
        ct = q.get("ct", self.HTML)
        if q.get("close") == "1" or q.get("v10") == "1":
            v10 = q.get("v10") == "1"
            await self._respond(conn, req, 200, body, content_type=ct,
                                headers=[] if v10 else ["Connection: close"],
                                version="HTTP/1.0" if v10 else "HTTP/1.1")
            self._abandon(conn, 0.5)
            return True
        return await self._respond(conn, req, 200, body, content_type=ct)

    async def _h_raw(self, conn, req):
        """/raw?body=TEXT (or hex=BYTES)&ct=TYPE: any body, text/html by default."""
        if "hex" in req.query:
            body = bytes.fromhex(req.query["hex"])
        else:
            body = req.query.get("body", "").encode("utf-8")
        return await self._respond(conn, req, 200, body, content_type=req.query.get("ct", self.HTML))

    async def _h_type(self, conn, req):
        """/type?ct=application/json: an HTML page with any Content-Type (empty: none)."""
        ct = req.query.get("ct", "application/json")
        return await self._respond(conn, req, 200, html_page("Typed"), content_type=ct or None)

    async def _h_status(self, conn, req):
        """/status/N: status N with an HTML body that has a title."""
        try:
            code = int(req.path.rsplit("/", 1)[1])
        except ValueError:
            code = 400
        body = html_page("Status %d" % code)
        return await self._respond(conn, req, code, body, content_type=self.HTML)

    REDIRECT_CODES = (302, 301, 303, 307, 308)

    async def _h_redirect(self, conn, req):
        """/redirect/N: a chain of N relative redirects ending at a page titled "final".

        The Location forms rotate so the client must resolve each of them per RFC 3986:
        "../redirect/N-1", "/redirect/N-1" and the bare "N-1" (same directory); the status codes
        rotate over 301/302/303/307/308. ?delay=S delays every hop (the query is carried along);
        ?abandon=S abandons the connection after every hop (see /close-after-response)."""
        try:
            n = int(req.path.rsplit("/", 1)[1])
        except ValueError:
            n = 0
        delay = _float(req.query, "delay", 0)
        if delay:
            await asyncio.sleep(delay)
        if n <= 0:
            return await self._respond(conn, req, 200, html_page("final"), content_type=self.HTML)
        form = n % 3
        if form == 0:
            location = "../redirect/%d" % (n - 1)
        elif form == 1:
            location = "/redirect/%d" % (n - 1)
        else:
            location = "%d" % (n - 1)
        query = urllib.parse.urlsplit(req.target).query
        if query:
            location += "?" + query
        code = self.REDIRECT_CODES[n % len(self.REDIRECT_CODES)]
        keep = await self._respond(conn, req, code, html_page("Moved"), content_type=self.HTML,
                                   headers=["Location: " + location])
        if keep and "abandon" in req.query:
            self._abandon(conn, _float(req.query, "abandon", 0.3))
        return keep

    async def _h_redir(self, conn, req):
        """/redir?code=302&to=TARGET: one redirect to TARGET (any reference, sent verbatim)."""
        code = _int(req.query, "code", 302)
        to = req.query.get("to", "/page?title=redirected")
        return await self._respond(conn, req, code, b"", headers=["Location: " + to])

    async def _h_loop(self, conn, req):
        """/loop: redirects to itself."""
        return await self._respond(conn, req, 302, b"", headers=["Location: /loop"])

    async def _h_slow_headers(self, conn, req):
        """/slow-headers?delay=2&title=X: sleep, then a normal page."""
        await asyncio.sleep(_float(req.query, "delay", 2))
        body = html_page(req.query.get("title", "Slow"))
        return await self._respond(conn, req, 200, body, content_type=self.HTML)

    async def _h_hold(self, conn, req):
        """/hold?key=K&title=X&max=30: answer with a page once the test calls release(K) (or
        after `max` seconds)."""
        event = self._holds.setdefault(req.query.get("key", "default"), asyncio.Event())
        try:
            await asyncio.wait_for(event.wait(), _float(req.query, "max", 30))
        except asyncio.TimeoutError:
            pass
        body = html_page(req.query.get("title", "Held"))
        return await self._respond(conn, req, 200, body, content_type=self.HTML)

    async def _h_drip(self, conn, req):
        """/drip?interval=0.3&count=100&title=X: headers and the start of the page at once, then
        `count` more body bytes, one every `interval` seconds."""
        interval = _float(req.query, "interval", 0.3)
        count = _int(req.query, "count", 100)
        prefix = html_page(req.query.get("title", "Drip"))
        await self._send_head(conn, 200, ["Content-Type: " + self.HTML,
                                          "Content-Length: %d" % (len(prefix) + count)])
        conn.writer.write(prefix)
        await conn.writer.drain()
        for i in range(count):
            await asyncio.sleep(interval)
            if i == count - 1:
                self._count_served()
            conn.writer.write(b" ")
            await conn.writer.drain()
        if count <= 0:
            self._count_served()
        return not self._wants_close(req)

    async def _h_reset_mid_body(self, conn, req):
        """/reset-mid-body?send=1000: announce 100000 bytes, send `send`, then reset (RST)."""
        send = _int(req.query, "send", 1000)
        body = html_page("Reset", 100000)
        await self._send_head(conn, 200, ["Content-Type: " + self.HTML,
                                          "Content-Length: %d" % len(body)])
        conn.writer.write(body[:send])
        await self._flush(conn)
        await asyncio.sleep(0.05)
        sock = conn.writer.get_extra_info("socket")
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        conn.writer.transport.abort()
        raise _Close()

    async def _h_close_mid_body(self, conn, req):
        """/close-mid-body?send=1000: announce 100000 bytes, send `send`, then close (FIN)."""
        send = _int(req.query, "send", 1000)
        body = html_page("Closed", 100000)
        await self._send_head(conn, 200, ["Content-Type: " + self.HTML,
                                          "Content-Length: %d" % len(body)])
        conn.writer.write(body[:send])
        await self._flush(conn)
        await asyncio.sleep(0.05)
        conn.writer.close()
        raise _Close()

    async def _h_big(self, conn, req):
        """/big?size=N&cl=1|0&chunked=0|1: a page of N bytes with Content-Length (cl=1), chunked
        (chunked=1) or delimited by closing the connection (cl=0, chunked=0)."""
        size = _int(req.query, "size", 1000000)
        body = html_page(req.query.get("title", "Big"), size)
        if req.query.get("chunked") == "1":
            await self._send_chunked(conn, body, 16384)
            return not self._wants_close(req)
        if req.query.get("cl", "1") == "1":
            return await self._respond(conn, req, 200, body, content_type=self.HTML)
        await self._respond(conn, req, 200, body, content_type=self.HTML, keep_alive=False,
                            length=False)
        await self._flush(conn)
        conn.writer.close()
        raise _Close()

    async def _send_chunked(self, conn, body, chunk, head_status=200, truncate=False,
                            content_encoding=None):
        headers = ["Content-Type: " + self.HTML, "Transfer-Encoding: chunked"]
        if content_encoding:
            headers.append("Content-Encoding: " + content_encoding)
        await self._send_head(conn, head_status, headers)
        pieces = []
        for i in range(0, len(body), chunk):
            part = body[i:i + chunk]
            pieces.append(b"%x\r\n%s\r\n" % (len(part), part))
        data = b"".join(pieces)
        if truncate:
            conn.writer.write(data[:len(data) // 2])
            await self._flush(conn)
            await asyncio.sleep(0.05)
            conn.writer.close()
            raise _Close()
        self._count_served()
        conn.writer.write(data + b"0\r\n\r\n")
        await conn.writer.drain()

    async def _h_chunked(self, conn, req):
        """/chunked?title=X&size=N&chunk=K: chunked body in K-byte chunks (default 7, so the
        title is split across chunks)."""
        body = html_page(req.query.get("title", "Chunked"), _int(req.query, "size", 0))
        await self._send_chunked(conn, body, max(1, _int(req.query, "chunk", 7)))
        return not self._wants_close(req)

    async def _h_chunked_truncated(self, conn, req):
        """/chunked-truncated: a chunked body cut in the middle by closing the connection."""
        body = html_page("Truncated", 20000)
        await self._send_chunked(conn, body, 1000, truncate=True)

    async def _h_gzip(self, conn, req):
        """/gzip?title=X&size=N&corrupt=0|1&chunked=0|1: a gzip-encoded page (always, whatever
        Accept-Encoding said). corrupt=1 sends bytes that are not gzip at all."""
        body = html_page(req.query.get("title", "Gzipped"), _int(req.query, "size", 0))
        if req.query.get("corrupt") == "1":
            data = b"this is not gzip data, it only claims to be" * 10
        else:
            data = gzip.compress(body, mtime=0)
        if req.query.get("chunked") == "1":
            await self._send_chunked(conn, data, 1000, content_encoding="gzip")
            return not self._wants_close(req)
        return await self._respond(conn, req, 200, data, content_type=self.HTML,
                                   headers=["Content-Encoding: gzip", "Vary: Accept-Encoding"])

    async def _h_notitle(self, conn, req):
        """/notitle: a page without <title>; /notitle?empty=1: an empty (blank) <title>."""
        if req.query.get("empty") == "1":
            body = b"<!DOCTYPE html>\n<html><head><title> \n\t </title></head><body>x</body></html>\n"
        else:
            body = b"<!DOCTYPE html>\n<html><head></head><body><h1>No title here</h1></body></html>\n"
        return await self._respond(conn, req, 200, body, content_type=self.HTML)

    async def _h_nested(self, conn, req):
        """/nested?depth=N: N nested <div> elements inside <body>."""
        depth = _int(req.query, "depth", 100)
        body = ('<!DOCTYPE html>\n<html><head><title>Nested</title></head><body>'
                + "<div>" * depth + "deep" + "</div>" * depth + "</body></html>\n").encode()
        return await self._respond(conn, req, 200, body, content_type=self.HTML)

    async def _h_huge_header(self, conn, req):
        """/huge-header?kib=70: response headers totalling about `kib` KiB, then a page."""
        kib = _int(req.query, "kib", 70)
        headers = ["X-Filler-%04d: %s" % (i, "h" * 1000) for i in range(kib)]
        return await self._respond(conn, req, 200, html_page("Huge header"), headers=headers,
                                   content_type=self.HTML)

    async def _h_garbage(self, conn, req):
        """/garbage: bytes that are not an HTTP response, then close."""
        conn.writer.write(b"SSH-2.0-OpenSSH_9.2\r\nthis is not http\r\n\r\n")
        await self._flush(conn)
        conn.writer.close()
        raise _Close()

    async def _h_bad_length(self, conn, req):
        """/bad-content-length: a non-numeric Content-Length."""
        conn.writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: 12abc\r\n"
                          b"\r\n<title>x</title>")
        await self._flush(conn)
        conn.writer.close()
        raise _Close()

    async def _h_close_after_response(self, conn, req):
        """/close-after-response?delay=0.05&title=X: a normal keep-alive response (no
        "Connection: close"), after which the server abandons the connection: it closes it after
        `delay` seconds, and a request that arrives on it before that is dropped unanswered."""
        delay = _float(req.query, "delay", 0.05)
        keep = await self._respond(conn, req, 200, html_page(req.query.get("title", "Stale")),
                                   content_type=self.HTML)
        if not keep:
            return False
        self._abandon(conn, delay)
        return True

    # ------------------------------------------------ politeness: retries, pacing, robots.txt

    async def _h_any(self, conn, req):
        """Any unknown path when serve_any_path is set: a 200 page titled with the path."""
        return await self._respond(conn, req, 200, html_page(req.path), content_type=self.HTML)

    def _next_step(self, key, steps):
        with self._lock:
            n = self._seq_counts.get(key, 0)
            self._seq_counts[key] = n + 1
        return steps[min(n, len(steps) - 1)]

    async def _reset(self, conn):
        """Reset the connection (RST) without a byte of response."""
        sock = conn.writer.get_extra_info("socket")
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        conn.writer.transport.abort()
        raise _Close()

    async def _h_seq(self, conn, req):
        """/seq?key=K&steps=503,reset,ok&title=T&delay=S&ra=V&ra_date=S&hang=S: the n-th
        request of key K (counted per origin since the last reset()) takes step n of `steps`
        (the last step repeats): a status code (a page titled "Status N"), "reset" (the
        connection is reset before any response), "hang" (the page, after `hang` seconds,
        default 5) or "ok" (a 200 page titled T). Error statuses carry "Retry-After: V" with
        ra=V, or an HTTP-date S seconds after the next whole second with ra_date=S. delay=S
        waits before every answer."""
        q = req.query
        step = self._next_step(q.get("key", req.target), (q.get("steps") or "ok").split(","))
        delay = _float(q, "delay", 0)
        if delay:
            await asyncio.sleep(delay)
        if step == "hang":
            await asyncio.sleep(_float(q, "hang", 5))
            step = "ok"
        if step == "reset":
            await self._reset(conn)
        if step == "ok":
            return await self._respond(conn, req, 200, html_page(q.get("title", "Seq")),
                                       content_type=self.HTML)
        try:
            code = int(step)
        except ValueError:
            code = 500
        headers = []
        if "ra" in q:
            headers.append("Retry-After: " + q["ra"])
        elif "ra_date" in q:
            when = math.ceil(time.time()) + _float(q, "ra_date", 0)
            headers.append("Retry-After: " + email.utils.formatdate(when, usegmt=True))
        return await self._respond(conn, req, code, html_page("Status %d" % code),
                                   content_type=self.HTML, headers=headers)

    async def _h_limit(self, conn, req):
        """/limit?key=K&max=2&delay=0.3&rdelay=0&title=T: a server that can take `max` requests
        of key K at a time. A request that arrives while `max` of them are in flight (answered or
        being refused) gets 429 (no Retry-After) after `rdelay` seconds; the others get a page
        after `delay` seconds. Every arrival is logged in limit_log[K] as (time, requests of K in
        flight counting itself, status)."""
        q = req.query
        key = q.get("key", "default")
        limit = _int(q, "max", 2)
        with self._lock:
            now_inflight = self._limit_inflight.get(key, 0) + 1
            self._limit_inflight[key] = now_inflight
            refused = now_inflight > limit
            self.limit_log.setdefault(key, []).append((req.time, now_inflight, 429 if refused else 200))
        try:
            await asyncio.sleep(_float(q, "rdelay" if refused else "delay", 0 if refused else 0.3))
        finally:
            with self._lock:
                self._limit_inflight[key] -= 1
        if refused:
            return await self._respond(conn, req, 429, html_page("Too Many Requests"),
                                       content_type=self.HTML)
        return await self._respond(conn, req, 200, html_page(q.get("title", "Limited")),
                                   content_type=self.HTML)

    async def _h_robots(self, conn, req):
        """/robots.txt: what set_robots() scripted (404 otherwise). Each answer is logged in
        robots_log as (arrival time, time its response is written), before it is written."""
        robots = self._robots
        if robots is None:
            return await self._h_not_found(conn, req)
        status, body, delay, ct = robots
        if delay:
            await asyncio.sleep(delay)
        with self._lock:
            self.robots_log.append((req.time, time.monotonic()))
        return await self._respond(conn, req, status, body, content_type=ct)

    # ------------------------------------------------ content: stored responses

    def put_response(self, body, content_type=HTML, headers=()):
        """Store a response for /stored and return its path ("/stored?id=N"): `body` (bytes, or
        str encoded as UTF-8) with `content_type` (None: no Content-Type) and extra header lines
        such as "Content-Encoding: gzip". For bodies too large for /raw's query string and for
        responses that need headers of their own; stored responses live as long as the origin."""
        if isinstance(body, str):
            body = body.encode("utf-8")
        with self._lock:
            stored = self.__dict__.setdefault("_stored", {})
            key = str(len(stored) + 1)
            stored[key] = (bytes(body), content_type, tuple(headers))
        return "/stored?id=" + key

    async def _h_stored(self, conn, req):
        """/stored?id=N: the response put_response() stored under N (404 if there is none)."""
        with self._lock:
            entry = self.__dict__.get("_stored", {}).get(req.query.get("id", ""))
        if entry is None:
            return await self._h_not_found(conn, req)
        body, ct, headers = entry
        return await self._respond(conn, req, 200, body, content_type=ct, headers=list(headers))

    ROUTES = {
        "/page": _h_page,
        "/raw": _h_raw,
        "/type": _h_type,
        "/redir": _h_redir,
        "/loop": _h_loop,
        "/slow-headers": _h_slow_headers,
        "/hold": _h_hold,
        "/drip": _h_drip,
        "/reset-mid-body": _h_reset_mid_body,
        "/close-mid-body": _h_close_mid_body,
        "/big": _h_big,
        "/chunked": _h_chunked,
        "/chunked-truncated": _h_chunked_truncated,
        "/gzip": _h_gzip,
        "/notitle": _h_notitle,
        "/nested": _h_nested,
        "/huge-header": _h_huge_header,
        "/garbage": _h_garbage,
        "/bad-content-length": _h_bad_length,
        "/close-after-response": _h_close_after_response,
        "/seq": _h_seq,
        "/limit": _h_limit,
        "/robots.txt": _h_robots,
        "/stored": _h_stored,
    }
    PREFIX_ROUTES = (
        ("/status/", _h_status),
        ("/redirect/", _h_redirect),
    )


def free_port():
    """A TCP port on 127.0.0.1 that nothing listens on (bound, then released)."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
    finally:
        s.close()


class BlackHole:
    """A listener whose accept queue is full, so further SYNs to it go unanswered and a connect()
    times out. Linux drops SYNs to a listener with a full accept queue; backlog 0 holds one
    connection, which we fill ourselves."""

    def __init__(self):
        self._listener = None
        self._fillers = []
        self.port = None

    def start(self):
        self._listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(0)
        self.port = self._listener.getsockname()[1]
        for _ in range(3):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.setblocking(False)
            s.connect_ex(("127.0.0.1", self.port))
            self._fillers.append(s)
        # Wait until one filler is established (in the accept queue) and a later one is not.
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            if self._fillers[0].getsockopt(socket.SOL_SOCKET, socket.SO_ERROR) == 0:
                try:
                    self._fillers[0].getpeername()
                    break
                except OSError:
                    pass
            time.sleep(0.01)
        return self

    def stop(self):
        for s in self._fillers:
            s.close()
        self._fillers = []
        if self._listener:
            self._listener.close()
            self._listener = None

    def url(self, path="/"):
        return "http://127.0.0.1:%d%s" % (self.port, path)
