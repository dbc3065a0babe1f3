#!/usr/bin/env python3
"""igprof-navigator serves a database written by igprof-analyse --sqlite: the
entry list, an entry page with its callers and callees, 404s; it refuses a file
that is not a report database."""
import os, re, socket, subprocess, sys, tempfile

analyse, navigator, dump = sys.argv[1:4]
d = tempfile.mkdtemp()
db = os.path.join(d, "r.sql3")
subprocess.run([analyse, "--sqlite", db, dump], check=True)
fail = []

bad = subprocess.run([navigator, "-p", "0", dump], capture_output=True, text=True)
if bad.returncode != 1 or "not an igprof-analyse report database" not in bad.stderr and "cannot open" not in bad.stderr:
    fail.append("non-database accepted: rc=%d %r" % (bad.returncode, bad.stderr))

proc = subprocess.Popen([navigator, "-p", "0", db], stdout=subprocess.PIPE, text=True)
try:
    port = int(re.search(r"http://127\.0\.0\.1:(\d+)/", proc.stdout.readline()).group(1))

    def get(path):
        s = socket.create_connection(("127.0.0.1", port), timeout=10)
        s.sendall(b"GET " + path.encode() + b" HTTP/1.0\r\n\r\n")
        data = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
        s.close()
        head, _, body = data.decode().partition("\r\n\r\n")
        return head.split("\r\n")[0], body

    rows = lambda body, cls: re.findall(r'<tr class="%s"><td>(\d+)</td><td>([\d.]+)</td><td>([\d\']+)</td>'
                                        r'<td>([\d\']+)</td><td>(\d+)</td><td><a href="/\d+">([^<]*)</a>' % cls, body)
    status, body = get("/")
    want = [("1", "100.00", "1'212", "0", "10", "&lt;spontaneous&gt;"), ("2", "100.00", "1'212", "0", "10", "main"),
            ("3", "93.40", "1'132", "1'100", "5", "bar"), ("4", "9.16", "111", "111", "5", "foo"),
            ("5", "0.08", "1", "1", "1", "@{prog+400}")]
    if status != "HTTP/1.0 200 OK" or rows(body, "row") != want:
        fail.append("/: %s %s" % (status, rows(body, "row")))
    status, body = get("/self")
    if [r[5] for r in rows(body, "row")][:2] != ["bar", "foo"]:
        fail.append("/self: %s" % rows(body, "row"))
    status, body = get("/3")
    if (rows(body, "caller") != [("2", "93.40", "1'132", "1'212", "5", "main")]
            or rows(body, "main") != [("3", "93.40", "1'132", "1'100", "5", "bar")]
            or rows(body, "callee") != [("4", "2.64", "32", "111", "1", "foo")]):
        fail.append("/3: %s %s %s" % (rows(body, "caller"), rows(body, "main"), rows(body, "callee")))
    for path in ("/999", "/nothing", "/3x"):
        status, _ = get(path)
        if status != "HTTP/1.0 404 Not Found":
            fail.append("%s: %s" % (path, status))
finally:
    proc.terminate()
    proc.wait()
os.unlink(db)
os.rmdir(d)
if fail:
    sys.exit("\n".join(fail))
print("ok")
