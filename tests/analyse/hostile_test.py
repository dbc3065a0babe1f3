#!/usr/bin/env python3
"""igprof-analyse on dumps built to be hostile: very deep single paths and very
wide trees. Every report is checked for its exact figures, for an output size
that grows with the depth (not its square), and for a CPU time bound.

  hostile_test.py ANALYSE SCENARIO DEPTH [--rounds N] [--seconds-per-million S] [--reports LIST]

SCENARIO:
  deep       a path f1 -> f2 -> ... -> fD, frame d with self value d and one
             call (MEM_TOTAL); every report, -b/-D against a copy with values
             2d, two inputs merged
  recursion  one function recursing D deep, only the innermost frame has a
             value (MEM_TOTAL 10): names rec, rec'2 ... rec'D
  wide       main calling D functions g1..gD (self value i), each calling h
             (self value 1): entries with D callers and D callees

Time bound: the reports run in about 2-7 s of CPU (user+sys) per million dump
lines on the project's 2-core VM (measured under load); the bound is ten times
that, 60 s per million lines by default, with a floor of 5 s for small dumps.
It only catches super-linear behaviour; exact figures and output sizes are the
real checks (a quadratic report would also be quadratic in its output).
"""
import argparse, gzip, os, re, resource, sqlite3, struct, subprocess, sys, tempfile

ap = argparse.ArgumentParser()
ap.add_argument("analyse")
ap.add_argument("scenario", choices=["deep", "recursion", "wide"])
ap.add_argument("depth", type=int)
ap.add_argument("--rounds", type=int, default=1)
ap.add_argument("--seconds-per-million", type=float, default=60.0)
ap.add_argument("--reports", help="only these of the scenario's reports (comma-separated: json,text,flame,top,tree,...)")
args = ap.parse_args()
D = args.depth
STACK_FRAMES = 1024      # REPORT_STACK_FRAMES in src/analyse/report.h
INDENT_LEVELS = 64       # TREE_INDENT_LEVELS
tmp = tempfile.mkdtemp(prefix="igprof-hostile-")
failures = []


def selected(report):
    return not args.reports or report in args.reports.split(",")


def fail(msg):
    failures.append(msg)
    print("FAIL: " + msg, file=sys.stderr)


def cpu_children():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def run(name, *opts, lines):
    """Run the analyser with stdout to a file; return the file's path."""
    out = os.path.join(tmp, name + ".out")
    before = cpu_children()
    with open(out, "wb") as f:
        p = subprocess.run([args.analyse, *opts], stdout=f, stderr=subprocess.PIPE)
    spent = cpu_children() - before
    bound = max(5.0, args.seconds_per_million * lines / 1e6)
    if p.returncode != 0:
        fail("%s: exit %d: %s" % (name, p.returncode, p.stderr.decode(errors="replace")[:500]))
    if spent > bound:
        fail("%s: %.1f s of CPU for %d dump lines (bound %.1f s)" % (name, spent, lines, bound))
    print("%-22s %6.2f s CPU  %12d bytes" % (name, spent, os.path.getsize(out)))
    return out


def f32pct(a, b, decimals=2):
    """The analyser's percentage: float((double) a / b * 100), printed %.2f."""
    return "%.*f" % (decimals, struct.unpack("f", struct.pack("f", a / b * 100.0))[0])


def thousands(v):
    return "{:,}".format(v).replace(",", "'")


def write_dump(path, lines):
    with open(path, "w") as f:
        f.write("P=(HEX ID=1 N=(hostile) T=0.010000)\n")
        f.writelines(lines)


def pb_fields(buf):
    """(field, value) of one protobuf message: ints for varints, memoryviews
    for length-delimited fields (profile.proto needs no other wire type)."""
    pos, end = 0, len(buf)
    def varint():
        nonlocal pos
        v = shift = 0
        while True:
            b = buf[pos]
            pos += 1
            v |= (b & 0x7f) << shift
            shift += 7
            if b < 0x80:
                return v
    while pos < end:
        key = varint()
        if key & 7 == 0:
            yield key >> 3, varint()
        elif key & 7 == 2:
            n = varint()
            yield key >> 3, buf[pos:pos + n]
            pos += n
        else:
            raise ValueError("wire type %d" % (key & 7))


def packed(buf):
    out, v, shift = [], 0, 0
    for b in bytes(buf):
        v |= (b & 0x7f) << shift
        shift += 7
        if b < 0x80:
            out.append(v)
            v = shift = 0
    return out


def pprof_samples(path):
    """--pprof output as (sample type names, [(function names leaf first, values)])."""
    data = memoryview(gzip.open(path).read())
    strings, types, samples, locs, funcs = [], [], [], {}, {}
    for f, v in pb_fields(data):
        if f == 6:
            strings.append(bytes(v).decode())
        elif f == 1:
            types.append(dict(pb_fields(v))[1])
        elif f == 2:
            ids, vals = [], []
            for sf, sv in pb_fields(v):
                (ids if sf == 1 else vals).extend(packed(sv))
            samples.append((ids, vals))
        elif f == 4:
            loc = list(pb_fields(v))
            locs[dict(loc)[1]] = [dict(pb_fields(lv))[1] for lf, lv in loc if lf == 4][0]
        elif f == 5:
            fn = dict(pb_fields(v))
            funcs[fn[1]] = fn[2]
    return ([strings[t] for t in types],
            [([strings[funcs[locs[i]]] for i in ids], vals) for ids, vals in samples])


# ---- scenario: a deep path of distinct functions ----

def deep_dump(path, scale):
    def lines():
        for d in range(1, D + 1):
            fn = "FN%x=(F0%s+%x N=(f%d))+0" % (d - 1, "=(/nonexistent/prog)" if d == 1 else "", d, d)
            yield "C%x %s V0%s:(1,%x,%x)\n" % (d, fn, "=(MEM_TOTAL)" if d == 1 else "", scale * d, scale * d)
    write_dump(path, lines())


def check_json_rows(name, out, expect_row, expect_edge=None):
    """mainrows (one per line, rank order) must equal expect_row(rank);
    callers/callees lines are checked by expect_edge(section, entry rank)."""
    section, n, nedges = None, 0, {"callers": 0, "callees": 0}
    with open(out) as f:
        for line in f:
            m = re.match(r'"(\w+)": \[', line)
            if m:
                section = m.group(1)
                continue
            if section == "mainrows":
                row = line.strip().rstrip("],").lstrip("[").split(", ")
                n += 1
                want = expect_row(n)
                if row != want:
                    fail("%s: mainrow %d is %s, expected %s" % (name, n, row, want))
                    return
            elif section in ("callers", "callees") and expect_edge and line.startswith("["):
                row = line.strip().rstrip("],").lstrip("[").split(", ")
                nedges[section] += 1
                want = expect_edge(section, int(row[0]))
                if row != want:
                    fail("%s: %s row %s, expected %s" % (name, section, row, want))
                    return
    return n, nedges


def scenario_deep():
    dump, dump2 = os.path.join(tmp, "deep.dump"), os.path.join(tmp, "deep2.dump")
    deep_dump(dump, 1)
    T = D * (D + 1) // 2
    cum = lambda d: T - d * (d - 1) // 2     # f_d's cumulative value
    calls = lambda d: D - d + 1

    # JSON: every entry and every edge. <spontaneous> is rank 1, f_d rank d + 1.
    if selected("json"):
        def row(rank):
            if rank == 1:
                return ["1", "0", "0", "0", str(T), str(T), "0", str(D), "1", "1", "100.00"]
            d = rank - 1
            return [str(rank), str(d), "1", str(d), str(cum(d)), str(cum(d) - d), "1", str(calls(d)), "1", "1", f32pct(cum(d), T)]

        def edge(section, rank):
            d = rank - 1
            if section == "callers":
                return [str(rank), str(rank - 1), str(cum(d)), str(calls(d)), "1", f32pct(cum(d), T)]
            return [str(rank), str(rank + 1), str(cum(d + 1)), str(calls(d + 1)), "1", f32pct(cum(d + 1), T)]

        out = run("deep.json", "--json", dump, lines=D)
        got = check_json_rows("deep.json", out, row, edge)
        if got and got != (D + 1, {"callers": D, "callees": D}):
            fail("deep.json: %s entries/edges, expected %d entries and %d of each edge" % (got, D + 1, D))

    # Text report: one call-graph block per entry; each block's own line exact.
    if selected("text"):
        out = run("deep.text", dump, lines=D)
        blocks, main_ok = 0, 0
        main = re.compile(r"^\[(\d+)\]\s+([\d.]+)\s+([\d']+)\s+([\d']+) / ([\d']+)\s+([\d']+)\s+(\S+)$")
        with open(out) as f:
            for line in f:
                if line.startswith("- - -"):
                    blocks += 1
                m = main.match(line)
                if m:
                    rank = int(m.group(1))
                    d = rank - 1
                    want = (f32pct(cum(d), T, 1) if d else "100.0", thousands(cum(d) if d else T),
                            thousands(d), thousands(cum(d) - d if d else T), thousands(calls(d) if d else D),
                            "f%d" % d if d else "<spontaneous>")
                    if m.groups()[1:] == want:
                        main_ok += 1
                    elif main_ok == rank - 1:
                        fail("deep.text: main row %s, expected %s" % (m.groups(), want))
        if blocks != D + 1 or main_ok != D + 1:
            fail("deep.text: %d call-graph blocks, %d exact main rows, expected %d" % (blocks, main_ok, D + 1))

    # Collapsed stacks: exact, and every line at most STACK_FRAMES frames.
    if selected("flame"):
        out = run("deep.flame", "--flame", dump, lines=D)
        expect = []
        names = []
        for d in range(1, min(D, STACK_FRAMES) + 1):
            names.append("f%d" % d)
            expect.append(";".join(names) + " %d\n" % d)
        if D > STACK_FRAMES:
            expect.append(";".join(names) + ";[deeper frames] %d\n" % (T - STACK_FRAMES * (STACK_FRAMES + 1) // 2))
        if open(out).read() != "".join(expect):
            fail("deep.flame: output differs from the expected %d lines" % len(expect))

    # pprof: one sample per frame up to STACK_FRAMES deep, those below added
    # up under a last location [deeper frames] (as --flame).
    if selected("pprof"):
        pb = os.path.join(tmp, "deep.pb.gz")
        run("deep.pprof", "--pprof", pb, dump, lines=D)
        expect = [(["f%d" % k for k in range(d, 0, -1)], [1, d]) for d in range(1, min(D, STACK_FRAMES) + 1)]
        if D > STACK_FRAMES:
            expect.append((["[deeper frames]"] + ["f%d" % k for k in range(STACK_FRAMES, 0, -1)],
                           [D - STACK_FRAMES, T - STACK_FRAMES * (STACK_FRAMES + 1) // 2]))
        types, samples = pprof_samples(pb)
        if types != ["alloc_objects", "alloc_space"] or sorted(samples) != sorted(expect):
            fail("deep.pprof: %s, %d samples, expected %d" % (types, len(samples), len(expect)))
        os.unlink(pb)

    # --top 3: the three deepest frames, each with at most STACK_FRAMES frames.
    if selected("top"):
        out = run("deep.top", "--top", "3", dump, lines=D)
        expect = ""
        for i, leaf in enumerate((D, D - 1, D - 2)):
            expect += "## Entry %d (%s bytes)\n" % (i + 1, thousands(leaf))
            frames = ["f%d" % d for d in range(leaf, 0, -1)] + ["<spontaneous>"]
            for j, name in enumerate(frames[:STACK_FRAMES]):
                expect += "#%d %s\n" % (j, name)
            if len(frames) > STACK_FRAMES:
                expect += "#%d [%d outer frames not shown]\n" % (STACK_FRAMES, len(frames) - STACK_FRAMES)
            expect += "\n"
        if open(out).read() != expect:
            fail("deep.top: output differs from the expected stacks")

    # --tree: IgProf's massif rule, indentation capped at INDENT_LEVELS columns.
    if selected("tree"):
        out = run("deep.tree", "--tree", dump, lines=D)
        expect_tree(out, "deep.tree", lambda d: "f%d" % d, lambda d: cum(d) if d else T, lambda d: d, T)

    # sqlite database: every mainrow and edge.
    if selected("sqlite"):
        db = os.path.join(tmp, "deep.sql3")
        if os.path.exists(db):
            os.unlink(db)
        run("deep.sqlite", "--sqlite", db, dump, lines=D)
        con = sqlite3.connect(db)
        n = 0
        for r in con.execute("SELECT id, symbol_id, self_count, cumulative_count, kids, self_calls, total_calls FROM mainrows ORDER BY id"):
            n += 1
            d = r[0] - 1
            want = (d + 1, d + 1, d, cum(d) if d else T, (cum(d) - d) if d else T, 1 if d else 0, calls(d) if d else D)
            if r != want:
                fail("deep.sqlite: mainrow %s, expected %s" % (r, want))
                break
        edges = con.execute("SELECT count(*), sum(to_child_count = (SELECT cumulative_count FROM mainrows WHERE id = child_id)) FROM parents").fetchone()
        con.close()
        if n != D + 1 or edges != (D, D):
            fail("deep.sqlite: %d mainrows, parents %s, expected %d and (%d, %d)" % (n, edges, D + 1, D, D))

    # callgrind: one block per entry, a call record per edge with its value.
    if selected("callgrind"):
        out = run("deep.callgrind", "-C", os.path.join(tmp, "deep.callgrind"), dump, lines=D)
        fns, calls_ok, summary = 0, 0, None
        with open(os.path.join(tmp, "deep.callgrind")) as f:
            prev = None
            for line in f:
                if line.startswith("summary: "):
                    summary = int(line[9:])
                elif line.startswith("fn="):
                    fns += 1
                elif prev is not None and prev.startswith("calls="):
                    # entry in rank order: rank r (f_{r-1}) calls f_r with cum(r)
                    if prev == "calls=%d 0\n" % calls(fns) and line == "0 %d\n" % cum(fns):
                        calls_ok += 1
                prev = line
        if summary != T or fns != D + 1 or calls_ok != D:
            fail("deep.callgrind: summary %s, %d functions, %d exact calls; expected %d, %d, %d" % (summary, fns, calls_ok, T, D + 1, D))

    # HTML: one block per entry, the entry's own row exact (--html-limit 0:
    # every entry; by default the page holds 500).
    if selected("html"):
        out = run("deep.html", "--html", "--html-limit", "0", dump, lines=D)
        main = re.compile(r'<tr class="main"><td>\[(\d+)\]</td><td>([\d.]+)</td><td>([\d\']+) \(self ([\d\']+)\)</td><td>(\d+)</td><td>([^ <]+) ')
        n = 0
        with open(out) as f:
            for line in f:
                m = main.match(line)
                if not m:
                    continue
                n += 1
                d = int(m.group(1)) - 1
                want = (str(d + 1), f32pct(cum(d), T) if d else "100.00", thousands(cum(d) if d else T), thousands(d),
                        str(calls(d) if d else D), "f%d" % d if d else "&lt;spontaneous&gt;")
                if m.groups() != want:
                    fail("deep.html: %s, expected %s" % (m.groups(), want))
                    break
        if n != D + 1:
            fail("deep.html: %d entry blocks, expected %d" % (n, D + 1))

    # -b/-D: the copy with values 2d minus the original is the original again,
    # and every delta is 100 % of the baseline's value.
    if selected("diff"):
        deep_dump(dump2, 2)
        out = run("deep.diff", "-b", dump, "-D", "--json", dump2, lines=2 * D)
        got = check_json_rows("deep.diff", out, diff_row)
        if got and got[0] != D + 1:
            fail("deep.diff: %d entries, expected %d" % (got[0], D + 1))

    # Two inputs merged: every value and call count doubles.
    if selected("merge"):
        out = run("deep.merge", "--json", dump, dump, lines=2 * D)
        got = check_json_rows("deep.merge", out, merge_row)
        if got and got[0] != D + 1:
            fail("deep.merge: %d entries, expected %d" % (got[0], D + 1))


def diff_row(rank):
    # new - base with new = 2 x base: the same figures as base; calls 1 - 1 = 0.
    T = D * (D + 1) // 2
    d = rank - 1
    cum = T - d * (d - 1) // 2 if d else T
    return [str(rank), str(d), "1" if d else "0", str(d), str(cum), str(cum - d), "0", "0", "1", "1", "100.00"]


def merge_row(rank):
    T = D * (D + 1) // 2
    d = rank - 1
    cum = T - d * (d - 1) // 2 if d else T
    return [str(rank), str(d), "1" if d else "0", str(2 * d), str(2 * cum), str(2 * (cum - d)), "2" if d else "0",
            str(2 * (D - d + 1)) if d else str(2 * D), "1", "1", f32pct(cum, T) if d else "100.00"]


def expect_tree(out, name, node_name, node_cum, node_self, total, children=None):
    """A single-path tree: node d (1..D) under node d-1, kept while IgProf's
    massif rule keeps it; compared line by line."""
    pct = lambda v: v / total * 100.0
    lines = ["<spontaneous>\n"]
    for d in range(1, D + 1):
        c, parent = pct(node_cum(d)), pct(node_cum(d - 1))
        if (c < 1.0 and parent < 1.0) or c < 0.1:
            break
        shown = min(d, INDENT_LEVELS)
        indent = "  " * (shown - 1) + (" |" if shown == d else "  ") + ("[+%d]" % (d - shown) if d > shown else "")
        lines.append(indent + ("->(%.2f) " % c if node_self(d) else "") + node_name(d) + "\n")
    got = open(out).read()
    if got != "".join(lines):
        fail("%s: %d lines, %d bytes; expected %d lines, %d bytes" % (name, got.count("\n"), len(got), len(lines), len("".join(lines))))


# ---- scenario: one function recursing D deep ----

def scenario_recursion():
    dump = os.path.join(tmp, "rec.dump")

    def lines():
        for d in range(1, D + 1):
            fn = "FN0=(F0=(/nonexistent/prog)+10 N=(rec))+0" if d == 1 else "FN0+0"
            yield "C%x %s%s\n" % (d, fn, " V0=(MEM_TOTAL):(1,a,a)" if d == D else "")
    write_dump(dump, lines())
    name = lambda d: "rec" if d == 1 else "rec'%d" % d

    out = run("rec.tree", "--tree", dump, lines=D)
    expect_tree(out, "rec.tree", name, lambda d: 10, lambda d: d == D, 10)

    out = run("rec.top", "--top", "3", dump, lines=D)
    frames = [name(d) for d in range(D, 0, -1)] + ["<spontaneous>"]
    expect = "## Entry 1 (10 bytes)\n" + "".join("#%d %s\n" % (j, n) for j, n in enumerate(frames[:STACK_FRAMES]))
    if len(frames) > STACK_FRAMES:
        expect += "#%d [%d outer frames not shown]\n" % (STACK_FRAMES, len(frames) - STACK_FRAMES)
    if open(out).read() != expect + "\n":
        fail("rec.top: output differs from the expected stack")

    out = run("rec.flame", "--flame", dump, lines=D)
    expect = ";".join(["rec"] * min(D, STACK_FRAMES)) + (";[deeper frames]" if D > STACK_FRAMES else "") + " 10\n"
    if open(out).read() != expect:
        fail("rec.flame: output differs from %r..." % expect[:40])

    pb = os.path.join(tmp, "rec.pb.gz")
    run("rec.pprof", "--pprof", pb, dump, lines=D)
    expect = [((["[deeper frames]"] if D > STACK_FRAMES else []) + ["rec"] * min(D, STACK_FRAMES), [1, 10])]
    if pprof_samples(pb) != (["alloc_objects", "alloc_space"], expect):
        fail("rec.pprof: %s..." % str(pprof_samples(pb))[:200])
    os.unlink(pb)

    # Every recursion level is its own entry: rank d + 1 is rec'd.
    out = run("rec.json", "--json", dump, lines=D)
    row = lambda rank: [str(rank), str(rank - 1), "0" if rank == 1 else "1", "10" if rank == D + 1 else "0", "10",
                        "0" if rank == D + 1 else "10", "1" if rank == D + 1 else "0", "1", "1", "1", "100.00"]
    got = check_json_rows("rec.json", out, row)
    symbols = []
    with open(out) as f:
        section = None
        for line in f:
            m = re.match(r'"(\w+)": \[', line)
            if m:
                section = m.group(1)
            elif section == "symbols":
                symbols.append(line.strip().rstrip("],").strip('"'))
    if got and got[0] != D + 1 or symbols != ["<spontaneous>"] + [name(d) for d in range(1, D + 1)]:
        fail("rec.json: %s entries, symbols %s..." % (got and got[0], symbols[:4]))

    out = run("rec.text", dump, lines=D)
    blocks = sum(1 for line in open(out) if line.startswith("- - -"))
    if blocks != D + 1:
        fail("rec.text: %d call-graph blocks, expected %d" % (blocks, D + 1))


# ---- scenario: a wide tree ----

def scenario_wide():
    dump = os.path.join(tmp, "wide.dump")

    def lines():
        yield "C1 FN0=(F0=(/nonexistent/prog)+10 N=(main))+0\n"
        for i in range(1, D + 1):
            yield "C2 FN%x=(F0+%x N=(g%d))+0 V0%s:(1,%x,%x)\n" % (2 * i - 1, 16 + i, i, "=(MEM_TOTAL)" if i == 1 else "", i, i)
            yield "C3 FN%x=(F0+8 N=(h))+0 V0:(1,1,1)\n" % (2 * i) if i == 1 else "C3 FN2+0 V0:(1,1,1)\n"
    write_dump(dump, lines())
    G = D * (D + 1) // 2
    T = G + D
    # Ranks: <spontaneous>, main (T), then g_D .. g_1 by cumulative i + 1, h (D)
    # slotted in by value, ties broken by depth (h is deeper) then name.
    order = sorted([("g%d" % i, i + 1, 3) for i in range(1, D + 1)] + [("h", D, 4)], key=lambda e: (-e[1], e[2], e[0]))

    out = run("wide.json", "--json", dump, lines=2 * D + 1)
    def row(rank):
        if rank <= 2:
            return [str(rank), str(rank - 1), "0" if rank == 1 else "1", "0", str(T), str(T), "0", str(2 * D), "1", "1", "100.00"]
        nm, c, _ = order[rank - 3]
        if nm == "h":
            return [str(rank), str(rank - 1), "1", str(D), str(D), "0", str(D), str(D), str(D), str(D), f32pct(D, T)]
        i = c - 1
        return [str(rank), str(rank - 1), "1", str(i), str(c), "1", "1", "2", "1", "1", f32pct(c, T)]
    got = check_json_rows("wide.json", out, row)
    if got and got != (D + 3, {"callers": 0, "callees": 0}):
        fail("wide.json: %s entries" % (got,))

    # main's block lists D callees, h's block D callers.
    out = run("wide.text", dump, lines=2 * D + 1)
    callers_of_h = sum(1 for line in open(out) if re.match(r"^\s+[\d.]+\s+\.+\s+1 / \d", line) and " g" in line)
    if callers_of_h != D:
        fail("wide.text: h has %d caller rows, expected %d" % (callers_of_h, D))

    out = run("wide.top", "--top", "3", dump, lines=2 * D + 1)
    expect = "".join("## Entry %d (%s bytes)\n#0 g%d\n#1 main\n#2 <spontaneous>\n\n" % (k + 1, thousands(D - k), D - k) for k in range(3))
    if open(out).read() != expect:
        fail("wide.top: output differs")

    out = run("wide.tree", "--tree", dump, lines=2 * D + 1)
    shown = [i for i in range(D, 0, -1) if (i + 1) / T * 100.0 >= 1.0]
    expect = "<spontaneous>\n |main\n"
    for n, i in enumerate(shown):
        expect += "   |->(%.2f) g%d\n" % ((i + 1) / T * 100.0, i)
        if 1 / T * 100.0 >= 1.0:
            expect += ("   | |->(%.2f) h\n" if n + 1 < len(shown) else "     |->(%.2f) h\n") % (1 / T * 100.0)
    if open(out).read() != expect:
        fail("wide.tree: output differs")


for r in range(args.rounds):
    {"deep": scenario_deep, "recursion": scenario_recursion, "wide": scenario_wide}[args.scenario]()
    if failures:
        break
for f in os.listdir(tmp):
    os.unlink(os.path.join(tmp, f))
os.rmdir(tmp)
if failures:
    sys.exit("%d failure(s)" % len(failures))
print("ok")
