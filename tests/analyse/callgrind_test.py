#!/usr/bin/env python3
"""--callgrind read by valgrind's callgrind_annotate: no warnings on stderr,
the text report's totals, self and inclusive costs.
1. mem.dump (no -g): functions in object /usr/bin/prog, file ???.
2. -g --lines on a dump of analyse-symprog's own call sites: bare names,
   fl=/fi=/fe= with the real source files, costs on the source lines (read
   back from callgrind_annotate's annotated source).
Usage: callgrind_test.py ANALYSE CALLGRIND_ANNOTATE DATA_DIR SYMPROG"""
import os, re, subprocess, sys, tempfile

analyse, annotate, data, symprog = (os.path.abspath(a) for a in sys.argv[1:5])
tmp = tempfile.mkdtemp()
fail = []

def run(cmd):
    # callgrind_annotate shortens fl= paths under its working directory but
    # not cfi= ones: run it where no source lives.
    r = subprocess.run(cmd, capture_output=True, text=True, cwd=tmp)
    if r.returncode != 0:
        sys.exit("%s failed: %s" % (" ".join(cmd), r.stderr))
    if r.stderr:
        fail.append("%s wrote on stderr: %s" % (os.path.basename(cmd[0]), r.stderr))
    return r.stdout

def costs(text):
    """'file:function [object]' -> cost, from the function table."""
    out = {}
    for m in re.finditer(r"^\s*([\d,]+) \(\s*[\d.]+%\)  (\S+:\S+(?: \[[^\]]*\])?)$", text, re.M):
        out[m.group(2)] = int(m.group(1).replace(",", ""))
    return out

def totals(text):
    m = re.search(r"^([\d,]+) \(100.0%\)  PROGRAM TOTALS$", text, re.M)
    return int(m.group(1).replace(",", "")) if m else None

# 1. mem.dump
cg = os.path.join(tmp, "mem.callgrind")
run([analyse, "--callgrind", cg, os.path.join(data, "mem.dump")])
self_ = run([annotate, cg])
incl = run([annotate, "--inclusive=yes", cg])
if totals(self_) != 1212:
    fail.append("mem.dump: PROGRAM TOTALS %s, expected 1,212" % totals(self_))
want = {"???:bar [/usr/bin/prog]": 1100, "???:foo [/usr/bin/prog]": 111}
if costs(self_) != want:
    fail.append("mem.dump self costs %s, expected %s" % (costs(self_), want))
want = {"???:<spontaneous> [<dynamically generated>]": 1212, "???:main [/usr/bin/prog]": 1212,
        "???:bar [/usr/bin/prog]": 1132, "???:foo [/usr/bin/prog]": 111}
if {k: v for k, v in costs(incl).items() if v > 1} != want:
    fail.append("mem.dump inclusive costs %s, expected %s" % (costs(incl), want))

# 2. -g --lines: main calls gamma -> beta -> alpha, and stitched() from three
# lines, the middle one in symprog_part.inc.
offsets = {}
for line in subprocess.run([symprog], capture_output=True, text=True, check=True).stdout.splitlines():
    name, off, _ = line.split()
    offsets[name] = int(off)
o = offsets
dump = os.path.join(tmp, "symprog.dump")
with open(dump, "w") as f:
    f.write("P=(HEX ID=1 N=(symprog) T=0.000000)\n"
            "C1 FN0=(F0=(%s)+%x N=(main))+0\n" % (symprog, o["main"] + 4)
            + "C2 FN1=(F0+%x N=(gamma))+0 V0=(MEM_TOTAL):(1,7,7)\n" % (o["gamma"] + 1)
            + "C3 FN2=(F0+%x N=(beta))+0 V0:(1,b,b)\n" % (o["beta"] + 2)
            + "C4 FN3=(F0+%x N=(alpha))+0 V0:(2,d,d)\n" % (o["alpha"] + 1)
            + "C2 FN4=(F0+%x N=(x))+0 V0:(3,1e,1e)\n" % o["site_a"]
            + "C2 FN5=(F0+%x N=(x))+0 V0:(2,14,14)\n" % o["site_b"]
            + "C2 FN6=(F0+%x N=(x))+0 V0:(1,a,a)\n" % o["site_c"])
text = subprocess.run([analyse, "-g", "--lines", dump], capture_output=True, text=True, check=True).stdout
total = int(re.search(r"^\s+100.0\s+(\S+)\s+\S+\s+<spontaneous>", text, re.M).group(1).replace("'", ""))
cg = os.path.join(tmp, "symprog.callgrind")
run([analyse, "-g", "--lines", "--callgrind", cg, dump])
body = open(cg).read()
src_dir = os.path.dirname(os.path.abspath(__file__))
src, part = os.path.join(src_dir, "symprog.c"), os.path.join(src_dir, "symprog_part.inc")
# stitched's block, names uncompressed: ob, fl, fn, its three lines with
# fi= before the included file's and fe= after it.
names = {}
def name(kind, ref):
    m = re.match(r"\((\d+)\)(?: (.*))?$", ref)
    space = {"ob": "ob", "cob": "ob", "fn": "fn", "cfn": "fn"}.get(kind, "fl")
    if m.group(2) is not None:
        names[space, m.group(1)] = m.group(2)
    return names[space, m.group(1)]
block, inside = [], False
for line in body.splitlines():
    m = re.match(r"^(\w+)=(.*)$", line)
    if m and m.group(1) in ("ob", "fl", "fi", "fe", "fn", "cob", "cfi", "cfn"):
        shown = "%s=%s" % (m.group(1), name(m.group(1), m.group(2)))
        if m.group(1) == "ob":
            inside, pending = False, [shown]
        elif m.group(1) == "fl":
            pending.append(shown)
        elif m.group(1) == "fn":
            inside = shown == "fn=stitched"
            if inside:
                block = pending + [shown]
        elif inside:
            block.append(shown)
    elif inside and line:
        block.append(line)
def line_of(needle, path):
    return 1 + next(i for i, l in enumerate(open(path).read().splitlines()) if needle in l)
want = ["ob=" + symprog, "fl=" + src, "fn=stitched", "%d 30" % line_of("site_a = probe_ret", src),
        "fi=" + part, "%d 20" % line_of("site_b = probe_ret", part), "fe=" + src,
        "%d 10" % line_of("site_c = probe_ret", src)]
if block != want:
    fail.append("stitched's block in symprog.callgrind:\n  %s\nexpected\n  %s" % (block, want))
if re.search(r"^c?fn=.* at ", body, re.M):
    fail.append("a function name with ' at file:line' in symprog.callgrind")
self_ = run([annotate, cg])
incl = run([annotate, "--inclusive=yes", cg])
if totals(self_) != total or total != 0x7 + 0xb + 0xd + 0x1e + 0x14 + 0xa:
    fail.append("symprog: PROGRAM TOTALS %s, text report total %d" % (totals(self_), total))
obj = " [%s]" % symprog
want = {src + ":stitched" + obj: 40, part + ":stitched": 20, src + ":alpha" + obj: 13,
        src + ":beta" + obj: 11, src + ":_Z5gammai" + obj: 7}
if costs(self_) != want:
    fail.append("symprog self costs %s, expected %s" % (costs(self_), want))
want = {src + ":main" + obj: 91, "???:<spontaneous> [<dynamically generated>]": 91, src + ":stitched" + obj: 60,
        src + ":_Z5gammai" + obj: 31, src + ":beta" + obj: 24, part + ":stitched": 20, src + ":alpha" + obj: 13}
if costs(incl) != want:
    fail.append("symprog inclusive costs %s, expected %s" % (costs(incl), want))
# Annotated source: each cost on its own line of the right file.
def annotated(path, needle):
    m = re.search(r"-- Auto-annotated source: %s\n(.*?)(?:\n-----|\Z)" % re.escape(path), self_, re.S)
    line = m and re.search(r"^\s*([\d,]+) \([^)]*\)  .*%s" % re.escape(needle), m.group(1), re.M)
    return int(line.group(1)) if line else None
for path, needle, cost in ((src, "static int alpha(", 13), (src, "static int beta(", 11), (src, "int _Z5gammai(", 7),
                           (src, "site_a = probe_ret", 30), (src, "site_c = probe_ret", 10),
                           (part, "site_b = probe_ret", 20)):
    if annotated(path, needle) != cost:
        fail.append("annotated %s: line with %r has %s, expected %d" % (os.path.basename(path), needle,
                                                                         annotated(path, needle), cost))
subprocess.run(["rm", "-rf", tmp])
if fail:
    sys.exit("\n".join(fail))
print("ok")
