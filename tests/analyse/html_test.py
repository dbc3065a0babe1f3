#!/usr/bin/env python3
"""--html: well-formed, every link has a target, and the flat table holds the
same names, totals and self values as the JSON report.
Usage: html_test.py ANALYSE DUMP [more igprof-analyse options, e.g. -r MEM_PEAK]"""
import html.parser, json, subprocess, sys

analyse, dump, extra = sys.argv[1], sys.argv[2], sys.argv[3:]
page = subprocess.run([analyse, "--html", *extra, dump], capture_output=True, check=True).stdout.decode("utf-8")
j = json.loads(subprocess.run([analyse, "--json", *extra, dump], capture_output=True, check=True).stdout)

class Page(html.parser.HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.stack, self.ids, self.links, self.rows, self.row, self.cell = [], set(), [], [], None, None
        self.tables = 0
    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag not in ("meta", "link", "input"):
            self.stack.append(tag)
        if "id" in a: self.ids.add(a["id"])
        if tag == "a": self.links.append(a["href"][1:])
        if tag == "table": self.tables += 1
        if tag == "tr" and self.tables == 1: self.row = []
        if tag == "td" and self.row is not None: self.cell = ""
    def handle_endtag(self, tag):
        if not self.stack or self.stack.pop() != tag:
            sys.exit("unbalanced </%s>" % tag)
        if tag == "td" and self.row is not None: self.row.append(self.cell); self.cell = None
        if tag == "tr" and self.row: self.rows.append(self.row); self.row = None
    def handle_data(self, data):
        if self.cell is not None: self.cell += data

p = Page()
p.feed(page)
if p.stack: sys.exit("unclosed tags: %s" % p.stack)
missing = [l for l in p.links if l not in p.ids]
if missing: sys.exit("links without target: %s" % missing)
# PERF_TICKS is shown in seconds: ticks x period, two decimals
scale = j["summary"]["tick_period"] if j["summary"]["counter"] == "PERF_TICKS" else 1
num = lambda s: float(s.replace("'", ""))
got = [(r[5].rsplit(" [", 1)[0], num(r[2]), num(r[3])) for r in p.rows]
want = [(j["symbols"][m[1]], round(m[4] * scale, 2), round(m[3] * scale, 2)) for m in j["mainrows"]]
if got != want:
    sys.exit("flat table differs from JSON:\n %s\n %s" % (got, want))
print("ok: %d rows, %d links" % (len(got), len(p.links)))
