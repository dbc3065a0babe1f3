#!/usr/bin/env python3
"""--pprof read by go tool pprof, on real dumps of pprofprog.c:
  -mp: alloc_space/alloc_objects/inuse_space/inuse_objects/peak_space are
       MEM_TOTAL/MEM_LIVE/MEM_PEAK's values and calls: every function's flat
       and cum in `go tool pprof -top` equal its self and total in
       igprof-analyse's report, the totals equal the text report's, and the
       allocations pprofprog.c makes are exact;
  -pp: cpu nanoseconds = PERF_TICKS x the dump's period, samples = ticks,
       the text report's total seconds; period type and period in -raw;
  -mp -pp: both in one profile, the default type and filters those of -r;
  -g --lines: locations name the source line of each allocation; mappings
       carry the ELF files' build ids.
Usage: pprof_test.py --bin BUILD/bin --go GO --prog PPROFPROG [--asan ANALYSE_ASAN]"""
import argparse, glob, gzip, json, math, os, re, subprocess, sys, tempfile

ap = argparse.ArgumentParser()
for a in ("--bin", "--go", "--prog"):
    ap.add_argument(a, required=True)
ap.add_argument("--asan", help="the ASan+UBSan analyser: must write the same profiles")
args = ap.parse_args()
args.bin, args.prog = os.path.abspath(args.bin), os.path.abspath(args.prog)
analyse, igprof = os.path.join(args.bin, "igprof-analyse"), os.path.join(args.bin, "igprof")
tmp = tempfile.mkdtemp()
fail = []
src = os.path.join(os.path.dirname(os.path.abspath(__file__)), "pprofprog.c")


def run(cmd, ok=True):
    r = subprocess.run(cmd, capture_output=True, text=True, cwd=tmp, timeout=240)
    if ok and r.returncode != 0:
        sys.exit("%s failed (%d): %s" % (" ".join(cmd), r.returncode, r.stderr))
    return r


def profile(*kinds_and_args):
    kinds = [a for a in kinds_and_args if a.startswith("-")]
    prog_args = [a for a in kinds_and_args if not a.startswith("-")]
    stem = "".join(k[1:] for k in kinds)
    run([igprof, *kinds, "-o", os.path.join(tmp, stem + ".%p"), args.prog, *prog_args])
    dumps = glob.glob(os.path.join(tmp, stem + ".*"))
    if len(dumps) != 1:
        sys.exit("%s: expected one dump, got %s" % (kinds, dumps))
    return dumps[0]


def entries(dump, counter):
    """{function: (self, total, self calls, total calls)} of igprof-analyse's report."""
    j = json.loads(run([analyse, "--json-objects", "-r", counter, dump]).stdout)
    return {r["symbol"]: (r["self"], r["total"], r["self_calls"], r["total_calls"])
            for r in j["mainrows"] if r["symbol"] != "<spontaneous>"}, j["summary"]


def top(pb, index, unit=None):
    """{function: (flat, cum)} and the total of `go tool pprof -top`, every node."""
    cmd = [args.go, "tool", "pprof", "-top", "-nodefraction=0", "-edgefraction=0", "-nodecount=100000",
           "-sample_index=" + index]
    if unit:
        cmd.append("-unit=" + unit)
    out = run(cmd + [pb]).stdout
    total = re.search(r"^Showing nodes accounting for \S+, [\d.]+% of (\S+) total$", out, re.M)
    num = lambda s: 0 if s == "0" else int(re.match(r"^(-?\d+)(?:B|ns)?$", s).group(1))
    rows = {}
    for m in re.finditer(r"^[ \t]*(\S+)[ \t]+\S+%[ \t]+\S+%[ \t]+(\S+)[ \t]+\S+%[ \t]+(.+)$", out, re.M):
        rows[m.group(3)] = (num(m.group(1)), num(m.group(2)))
    return rows, num(total.group(1)) if total else None


def text_total(dump, counter):
    """The text report's total (the <spontaneous> line of the flat profile)."""
    out = run([analyse, "-r", counter, dump]).stdout
    m = re.search(r"^\s+100\.0\s+(\S+)\s+.*<spontaneous> \[1\]$", out, re.M)
    return m.group(1).replace("'", "")


def text_self_rows(dump, counter):
    """[(function, self)] of the text report's flat profile by self value,
    in its order (self as printed: bytes, or seconds with two decimals)."""
    out = run([analyse, "-r", counter, dump]).stdout
    section = out.split("Flat profile (self >= 0.01%)", 1)[1].split("Call tree profile", 1)[0]
    rows = re.findall(r"^\s+[\d.]+\s+(\S+)(?:\s+\d+)?\s+(.+) \[\d+\]$", section, re.M)
    return [(name, v.replace("'", "")) for v, name in rows if name != "<spontaneous>"]


def pprof_top_order(pb, index, unit, fmt):
    """[(function, flat)] of go tool pprof -top with a flat value, in its order."""
    cmd = [args.go, "tool", "pprof", "-top", "-nodefraction=0", "-nodecount=100000", "-sample_index=" + index, "-unit=" + unit, pb]
    rows = re.findall(r"^[ \t]*(\S+)[ \t]+\S+%[ \t]+\S+%[ \t]+\S+[ \t]+\S+%[ \t]+(.+)$", run(cmd).stdout, re.M)
    return [(name, fmt(v)) for v, name in rows if v not in ("0", "flat")]


def compare(dump, pb, counter, index, calls, unit=None, scale=1):
    ours, summary = entries(dump, counter)
    k = 2 if calls else 0
    want = {f: (v[k] * scale, v[k + 1] * scale) for f, v in ours.items() if v[k + 1]}
    got, total = top(pb, index, unit)
    if got != want:
        fail.append("%s %s: go tool pprof -top\n  %s\nigprof-analyse\n  %s" % (os.path.basename(dump), index, got, want))
    want_total = (summary["total_freq"] if calls else summary["total_counts"]) * scale
    if total != want_total:
        fail.append("%s %s: pprof total %s, igprof-analyse %s" % (os.path.basename(dump), index, total, want_total))
    return got


# -mp
mem = profile("-mp")
pb = os.path.join(tmp, "mem.pb.gz")
run([analyse, "--pprof", pb, mem])
with open(pb, "rb") as f:
    if f.read(2) != b"\x1f\x8b":
        fail.append("mem.pb.gz is not gzip-compressed")
space = compare(mem, pb, "MEM_TOTAL", "alloc_space", False, "B")
objects = compare(mem, pb, "MEM_TOTAL", "alloc_objects", True)
inuse = compare(mem, pb, "MEM_LIVE", "inuse_space", False, "B")
compare(mem, pb, "MEM_LIVE", "inuse_objects", True)
compare(mem, pb, "MEM_PEAK", "peak_space", False, "B")
# The text report's functions by self value, in its order, are pprof's top.
for counter, index in (("MEM_TOTAL", "alloc_space"), ("MEM_LIVE", "inuse_space")):
    want, got = text_self_rows(mem, counter), pprof_top_order(pb, index, "B", lambda v: v.rstrip("B"))
    if got != want or not want:
        fail.append("mem %s: text report's self rows %s, go tool pprof -top %s" % (index, want, got))
if text_total(mem, "MEM_TOTAL") != str(top(pb, "alloc_space", "B")[1]):
    fail.append("mem: text report total %s" % text_total(mem, "MEM_TOTAL"))
exact = {"big_blocks": ((3000, 3000), (3, 3), (3000, 3000)), "mixed": ((500, 600), (1, 11), (500, 500)),
         "small_blocks": ((200, 200), (20, 20), None)}
for f, (s, o, i) in exact.items():
    if space.get(f) != s or objects.get(f) != o or inuse.get(f) != i:
        fail.append("mem: %s: alloc_space %s, alloc_objects %s, inuse_space %s; expected %s %s %s"
                    % (f, space.get(f), objects.get(f), inuse.get(f), s, o, i))
raw = run([args.go, "tool", "pprof", "-raw", pb]).stdout
types = "alloc_objects/count alloc_space/bytes[dflt] inuse_objects/count inuse_space/bytes peak_objects/count peak_space/bytes"
if types not in raw:
    fail.append("mem: sample types are not %r:\n%s" % (types, raw[:600]))

# -g --lines: file:line of each allocation, build ids of the mappings.
pb_lines = os.path.join(tmp, "mem-lines.pb.gz")
run([analyse, "-g", "--lines", "--pprof", pb_lines, mem])
raw = run([args.go, "tool", "pprof", "-raw", pb_lines]).stdout
lines = open(src).read().splitlines()
for fn, needle in (("big_blocks", "malloc(1000)"), ("mixed", "malloc(500)"), ("small_blocks", "malloc(10)")):
    where = "%s %s:%d" % (fn, src, 1 + next(i for i, l in enumerate(lines) if needle in l))
    if not re.search(r"^\s+\d+: 0x[0-9a-f]+ M=\d+ %s s=0$" % re.escape(where), raw, re.M):
        fail.append("-g --lines: no location %r in\n%s" % (where, raw))
notes = run(["readelf", "-n", args.prog]).stdout
build_id = re.search(r"Build ID: ([0-9a-f]+)", notes).group(1)
if not re.search(r"^\d+: 0x[0-9a-f]+/0x[0-9a-f]+/0x0 %s %s \[FN\]\[FL\]\[LN\]\[IN\]$" % (re.escape(args.prog), build_id), raw, re.M):
    fail.append("-g --lines: no mapping of %s with build id %s in\n%s" % (args.prog, build_id, raw))
lines_top = run([args.go, "tool", "pprof", "-top", "-lines", "-nodefraction=0", "-unit=B", pb_lines]).stdout
if not re.search(r"^\s+3000B .* big_blocks %s:\d+$" % re.escape(src), lines_top, re.M):
    fail.append("-g --lines: go tool pprof -top -lines:\n%s" % lines_top)

# -pp
cpu = profile("-pp", "cpu")
period = float(re.match(r"^P=\(.*\) T=([\d.]+)\)$", open(cpu).readline()).group(1))
period_ns = round(period * 1e9)
pb = os.path.join(tmp, "cpu.pb.gz")
run([analyse, "--pprof", pb, cpu])
ns = compare(cpu, pb, "PERF_TICKS", "cpu", False, "ns", period_ns)
compare(cpu, pb, "PERF_TICKS", "samples", False)
raw = run([args.go, "tool", "pprof", "-raw", pb]).stdout
if "PeriodType: cpu nanoseconds\nPeriod: %d\n" % period_ns not in raw or "samples/count cpu/nanoseconds[dflt]" not in raw:
    fail.append("cpu: period or sample types in\n%s" % raw[:400])
want = text_self_rows(cpu, "PERF_TICKS")
# seconds as the text report computes them: ticks x T, rounded half away from zero
got = pprof_top_order(pb, "cpu", "ns", lambda v: "%.2f" % (math.floor(int(v.rstrip("ns")) // period_ns * period * 100 + 0.5) / 100))
if [n for n, _ in got[:1]] != ["spin"] or got[:len(want)] != want[:len(got)] or not want:
    fail.append("cpu: text report's self rows %s, go tool pprof -top %s" % (want, got))
total_ns = top(pb, "cpu", "ns")[1]
ticks = entries(cpu, "PERF_TICKS")[1]["total_counts"]
# the text report shows ticks x T rounded half away from zero (C's round)
if total_ns != ticks * period_ns or text_total(cpu, "PERF_TICKS") != "%.2f" % (math.floor(ticks * period * 100 + 0.5) / 100):
    fail.append("cpu: text report total %s s, pprof %d ns" % (text_total(cpu, "PERF_TICKS"), total_ns))
if not (ns.get("spin_long", (0, 0))[1] > ns.get("spin_short", (0, 0))[1] > 0):
    fail.append("cpu: spin_long %s should exceed spin_short %s" % (ns.get("spin_long"), ns.get("spin_short")))

# -mp -pp: one dump, memory and CPU sample types in one profile; the
# default type and the default filters follow -r (allocator frames are
# folded for MEM_* counters only, as in the reports).
both = profile("-mp", "-pp", "both")
for counter, index, unit, scale, default in (("MEM_TOTAL", "alloc_space", "B", 1, "alloc_space/bytes[dflt]"),
                                             ("PERF_TICKS", "cpu", "ns", period_ns, "cpu/nanoseconds[dflt]")):
    pb = os.path.join(tmp, "both-%s.pb.gz" % index)
    run([analyse, "-r", counter, "--pprof", pb, both])
    compare(both, pb, counter, index, False, unit, scale)
    raw = run([args.go, "tool", "pprof", "-raw", pb]).stdout
    if default not in raw or "samples/count" not in raw or "inuse_space/bytes" not in raw:
        fail.append("-mp -pp -r %s: sample types in\n%s" % (counter, raw[:500]))

# Names that are not UTF-8 (badutf8.dump) become U+FFFD, for decoders that
# check proto3 strings; others survive as they are (odd.dump).
data = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")
for dump, names in (("badutf8.dump", ["bad\ufffd\ufffdutf", 'ok_\u00e9_"q"']),
                    ("odd.dump", ['quote\'d "name" back\\slash', "\u00fcber_\u2713"])):
    pb = os.path.join(tmp, dump + ".pb.gz")
    run([analyse, "--pprof", pb, os.path.join(data, dump)])
    raw = run([args.go, "tool", "pprof", "-raw", pb]).stdout
    for n in names:
        if " M=1 %s :0 s=0\n" % n not in raw:
            fail.append("%s: no location %r in\n%s" % (dump, n, raw))

# The ASan+UBSan build writes the same bytes, without a report.
if args.asan:
    for name, extra, dump in (("mem", [], mem), ("lines", ["-g", "--lines"], mem), ("cpu", [], cpu),
                              ("both", ["-r", "PERF_TICKS"], both)):
        a, b = os.path.join(tmp, name + "-plain.pb.gz"), os.path.join(tmp, name + "-asan.pb.gz")
        run([analyse, *extra, "--pprof", a, dump])
        r = subprocess.run([args.asan, *extra, "--pprof", b, dump], capture_output=True, text=True,
                           env=dict(os.environ, ASAN_OPTIONS="detect_leaks=0"))
        if r.returncode != 0 or r.stderr or gzip.open(a).read() != gzip.open(b).read():
            fail.append("ASan build, %s: exit %d, %r, same profile: %s" % (name, r.returncode, r.stderr[-500:],
                        r.returncode == 0 and gzip.open(a).read() == gzip.open(b).read()))

# Usage errors and an output that cannot be written.
for extra, msg in ((["-b", mem], "--pprof: no baseline (-b)"), (["--value", "peak"], "--pprof: no --value peak"),
                   (["-mc", "5"], "--pprof: no -mc")):
    r = run([analyse, "--pprof", os.path.join(tmp, "x.pb.gz"), *extra, mem], ok=False)
    if r.returncode == 0 or msg not in r.stderr:
        fail.append("%s: exit %d, %r" % (extra, r.returncode, r.stderr))
r = run([analyse, "--pprof", os.path.join(tmp, "none", "x.pb.gz"), mem], ok=False)
if r.returncode != 1 or "cannot write" not in r.stderr:
    fail.append("unwritable output: exit %d, %r" % (r.returncode, r.stderr))

subprocess.run(["rm", "-rf", tmp])
if fail:
    sys.exit("\n".join(fail))
print("ok")
