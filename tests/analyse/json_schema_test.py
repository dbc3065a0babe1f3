#!/usr/bin/env python3
"""--json and --json-objects: every report validates against
docs/analyse-json.schema.json (python3-jsonschema) and the schema rejects
what it must; both shapes hold the same figures; jq reads object rows by
name. Usage: json_schema_test.py ANALYSE SCHEMA DATA_DIR"""
import copy, json, os, shutil, subprocess, sys

try:
    import jsonschema
except ImportError:
    # Debian's python3-jsonschema (scripts/deps.sh) is /usr/bin/python3's;
    # another python3 first in PATH may not have it.
    if sys.executable != "/usr/bin/python3" and os.path.exists("/usr/bin/python3"):
        os.execv("/usr/bin/python3", ["/usr/bin/python3", *sys.argv])
    sys.exit("python3-jsonschema is not installed (scripts/deps.sh)")

analyse, schema_path, data = (os.path.abspath(a) for a in sys.argv[1:4])
schema = json.load(open(schema_path))
jsonschema.Draft202012Validator.check_schema(schema)
validator = jsonschema.Draft202012Validator(schema)
fail = []

def report(shape, *args):
    r = subprocess.run([analyse, shape, *args], capture_output=True, text=True, cwd=data)
    if r.returncode != 0:
        sys.exit("igprof-analyse %s %s failed: %s" % (shape, " ".join(args), r.stderr))
    return r.stdout

def errors(doc):
    return [e.message for e in validator.iter_errors(doc)]

cases = [["mem.dump"], ["-r", "MEM_LIVE", "mem.dump"], ["perf.dump"], ["odd.dump"],
         ["-b", "base.dump", "-D", "new.dump"], ["-r", "MEM_MAX", "igprof_style.dump"], ["big_sum.dump"]]
for args in cases:
    arrays = json.loads(report("--json", *args))
    objects = json.loads(report("--json-objects", *args))
    for doc, shape in ((arrays, "arrays"), (objects, "objects")):
        if doc.get("format") != "igprof-analyse" or doc.get("version") != 1 or doc.get("rows") != shape:
            fail.append("%s %s: format/version/rows %r" % (shape, args, [doc.get(k) for k in ("format", "version", "rows")]))
        for e in errors(doc):
            fail.append("%s %s: not valid: %s" % (shape, args, e))
    # The same figures in both shapes, names written out in objects.
    syms, files = arrays["symbols"], arrays["files"]
    want = [{"rank": r[0], "symbol": syms[r[1]], "file": files[r[2]], "self": r[3], "total": r[4], "kids": r[5],
             "self_calls": r[6], "total_calls": r[7], "self_paths": r[8], "total_paths": r[9],
             "pct": None if r[10] == -101 else r[10]} for r in arrays["mainrows"]]
    if want != objects["mainrows"]:
        fail.append("%s: object mainrows differ from the arrays': %s vs %s" % (args, objects["mainrows"], want))
    name = {r[0]: syms[r[1]] for r in arrays["mainrows"]}
    for key, other in (("callers", "caller"), ("callees", "callee")):
        want = [{"rank": e[0], "symbol": name[e[0]], other: e[1], other + "_symbol": name[e[1]], "value": e[2],
                 "calls": e[3], "paths": e[4], "pct": None if e[5] == -101 else e[5]} for e in arrays[key]]
        if want != objects[key]:
            fail.append("%s: object %s differ: %s vs %s" % (args, key, objects[key], want))
    if arrays["summary"] != objects["summary"]:
        fail.append("%s: summaries differ" % args)

# Exact figures of mem.dump (data/README.md): bar's total 1'132 in 5 calls,
# main's callees; the diff's new entry 'cache' has a null pct.
mem = json.loads(report("--json-objects", "mem.dump"))
bar = [r for r in mem["mainrows"] if r["symbol"] == "bar"]
if [(r["total"], r["self"], r["total_calls"]) for r in bar] != [(1132, 1100, 5)]:
    fail.append("mem.dump: bar is %s" % bar)
if [(e["callee_symbol"], e["value"]) for e in mem["callees"] if e["symbol"] == "main"] != [("bar", 1132), ("foo", 79), ("@{prog+400}", 1)]:
    fail.append("mem.dump: main's callees %s" % mem["callees"])
if mem["summary"] != {"counter": "MEM_TOTAL", "unit": "bytes", "total_counts": 1212, "total_freq": 10, "tick_period": 0}:
    fail.append("mem.dump: summary %s" % mem["summary"])
diff = json.loads(report("--json-objects", "-b", "base.dump", "-D", "new.dump"))
if [(r["symbol"], r["total"]) for r in diff["mainrows"] if r["pct"] is None] != [("cache", 100)]:
    fail.append("diff: rows without pct: %s" % diff["mainrows"])

# The schema is not a formality: these documents must be refused.
def must_refuse(what, doc):
    if not errors(doc):
        fail.append("the schema accepts %s" % what)
bad = copy.deepcopy(mem); del bad["version"]; must_refuse("a report without version", bad)
bad = copy.deepcopy(mem); bad["format"] = "other"; must_refuse("another format", bad)
bad = copy.deepcopy(mem); bad["mainrows"][0]["total"] = "1212"; must_refuse("a string value", bad)
bad = copy.deepcopy(mem); bad["mainrows"][0]["extra"] = 1; must_refuse("an unknown member", bad)
bad = copy.deepcopy(mem); bad["rows"] = "arrays"; must_refuse("object rows labelled arrays", bad)
arr = json.loads(report("--json", "mem.dump"))
bad = copy.deepcopy(arr); bad["mainrows"][0] = bad["mainrows"][0][:10]; must_refuse("a 10-column main row", bad)
bad = copy.deepcopy(arr); bad["mainrows"][0][0] = 0; must_refuse("rank 0", bad)
bad = copy.deepcopy(arr); bad["callers"][0].append(1); must_refuse("a 7-column edge", bad)
bad = copy.deepcopy(arr); del bad["symbols"]; must_refuse("array rows without symbols", bad)

# jq, the way docs/analyse.md shows it.
jq = shutil.which("jq")
if not jq:
    fail.append("jq is not installed (scripts/deps.sh)")
else:
    q = subprocess.run([jq, "-r", '.mainrows[] | select(.self > 0) | "\\(.symbol) \\(.self)"'],
                       input=report("--json-objects", "mem.dump"), capture_output=True, text=True)
    if q.returncode != 0 or q.stdout != "bar 1100\nfoo 111\n@{prog+400} 1\n":
        fail.append("jq query: %r %s" % (q.stdout, q.stderr))

if fail:
    sys.exit("\n".join(fail))
print("ok: %d reports in both shapes valid and equal" % len(cases))
