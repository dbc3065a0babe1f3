"""Headless Chromium driven over the DevTools protocol on a pipe
(--remote-debugging-pipe: commands on fd 3, answers on fd 4, each message
JSON ended by a NUL byte), with the Python standard library only.

Every console message, uncaught exception and browser log entry (a resource
that failed to load, among them) of the page is kept in `problems`."""
import fcntl, json, os, select, shutil, subprocess, tempfile, time


class BrowserError(Exception):
    pass


class Browser:
    def __init__(self, timeout=60):
        exe = shutil.which("chromium")
        if not exe:
            # Never a skip: scripts/deps.sh installs Debian's chromium.
            raise BrowserError("chromium is not installed (scripts/deps.sh installs it)")
        self.timeout = timeout
        self.profile = tempfile.mkdtemp(prefix="igprof-chromium.")
        to_browser = os.pipe()
        from_browser = os.pipe()
        # Out of the way of 3 and 4, which the child gets them as.
        cmd_read = fcntl.fcntl(to_browser[0], fcntl.F_DUPFD, 10)
        ans_write = fcntl.fcntl(from_browser[1], fcntl.F_DUPFD, 10)
        os.close(to_browser[0])
        os.close(from_browser[1])

        def child_fds():
            os.dup2(cmd_read, 3)
            os.dup2(ans_write, 4)

        self.log = open(os.path.join(self.profile, "stderr.log"), "w+")
        self.proc = subprocess.Popen(
            [exe, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-extensions",
             "--remote-debugging-pipe", "--user-data-dir=" + self.profile, "about:blank"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=self.log,
            preexec_fn=child_fds, close_fds=False)   # Python's own descriptors close on exec
        os.close(cmd_read)
        os.close(ans_write)
        self.out, self.inp = to_browser[1], from_browser[0]
        self.buf = b""
        self.next_id = 0
        self.events = []
        self.problems = []
        self.session = None
        target = self.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        self.session = self.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        for domain in ("Page", "Runtime", "Log"):
            self.call(domain + ".enable")

    def close(self):
        try:
            self.proc.terminate()
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        os.close(self.out)
        os.close(self.inp)
        self.log.close()
        shutil.rmtree(self.profile, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # ---- protocol ----

    def _read_message(self, deadline):
        while b"\0" not in self.buf:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self.inp], [], [], left)[0]:
                raise BrowserError("no answer from chromium in %d s" % self.timeout)
            chunk = os.read(self.inp, 1 << 20)
            if not chunk:
                self.log.seek(0)
                raise BrowserError("chromium closed its pipe; its stderr:\n" + self.log.read()[-3000:])
            self.buf += chunk
        raw, _, self.buf = self.buf.partition(b"\0")
        message = json.loads(raw)
        if "method" in message:
            self._note(message)
        return message

    def _note(self, event):
        self.events.append(event)
        method, params = event["method"], event.get("params", {})
        if method == "Runtime.consoleAPICalled":
            text = " ".join(str(a.get("value", a.get("description", ""))) for a in params.get("args", []))
            self.problems.append("console.%s: %s" % (params.get("type"), text))
        elif method == "Runtime.exceptionThrown":
            d = params.get("exceptionDetails", {})
            self.problems.append("exception: %s %s" % (d.get("text"), d.get("exception", {}).get("description", "")))
        elif method == "Log.entryAdded":
            e = params.get("entry", {})
            self.problems.append("log %s: %s %s" % (e.get("level"), e.get("text"), e.get("url", "")))

    def call(self, method, params=None):
        self.next_id += 1
        message = {"id": self.next_id, "method": method, "params": params or {}}
        if self.session:
            message["sessionId"] = self.session
        os.write(self.out, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + self.timeout
        while True:
            answer = self._read_message(deadline)
            if answer.get("id") == self.next_id:
                if "error" in answer:
                    raise BrowserError("%s: %s" % (method, answer["error"]))
                return answer.get("result", {})

    def wait_event(self, method, since):
        """The first event `method` after self.events[since:]."""
        deadline = time.monotonic() + self.timeout
        while True:
            for event in self.events[since:]:
                if event["method"] == method:
                    return event
            since = len(self.events)
            self._read_message(deadline)

    # ---- pages ----

    def load(self, url):
        """Navigate and wait for the load event; returns the seconds it took."""
        start = time.monotonic()
        since = len(self.events)
        result = self.call("Page.navigate", {"url": url})
        if result.get("errorText"):
            raise BrowserError("%s: %s" % (url, result["errorText"]))
        self.wait_event("Page.loadEventFired", since)
        return time.monotonic() - start

    def eval(self, expression):
        """The value of a JavaScript expression in the page (JSON-able)."""
        result = self.call("Runtime.evaluate", {"expression": expression, "returnByValue": True,
                                                "awaitPromise": True})
        if "exceptionDetails" in result:
            raise BrowserError("%s: %s" % (expression, result["exceptionDetails"]))
        return result["result"].get("value")

    def text(self, selector):
        return self.eval("document.querySelector(%s).innerText" % json.dumps(selector))

    def settle(self):
        """Let events queued by the page arrive (a round trip)."""
        self.eval("1")
