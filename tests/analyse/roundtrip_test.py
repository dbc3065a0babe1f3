#!/usr/bin/env python3
"""Every output format describes the same profile: per symbol, self and
cumulative values and calls agree between the text call graph, JSON (python's
json module), the sqlite database (sqlite3 CLI), the SQL text loaded into
sqlite3, callgrind self costs and collapsed stacks; totals agree everywhere."""
import json, os, re, subprocess, sys, tempfile

analyse, dump = sys.argv[1], sys.argv[2]
extra = sys.argv[3:]
tmp = tempfile.mkdtemp()
fail = []

def run(*args, **kw):
    r = subprocess.run([analyse, *extra, *args, dump], capture_output=True, text=True, **kw)
    if r.returncode != 0:
        sys.exit("igprof-analyse %s failed: %s" % (" ".join(args), r.stderr))
    return r.stdout

def sql(db, query):
    r = subprocess.run(["sqlite3", "-json", db, query], capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit("sqlite3 failed: " + r.stderr)
    return [list(row.values()) for row in json.loads(r.stdout or "[]")]

def num(s):
    return float(s.replace("'", ""))

# text: main rows of the call graph (with -c so the calls column is always there)
text = {}
for line in run("-c").splitlines():
    m = re.match(r"^\[(\d+)\]\s+\S+\s+(\S+)\s+(\S+) / (\S+)\s+(\S+)\s+(.*)$", line)
    if m:
        text[m.group(6)] = (num(m.group(3)), num(m.group(2)), num(m.group(5)))

j = json.loads(run("--json"))
js = {j["symbols"][r[1]]: (r[3], r[4], r[7]) for r in j["mainrows"]}
total = j["summary"]["total_counts"]

db = os.path.join(tmp, "report.sql3")
run("--sqlite", db)
dbrows = {r[0]: (int(r[1]), int(r[2]), int(r[3])) for r in sql(db,
          "SELECT s.name, m.self_count, m.cumulative_count, m.total_calls FROM mainrows m JOIN symbols s ON s.id = m.symbol_id")}
dbtotal = int(sql(db, "SELECT total_count FROM summary")[0][0])

db2 = os.path.join(tmp, "fromtext.sql3")
r = subprocess.run(["sqlite3", db2], input=run("--sqlite", "-"), capture_output=True, text=True)
if r.returncode != 0:
    sys.exit("SQL text did not load: " + r.stderr)
txtrows = {r[0]: (int(r[1]), int(r[2]), int(r[3])) for r in sql(db2,
           "SELECT s.name, m.self_count, m.cumulative_count, m.total_calls FROM mainrows m JOIN symbols s ON s.id = m.symbol_id")}

cg = run("--callgrind", "-")
cg_self, fn_names, current = {}, {}, None
for line in cg.splitlines():
    m = re.match(r"^fn=\((\d+)\)(?: (.*))?$", line)
    if m:
        if m.group(2) is not None:
            fn_names[m.group(1)] = m.group(2)
        current = fn_names[m.group(1)]
        continue
    m = re.match(r"^cfn=\((\d+)\)(?: (.*))?$", line)
    if m:
        if m.group(2) is not None:
            fn_names[m.group(1)] = m.group(2)
        current = None
        continue
    if current is not None and re.match(r"^0 -?\d+$", line):
        cg_self[current] = int(line.split()[1])
        current = None
cg_summary = int(re.search(r"^summary: (-?\d+)$", cg, re.M).group(1))

flame_total = sum(int(l.rsplit(" ", 1)[1]) for l in run("--flame").splitlines())

# names with control characters cannot be matched line by line in the text
plain = {n for n in js if not re.search(r"[\x00-\x1f]", n)}
text = {n: v for n, v in text.items() if n in plain}
if set(text) != plain or set(js) != set(dbrows) or set(dbrows) != set(txtrows):
    fail.append("symbol sets differ: text %s json %s db %s sqltext %s" % (sorted(text), sorted(js), sorted(dbrows), sorted(txtrows)))
for name in js:
    if not (js[name] == dbrows.get(name) == txtrows.get(name)):
        fail.append("%s: json %s db %s sqltext %s" % (name, js[name], dbrows.get(name), txtrows.get(name)))
    # the text report shows PERF_TICKS as seconds (ticks x period, 2 decimals)
    scale = j["summary"]["tick_period"] if j["summary"]["counter"] == "PERF_TICKS" else 1
    shown = (round(js[name][0] * scale, 2), round(js[name][1] * scale, 2), js[name][2])
    if name in text and text[name] != shown:
        fail.append("%s: text %s json %s" % (name, text[name], js[name]))
    # callgrind is line oriented: control characters are written as '?'
    if cg_self.get(re.sub(r"[\x00-\x1f\x7f]", "?", name), 0) != js[name][0]:
        fail.append("%s: callgrind self %s json self %s" % (name, cg_self.get(name), js[name][0]))
for what, value in (("json self sum", sum(v[0] for v in js.values())), ("sqlite", dbtotal),
                    ("callgrind summary", cg_summary), ("callgrind self sum", sum(cg_self.values())),
                    ("collapsed stacks", flame_total)):
    if value != total:
        fail.append("%s = %s, total = %s" % (what, value, total))
if fail:
    sys.exit("\n".join(fail))
print("ok: %d symbols, total %d" % (len(js), total))
