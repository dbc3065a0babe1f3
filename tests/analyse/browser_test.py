#!/usr/bin/env python3
"""The HTML report (file://) and igprof-navigator (http on localhost) in
headless Chromium: each page loads without a console message, an exception
or a failed resource, every link has a target, and what the page shows --
after clicks and typing -- is checked against what the dumps hold
(tests/analyse/data/README.md). Chromium missing is a failure, not a skip.

Usage: browser_test.py ANALYSE NAVIGATOR DATA_DIR"""
import json, os, re, shutil, subprocess, sys, tempfile, time, urllib.error, urllib.parse, urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import browser

analyse, navigator, data = sys.argv[1:4]
tmp = tempfile.mkdtemp(prefix="igprof-browser.")
fail = []


def eq(got, want, what):
    if got != want:
        fail.append("%s:\n  got  %r\n  want %r" % (what, got, want))
    else:
        print("ok: %s" % what)


def check(cond, what):
    if not cond:
        fail.append(what)
    else:
        print("ok: %s" % what)


def html_report(dump, name, *options):
    path = os.path.join(tmp, name)
    with open(path, "wb") as f:
        subprocess.run([analyse, "--html", *options, dump], stdout=f, check=True)
    return path


def flat_names(b, visible_only=True):
    return b.eval("Array.from(document.querySelectorAll('#flat tbody tr'))%s.map(r => r.cells[5].innerText)"
                  % (".filter(r => !r.hidden)" if visible_only else ""))


def missing_anchors(b):
    """The in-page links (#id) without their element, and every other link."""
    return b.eval("""Array.from(document.querySelectorAll('a')).map(a => a.getAttribute('href'))
                     .filter(h => !h.startsWith('#') || !document.getElementById(h.slice(1)))""")


def no_problems(b, what):
    b.settle()
    eq(b.problems, [], "%s: no console message, exception or failed load" % what)
    del b.problems[:]


# A profile of 20'201 entries: main calls mod0..mod199, each calls 100 functions.
def big_dump():
    path = os.path.join(tmp, "big.dump")
    with open(path, "w") as f:
        f.write("P=(HEX ID=1 N=(big) T=0.010000)\nC1 FN0=(F0=(/big)+10 N=(main))+0\n")
        fn = 1
        for i in range(200):
            f.write("C2 FN%x=(F0+%x N=(mod%d))+0\n" % (fn, 16 * fn, i))
            fn += 1
            for j in range(100):
                v = (i * 100 + j) % 997 + 1
                f.write("C3 FN%x=(F0+%x N=(fn_%d_%d))+0 V0%s:(1,%x,%x)\n"
                        % (fn, 16 * fn, i, j, "=(MEM_TOTAL)" if fn == 2 else "", v, v))
                fn += 1
    return path


try:
    with browser.Browser() as b:
        # ---- the report of mem.dump ----
        mem = html_report(os.path.join(data, "mem.dump"), "mem.html")
        b.load("file://" + mem)
        no_problems(b, "mem.html")
        eq(b.eval("document.title"), "igprof-analyse: MEM_TOTAL", "title")
        eq(b.text("#total"), "Total: 1'212 bytes, 10 calls.", "total line")
        eq(missing_anchors(b), [], "every link of mem.html has its target")
        eq(flat_names(b), ["<spontaneous> [1]", "main [2]", "bar [3]", "foo [4]", "@{prog+400} [5]"],
           "flat table in rank order")
        eq(b.text("#shown"), "5 entries", "entry count")
        # Flame graph: main 1'212 the whole width; bar 1'132 and foo 79 above
        # it, side by side by name; foo 32 above bar. The unnamed call site
        # (1 byte of 1'212) is narrower than a pixel.
        boxes = b.eval("""Array.from(document.querySelectorAll('#flame g.f')).map(g => {
            const r = g.querySelector('rect');
            return [g.querySelector('title').textContent, +r.getAttribute('x'), +r.getAttribute('width'),
                    +r.getAttribute('y'), g.querySelector('text') ? g.querySelector('text').textContent : null,
                    g.parentNode.getAttribute('href')];})""")
        eq(boxes, [["main (1'212, 100.00%)", 0, 1200, 32, "main", "#r2"],
                   ["bar (1'132, 93.40%)", 0, 1120.8, 16, "bar", "#r3"],
                   ["foo (32, 2.64%)", 0, 31.7, 0, "foo", "#r4"],
                   ["foo (79, 6.52%)", 1120.8, 78.2, 16, "foo", "#r4"]], "flame graph boxes")
        eq(b.eval("document.getElementById('flame').getBoundingClientRect().height > 0"), True, "flame graph drawn")
        # Callers (up arrow) above the entry, callees (down arrow) below it.
        eq(b.eval("""Array.from(document.querySelectorAll('#r3 tr')).map(r =>
                     [r.className, r.cells[1].innerText, r.cells[2].innerText, r.cells[4].innerText])"""),
           [["caller", "93.40", "1'132 / 1'212", "\u2196 main [2]"],
            ["main", "93.40", "1'132 (self 1'100)", "bar /usr/bin/prog"],
            ["callee", "2.64", "32 / 111", "\u2198 foo [4]"]], "bar's callers and callees, marked")
        # Sorting: a click on Self sorts by self value, descending; again, ascending.
        b.eval("document.querySelector('th[data-sort=self]').click()")
        eq((flat_names(b), b.eval("document.querySelector('th[data-sort=self]').getAttribute('aria-sort')")),
           (["bar [3]", "foo [4]", "@{prog+400} [5]", "<spontaneous> [1]", "main [2]"], "descending"),
           "click on Self: by self value, descending (ties by rank)")
        b.eval("document.querySelector('th[data-sort=self]').click()")
        eq(flat_names(b), ["<spontaneous> [1]", "main [2]", "@{prog+400} [5]", "foo [4]", "bar [3]"],
           "second click: ascending")
        b.eval("document.querySelector('th[data-sort=name]').click()")
        eq(flat_names(b), ["<spontaneous> [1]", "@{prog+400} [5]", "bar [3]", "foo [4]", "main [2]"],
           "click on Function: by name, ascending (code points)")
        # Search: typing filters the rows and marks the flame boxes.
        b.eval("const s = document.getElementById('search'); s.value = 'FO'; s.dispatchEvent(new Event('input'))")
        eq((flat_names(b), b.text("#shown"), b.eval("document.querySelectorAll('#flame g.match').length")),
           (["foo [4]"], "1 of 5 entries match \u201cFO\u201d", 2), "search 'FO': foo's row, its two boxes")
        # The same from the address: ?q=, ?sort=, ?order=.
        b.load("file://" + mem + "?q=a&sort=calls&order=ascending")
        eq((flat_names(b), b.text("#shown")),
           (["bar [3]", "<spontaneous> [1]", "main [2]"], "3 of 5 entries match \u201ca\u201d"),
           "?q=a&sort=calls&order=ascending (ties by rank)")
        # A flame box leads to its entry.
        b.eval("document.querySelector('#flame a[href=\"#r3\"] rect').dispatchEvent(new MouseEvent('click', {bubbles: true}))")
        eq(b.eval("location.hash"), "#r3", "click on bar's box: #r3")
        no_problems(b, "mem.html after clicks")

        # ---- perf.dump: seconds, names to escape ----
        perf = html_report(os.path.join(data, "perf.dump"), "perf.html")
        b.load("file://" + perf)
        no_problems(b, "perf.html")
        eq(b.text("#total"), "Total: 1'246.64 seconds, 124664 calls.", "perf total in seconds")
        eq(missing_anchors(b), [], "every link of perf.html has its target")
        names = flat_names(b)
        check("ns::odd name (x) [%s]" % names[0].rsplit("[", 1)[1].rstrip("]") in names or
              any(n.startswith("ns::odd name (x) [") for n in names), "a name with spaces and ')' shown as is: %s" % names)
        check(any(n.startswith("donn\u00e9es_) [") for n in names), "a UTF-8 name shown decoded: %s" % names)

        # ---- -b/-D: deltas, no flame graph; a *_MAX counter: no flame graph ----
        diff = html_report(os.path.join(data, "new.dump"), "diff.html", "-b", os.path.join(data, "base.dump"), "-D")
        b.load("file://" + diff)
        no_problems(b, "diff.html")
        eq(b.eval("Array.from(document.querySelectorAll('#flat tbody tr')).map(r => [r.cells[1].innerText, r.cells[2].innerText, r.cells[5].innerText])"),
           [["-25.00", "-250", "parse [1]"], ["-50.00", "-250", "token [2]"], ["20.00", "200", "load [3]"],
            ["new", "100", "cache [4]"], ["2.50", "50", "<spontaneous> [5]"], ["2.50", "50", "main [6]"]],
           "diff.html: deltas ranked by size, 'new' for cache")
        b.eval("document.querySelector('th[data-sort=pct]').click()")
        eq(flat_names(b), ["cache [4]", "load [3]", "<spontaneous> [5]", "main [6]", "parse [1]", "token [2]"],
           "diff.html: by delta %, largest first, 'new' above all")
        eq(b.eval("document.querySelectorAll('#flame').length"), 0, "diff.html: no flame graph for a difference")
        check(b.text("#flame-none").startswith("No flame graph"), "diff.html: says why there is no flame graph")
        maxpage = html_report(os.path.join(data, "igprof_style.dump"), "max.html", "-r", "MEM_MAX")
        b.load("file://" + maxpage)
        no_problems(b, "max.html")
        eq((b.eval("document.querySelectorAll('#flame').length"), b.eval("!!document.getElementById('flame-none')")),
           (0, True), "max.html: no flame graph for MEM_MAX")
        eq(missing_anchors(b), [], "every link of max.html has its target")

        # ---- a big profile: the page stays small and fast ----
        big = big_dump()
        page = html_report(big, "big.html")
        size = os.path.getsize(page)
        check(size < 1_000_000, "big.html (20'201 entries) is %d bytes, under 1 MB" % size)
        seconds = b.load("file://" + page)
        no_problems(b, "big.html")
        check(seconds < 15, "big.html loads in %.2f s (under 15)" % seconds)
        eq(b.text("#shown"), "500 entries", "big.html: the first 500 entries")
        eq(b.eval("document.querySelectorAll('tbody.entry').length"), 500, "big.html: 500 call-graph blocks")
        more = b.text("#more")
        check(re.fullmatch(r"19702 more entries, each below 0\.\d\d% of the total, are not in this page "
                           r"\(igprof-analyse --html-limit N, 0 for all; or igprof-navigator\)\.", more),
              "big.html: the note on the rest: %r" % more)
        eq(missing_anchors(b), [], "big.html: every link has its target (names past the limit are not links)")
        eq(b.eval("document.querySelectorAll('#r1 tr.more').length + document.querySelectorAll('#r2 tr.more').length"),
           1, "big.html: main's 200 callees cut to 10 and counted")
        eq(b.eval("document.querySelector('#r2 tr.more').innerText.trim()"), "190 smaller callees not shown",
           "big.html: main's hidden callees counted")
        start = time.monotonic()
        b.eval("const s = document.getElementById('search'); s.value = 'mod1'; s.dispatchEvent(new Event('input'))")
        shown = b.text("#shown")
        check(re.fullmatch(r"\d+ of 500 entries match \u201cmod1\u201d", shown) and time.monotonic() - start < 5,
              "big.html: search over the page: %r in %.2f s" % (shown, time.monotonic() - start))
        # Boxes at least a pixel wide: main and the modules whose 100 values
        # add up to 1/1200 of the total; no single function is that wide.
        values = [[(i * 100 + j) % 997 + 1 for j in range(100)] for i in range(200)]
        total = sum(map(sum, values))
        wide_modules = sum(1 for m in values if sum(m) * 1200 / total >= 1)
        eq(b.eval("document.querySelectorAll('#flame g.f').length"), 1 + wide_modules,
           "big.html: flame boxes for main and the %d modules a pixel wide or more" % wide_modules)
        # 1'000 chains 10 calls deep, each 1.2 boxes wide: 11'000 boxes of a pixel
        # or more, cut at 8'000 (the first 727 chains whole, then 3 boxes of the next).
        bushy = os.path.join(tmp, "bushy.dump")
        with open(bushy, "w") as f:
            f.write("P=(HEX ID=1 N=(bushy) T=0.010000)\nC1 FN0=(F0=(/b)+10 N=(main))+0\n")
            fn = 1
            for i in range(1000):
                for d in range(11):
                    f.write("C%x FN%x=(F0+%x N=(c%d_%d))+0%s\n" % (d + 2, fn, 16 * fn, i, d,
                            (" V0%s:(1,1,1)" % ("=(MEM_TOTAL)" if i == 0 else "")) if d == 10 else ""))
                    fn += 1
        b.load("file://" + html_report(bushy, "bushy.html"))
        no_problems(b, "bushy.html")
        eq((b.eval("document.querySelectorAll('#flame g.f').length"), b.text("#flame-cut")),
           (8000, "The graph stops at 8000 boxes: the rest of the tree is left out."), "bushy.html: the flame graph's cut")
        everything = html_report(big, "all.html", "--html-limit", "0")
        with open(everything, encoding="utf-8") as f:
            eq(f.read().count('<tbody class="entry"'), 20202, "--html-limit 0: every entry (20'201 and <spontaneous>)")

        # ---- the navigator: pages of 1'000 entries ----
        wide = os.path.join(tmp, "wide.dump")
        with open(wide, "w") as f:   # main calls g1..g1500, each calls h
            f.write("P=(HEX ID=1 N=(w) T=0.010000)\nC1 FN0=(F0=(/x)+10 N=(main))+0\n")
            for i in range(1, 1501):
                f.write("C2 FN%x=(F0+%x N=(g%d))+0 V0%s:(1,%x,%x)\n" % (2 * i - 1, 16 + i, i, "=(MEM_TOTAL)" if i == 1 else "", i, i))
                f.write("C3 FN%x=(F0+8 N=(h))+0 V0:(1,1,1)\n" % (2 * i) if i == 1 else "C3 FN2+0 V0:(1,1,1)\n")
        db = os.path.join(tmp, "wide.sql3")
        subprocess.run([analyse, "--sqlite", db, wide], check=True)
        nav = subprocess.Popen([navigator, "-p", "0", db], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            port = int(re.search(r"http://127\.0\.0\.1:(\d+)/", nav.stdout.readline()).group(1))
            base = "http://127.0.0.1:%d" % port
            links = set()

            def page_links():
                hrefs = b.eval("Array.from(document.querySelectorAll('a')).map(a => a.getAttribute('href'))")
                links.update(hrefs)
                return hrefs

            def ranks():
                return b.eval("Array.from(document.querySelectorAll('tr.row')).map(r => +r.cells[0].innerText)")

            b.load(base + "/")
            no_problems(b, "navigator /")
            eq(b.text("h1"), "Entries by cumulative value", "navigator / heading")
            eq(b.text("p.pages"), "Entries 1\u20131000 of 1503 (page 1 of 2) | next 1000", "navigator / pages line")
            eq(ranks(), list(range(1, 1001)), "navigator /: ranks 1..1000")
            page_links()
            h = b.eval("Array.from(document.querySelectorAll('tr.row')).find(r => r.cells[5].innerText == 'h').cells[0].innerText")
            since = len(b.events)
            b.eval("Array.from(document.querySelectorAll('p.pages a')).find(a => a.innerText == 'next 1000').click()")
            b.wait_event("Page.loadEventFired", since)
            no_problems(b, "navigator page 2")
            eq(b.eval("location.pathname + location.search"), "/?page=2", "next 1000 -> /?page=2")
            eq(b.text("p.pages"), "Entries 1001\u20131503 of 1503 (page 2 of 2) | previous 1000", "page 2's pages line")
            eq(ranks(), list(range(1001, 1504)), "page 2: ranks 1001..1503")
            page_links()
            b.load(base + "/self?page=2")
            no_problems(b, "navigator /self?page=2")
            eq(len(ranks()), 503, "/self?page=2: 503 entries")
            page_links()
            b.load(base + "/" + h)
            no_problems(b, "navigator /" + h)
            eq(b.text("h1"), "h", "h's page")
            eq(b.eval("document.querySelectorAll('tr.caller').length"), 1000, "h's page: 1'000 callers")
            eq(b.text("p.pages"), "Callers 1\u20131000 of 1500, callees none of 0 (page 1 of 2) | next 1000",
               "h's page: its pages line")
            page_links()
            since = len(b.events)
            b.eval("document.querySelector('tr.more a').click()")
            b.wait_event("Page.loadEventFired", since)
            no_problems(b, "h's page 2")
            eq((b.eval("location.pathname + location.search"), b.eval("document.querySelectorAll('tr.caller').length")),
               ("/%s?page=2" % h, 500), "h's 'next page': the other 500 callers")
            page_links()
            # Search: the form on every page; names containing the text, any case.
            since = len(b.events)
            b.eval("document.querySelector('form input[name=q]').value = 'G15'; document.querySelector('form button').click()")
            b.wait_event("Page.loadEventFired", since)
            no_problems(b, "navigator search")
            eq((b.eval("location.pathname + location.search"), b.text("h1"), b.text("p.pages")),
               ("/search?q=G15", "Entries whose name contains \u201cG15\u201d", "Entries 1\u201312 of 12 (page 1 of 1)"),
               "search form: G15")
            eq(b.eval("Array.from(document.querySelectorAll('tr.row')).map(r => r.cells[5].innerText)"),
               ["g1500"] + ["g%d" % i for i in range(159, 149, -1)] + ["g15"], "search G15: by cumulative value")
            page_links()
            b.load(base + "/search?q=g")
            eq((b.text("p.pages"), len(ranks())), ("Entries 1\u20131000 of 1500 (page 1 of 2) | next 1000", 1000), "search g: page 1")
            since = len(b.events)
            b.eval("document.querySelector('tr.more a').click()")
            b.wait_event("Page.loadEventFired", since)
            eq((b.eval("location.pathname + location.search"), len(ranks())), ("/search?q=g&page=2", 500), "search g: page 2")
            page_links()
            b.load(base + "/search?q=" + urllib.parse.quote("a b&c<"))
            no_problems(b, "navigator search with & and <")
            eq((b.text("h1"), b.text("p.pages")), ("Entries whose name contains \u201ca b&c<\u201d", "Entries none of 0 (page 1 of 1)"),
               "search 'a b&c<': shown as typed, nothing found")
            # Every link of the pages seen answers 200.
            bad = []
            for href in sorted(links):
                try:
                    with urllib.request.urlopen(base + href, timeout=30) as r:
                        if r.status != 200:
                            bad.append((href, r.status))
                except urllib.error.HTTPError as e:
                    bad.append((href, e.code))
            eq(bad, [], "navigator: the %d links of the pages seen answer 200" % len(links))
            b.load(base + "/?page=3")
            eq(b.text("h1"), "not found", "/?page=3: past the end")
            b.problems[:] = [p for p in b.problems if "404" not in p]   # the 404 itself is the point
            no_problems(b, "navigator 404 page")
        finally:
            nav.terminate()
            nav.wait()
except browser.BrowserError as e:
    fail.append("browser: %s" % e)
finally:
    shutil.rmtree(tmp, ignore_errors=True)

if fail:
    sys.exit("FAIL\n" + "\n".join(fail))
print("ok: all")
