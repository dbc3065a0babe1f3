#!/usr/bin/env python3
"""igprof-navigator serves a database written by igprof-analyse --sqlite: the
entry list, an entry page with its callers and callees, 404s; it refuses a file
that is not a report database. It serves clients concurrently: a client that
sends one byte every 2 s (or nothing) holds only its own connection, which is
closed at the request deadline (-t), while other clients get complete pages.
HEAD answers with GET's headers and no body; bad requests get their status;
long lists stop at 1'000 rows; errors name the program.

Time bounds (unavoidable for a server): a page takes about 10-50 ms here even
under load, so each request of the concurrent clients must finish within 5 s
(ten times a pessimistic 0.5 s); the slow client's connection must be closed
between the deadline (4 s) and 4 + 6 s (the server wakes for deadlines; 6 s of
slack for a loaded machine)."""
import os, re, socket, subprocess, sys, tempfile, threading, time

analyse, navigator, dump = sys.argv[1:4]
ROUNDS = int(sys.argv[sys.argv.index("--rounds") + 1]) if "--rounds" in sys.argv else 1
d = tempfile.mkdtemp()
db = os.path.join(d, "r.sql3")
subprocess.run([analyse, "--sqlite", db, dump], check=True)
fail = []
TIMEOUT = 4

# A wide profile: main calls g1..g1500, each calls h (1'500 callers).
wide_dump, wide_db = os.path.join(d, "wide.dump"), os.path.join(d, "wide.sql3")
with open(wide_dump, "w") as f:
    f.write("P=(HEX ID=1 N=(w) T=0.010000)\nC1 FN0=(F0=(/x)+10 N=(main))+0\n")
    for i in range(1, 1501):
        f.write("C2 FN%x=(F0+%x N=(g%d))+0 V0%s:(1,%x,%x)\n" % (2 * i - 1, 16 + i, i, "=(MEM_TOTAL)" if i == 1 else "", i, i))
        f.write("C3 FN%x=(F0+8 N=(h))+0 V0:(1,1,1)\n" % (2 * i) if i == 1 else "C3 FN2+0 V0:(1,1,1)\n")
subprocess.run([analyse, "--sqlite", wide_db, wide_dump], check=True)


def run_error(args, want):
    r = subprocess.run([navigator, *args], capture_output=True, text=True, timeout=30)
    if r.returncode != 1 or not re.fullmatch(want, r.stderr):
        fail.append("%s: exit %d, stderr %r; expected exit 1 and %r" % (args, r.returncode, r.stderr, want))


run_error(["-p", "0", dump], re.escape("igprof-navigator: %s: not an igprof-analyse report database (no summary table): " % dump)
          + r"file is not a database\n")
run_error(["-x", db], re.escape("igprof-navigator: unknown option -x (see --help)") + r"\n")
run_error(["-t", "0", db], re.escape("igprof-navigator: --timeout expects 1..86400 seconds, got '0'") + r"\n")
run_error([], re.escape("igprof-navigator: no database given (see --help)") + r"\n")


def start(database, *opts):
    proc = subprocess.Popen([navigator, "-p", "0", *opts, database], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    port = int(re.search(r"http://127\.0\.0\.1:(\d+)/", proc.stdout.readline()).group(1))
    return proc, port


def raw(port, data, timeout=10):
    """Send data, read to the end: (status line, headers dict, body bytes)."""
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    s.sendall(data)
    out = b""
    while True:
        chunk = s.recv(65536)
        if not chunk:
            break
        out += chunk
    s.close()
    head, _, body = out.partition(b"\r\n\r\n")
    lines = head.decode().split("\r\n")
    headers = dict(l.split(": ", 1) for l in lines[1:] if ": " in l)
    return lines[0], headers, body


def get(port, path):
    status, _, body = raw(port, b"GET " + path.encode() + b" HTTP/1.0\r\n\r\n")
    return status, body.decode()


rows = lambda body, cls: re.findall(r'<tr class="%s"><td>(\d+)</td><td>([\d.]+)</td><td>([\d\']+)</td>'
                                    r'<td>([\d\']+)</td><td>(\d+)</td><td><a href="/\d+">([^<]*)</a>' % cls, body)

proc, port = start(db, "-t", str(TIMEOUT))
try:
    status, body = get(port, "/")
    want = [("1", "100.00", "1'212", "0", "10", "&lt;spontaneous&gt;"), ("2", "100.00", "1'212", "0", "10", "main"),
            ("3", "93.40", "1'132", "1'100", "5", "bar"), ("4", "9.16", "111", "111", "5", "foo"),
            ("5", "0.08", "1", "1", "1", "@{prog+400}")]
    if status != "HTTP/1.0 200 OK" or rows(body, "row") != want:
        fail.append("/: %s %s" % (status, rows(body, "row")))
    status, body = get(port, "/self")
    if [r[5] for r in rows(body, "row")][:2] != ["bar", "foo"]:
        fail.append("/self: %s" % rows(body, "row"))
    status, body = get(port, "/3")
    if (rows(body, "caller") != [("2", "93.40", "1'132", "1'212", "5", "main")]
            or rows(body, "main") != [("3", "93.40", "1'132", "1'100", "5", "bar")]
            or rows(body, "callee") != [("4", "2.64", "32", "111", "1", "foo")]):
        fail.append("/3: %s %s %s" % (rows(body, "caller"), rows(body, "main"), rows(body, "callee")))
    for path in ("/999", "/nothing", "/3x"):
        status, _ = get(port, path)
        if status != "HTTP/1.0 404 Not Found":
            fail.append("%s: %s" % (path, status))
    reference = {p: get(port, p) for p in ("/", "/self", "/3")}

    # HEAD: GET's status and headers (the Date aside), no body.
    for version in (b"HTTP/1.0", b"HTTP/1.1"):
        req = b" /3 " + version + b"\r\nHost: x\r\nConnection: close\r\n\r\n"
        gs, gh, gb = raw(port, b"GET" + req)
        hs, hh, hb = raw(port, b"HEAD" + req)
        gh.pop("Date", None), hh.pop("Date", None)
        if (hs, hh, hb) != (gs, gh, b"") or gh.get("Content-Length") != str(len(gb)) or not gb:
            fail.append("HEAD %s: %s %s %r; GET: %s %s, %d bytes" % (version, hs, hh, hb[:40], gs, gh, len(gb)))

    # Bad requests get a status (405 says what is allowed).
    for data, want_status, header in (
            (b"BREW / HTTP/1.1\r\nHost: x\r\n\r\n", "HTTP/1.1 405 Method Not Allowed", ("Allow", "GET, HEAD")),
            (b"POST / HTTP/1.0\r\nContent-Length: 3\r\n\r\nabc", "HTTP/1.0 405 Method Not Allowed", ("Allow", "GET, HEAD")),
            (b"GET / FOO/1.0\r\n\r\n", "HTTP/1.1 400 Bad Request", None),
            (b"GET / HTTP/1.1\r\nno colon here\r\n\r\n", "HTTP/1.1 400 Bad Request", None),
            (b"GET /\r\n\r\n", "HTTP/1.1 400 Bad Request", None),
            (b"GET / HTTP/2.7\r\n\r\n", "HTTP/1.1 505 HTTP Version Not Supported", None),
            (b"GET /" + b"a" * 40000 + b" HTTP/1.1\r\nHost: x\r\n\r\n", "HTTP/1.1 414 URI Too Long", None)):
        status, headers, _ = raw(port, data)
        if status != want_status or (header and headers.get(header[0]) != header[1]):
            fail.append("%r: %s %s; expected %s %s" % (data[:30], status, headers, want_status, header))

    # A slow client (one byte every 2 s) and an idle one hold their own
    # connections; the others get complete, correct pages meanwhile.
    # --rounds N repeats this N times (the stress suite).
    for round_ in range(ROUNDS):
        closed = {}

        def slow(name, data, pause):
            s = socket.create_connection(("127.0.0.1", port), timeout=30)
            t0 = time.monotonic()
            got = b""
            try:
                for i in range(len(data)):
                    if data:
                        s.sendall(data[i:i + 1])
                    s.settimeout(pause)
                    try:
                        chunk = s.recv(65536)
                        got += chunk
                        if not chunk:
                            break
                    except socket.timeout:
                        pass
                else:
                    s.settimeout(30)
                    while True:
                        chunk = s.recv(65536)
                        got += chunk
                        if not chunk:
                            break
            except OSError:
                pass
            closed[name] = (time.monotonic() - t0, got)
            s.close()

        threads = [threading.Thread(target=slow, args=("slow", b"GET / HTTP/1.0\r\nX-Slow: " + b"z" * 40 + b"\r\n\r\n", 2.0)),
                   threading.Thread(target=slow, args=("idle", b"", 30.0))]
        for t in threads:
            t.start()
        time.sleep(0.5)
        worst = 0.0
        for k in range(6):
            for p in ("/", "/self", "/3"):
                t0 = time.monotonic()
                page = get(port, p)
                worst = max(worst, time.monotonic() - t0)
                if page != reference[p]:
                    fail.append("%s during the slow client: %s, %d bytes differ" % (p, page[0], len(page[1])))
        if worst > 5.0:
            fail.append("a page took %.1f s while a slow client was connected (bound 5 s)" % worst)
        for t in threads:
            t.join(60)
        for name in ("slow", "idle"):
            took, got = closed.get(name, (None, b""))
            if took is None or not TIMEOUT - 0.5 <= took <= TIMEOUT + 6 or b"200 OK" in got:
                fail.append("%s client: closed after %s s (deadline %d s), got %r" % (name, took, TIMEOUT, got[:60]))
        print("pages during the slow client: worst %.3f s; slow client closed after %.1f s, idle after %.1f s"
              % (worst, closed.get("slow", (0,))[0], closed.get("idle", (0,))[0]))

    # Keep-alive: each request of one connection has its own deadline.
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    answers = []
    for k in range(3):
        s.sendall(b"GET /3 HTTP/1.1\r\nHost: x\r\n\r\n")
        buf = b""
        while b"\r\n\r\n" not in buf:
            chunk = s.recv(65536)
            if not chunk:
                break
            buf += chunk
        head, _, body = buf.partition(b"\r\n\r\n")
        m = re.search(rb"Content-Length: (\d+)", head)
        while m and len(body) < int(m.group(1)):
            chunk = s.recv(65536)
            if not chunk:
                break
            body += chunk
        if not m or b"Connection: close" in head:
            answers.append((head.split(b"\r\n")[0] + b" (closed)", body.decode()))
            break
        answers.append((head.split(b"\r\n")[0], body.decode()))
        time.sleep(TIMEOUT * 0.6)   # 3 x 0.6 deadlines: only per-request deadlines allow this
    s.close()
    if answers != [("HTTP/1.1 200 OK".encode(), reference["/3"][1])] * 3:
        fail.append("keep-alive: %s" % [a[0] for a in answers])
finally:
    proc.terminate()
    err = proc.communicate()[1]
# Its messages (from libmicrohttpd too) name the program.
for line in err.splitlines():
    if not line.startswith("igprof-navigator: "):
        fail.append("stderr line without the program's name: %r" % line)

# Long lists: pages of 1'000 rows, the next page linked.
proc, port = start(wide_db)
try:
    status, body = get(port, "/")
    more = re.findall(r'<tr class="more"><td colspan="6">(\d+) more (\w+): <a href="/\?page=2">next page</a></td></tr>', body)
    if len(rows(body, "row")) != 1000 or more != [("503", "entries")]:
        fail.append("wide /: %d rows, %s" % (len(rows(body, "row")), more))
    status, body2 = get(port, "/?page=2")
    if (status.split()[1], [r[0] for r in rows(body2, "row")]) != ("200", [str(i) for i in range(1001, 1504)]) or "more entries" in body2:
        fail.append("wide /?page=2: %s, %d rows" % (status, len(rows(body2, "row"))))
    for bad in ("/?page=3", "/?page=0", "/?page=x", "/?page=-1", "/?page=", "/3?page=2"):
        status, _ = get(port, bad)
        if status.split()[1] != "404":
            fail.append("%s: status %s, expected 404" % (bad, status))
    h = [r[0] for r in rows(body, "row") if r[5] == "h"]
    status, body = get(port, "/" + h[0]) if h else ("no h", "")
    callers = rows(body, "caller")
    more = re.findall(r'<tr class="more"><td colspan="6">(\d+) more (\w+): <a href="/(\d+)\?page=2">next page</a></td></tr>', body)
    # The 1'000 largest callers g501..g1500, in ascending order, each passing 1;
    # the other 500 on page 2.
    if ([c[5] for c in callers] != ["g%d" % i for i in range(501, 1501)] or {c[2] for c in callers} != {"1"}
            or more != [("500", "callers", h[0])]):
        fail.append("wide h: %d callers %s..., %s" % (len(callers), [c[5] for c in callers[:3]], more))
    pages = re.findall(r'<p class="pages">(.*)</p>', body)
    want = ['Callers 1&ndash;1000 of 1500, callees none of 0 (page 1 of 2) | <a href="/%s?page=2">next 1000</a>' % h[0]]
    if pages != want:
        fail.append("wide h: pages line %s, expected %s" % (pages, want))
    status, body = get(port, "/%s?page=2" % h[0])
    callers = rows(body, "caller")
    if (status.split()[1], [c[5] for c in callers], "more callers" in body) != ("200", ["g%d" % i for i in range(1, 501)], False):
        fail.append("wide h page 2: %s, %d callers %s..." % (status, len(callers), [c[5] for c in callers[:3]]))
    status, _ = get(port, "/%s?page=3" % h[0])
    if status.split()[1] != "404":
        fail.append("wide h page 3: %s, expected 404" % status)
finally:
    proc.terminate()
    proc.wait()
for f in os.listdir(d):
    os.unlink(os.path.join(d, f))
os.rmdir(d)
if fail:
    sys.exit("\n".join(fail))
print("ok")
