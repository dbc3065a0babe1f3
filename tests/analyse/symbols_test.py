#!/usr/bin/env python3
"""-g resolution: build a dump whose call sites point into symprog's own
(partly static) functions, by offset from the load base, and check the names
igprof-analyse finds in the ELF file, with and without -g/-d/--lines."""
import subprocess, sys, tempfile, os

analyse, prog = sys.argv[1], sys.argv[2]
offsets = {}
for line in subprocess.run([prog], capture_output=True, text=True).stdout.splitlines():
    name, off, _ = line.split()
    offsets[name] = int(off)

def dump(lines):
    f = tempfile.NamedTemporaryFile("w", suffix=".dump", delete=False)
    f.write("P=(HEX ID=1 N=(symprog) T=0.000000)\n" + "".join(l + "\n" for l in lines))
    f.close()
    return f.name

# main -> gamma -> beta -> alpha; call sites a few bytes into each function;
# one site at offset 0x10 (inside the ELF header: no symbol covers it).
o = offsets
path = dump([
    "C1 FN0=(F0=(%s)+%x N=(@?0x%x))+0" % (prog, o["main"] + 4, o["main"] + 4),
    "C2 FN1=(F0+%x N=(@?0x%x))+0 V0=(MEM_TOTAL):(1,7,7)" % (o["gamma"] + 1, o["gamma"] + 1),
    "C3 FN2=(F0+%x N=(@?0x%x))+0 V0:(1,b,b)" % (o["beta"] + 2, o["beta"] + 2),
    "C4 FN3=(F0+%x N=(@?0x%x))+0 V0:(2,d,d)" % (o["alpha"] + 1, o["alpha"] + 1),
    "C2 FN4=(F0+10 N=(@?0x10))+0 V0:(1,5,5)",
])

def flame(*args):
    r = subprocess.run([analyse, *args, "--flame", path], capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit("igprof-analyse failed: " + r.stderr)
    return sorted(r.stdout.splitlines())

base = os.path.basename(prog)
failures = []
def check(args, expected):
    got = flame(*args)
    if got != sorted(expected):
        failures.append("%s:\n  expected %s\n  got      %s" % (" ".join(args), sorted(expected), got))

check(["-g"], ["main;_Z5gammai 7",
               "main;_Z5gammai;beta 11",
               "main;_Z5gammai;beta;alpha 13",
               "main;%s+0x10 5" % base])
check(["-g", "-d"], ["main;gamma(int) 7",
                     "main;gamma(int);beta 11",
                     "main;gamma(int);beta;alpha 13",
                     "main;%s+0x10 5" % base])
# Without -g: IgProf's naming of unresolved call sites, decimal offset.
check([], ["@{%s+%d};@{%s+%d} 7" % (base, o["main"] + 4, base, o["gamma"] + 1),
           "@{%s+%d};@{%s+%d};@{%s+%d} 11" % (base, o["main"] + 4, base, o["gamma"] + 1, base, o["beta"] + 2),
           "@{%s+%d};@{%s+%d};@{%s+%d};@{%s+%d} 13" % (base, o["main"] + 4, base, o["gamma"] + 1, base, o["beta"] + 2, base, o["alpha"] + 1),
           "@{%s+%d};@{%s+16} 5" % (base, o["main"] + 4, base)])
# --lines: every resolved frame carries its source file and line.
got = flame("-g", "--lines")
names = [f for l in got for f in l.rsplit(" ", 1)[0].split(";")]
for fn in ("main", "_Z5gammai", "beta", "alpha"):
    if not any(n.startswith(fn + " at symprog.c:") for n in names):
        failures.append("--lines: no '%s at symprog.c:N' frame in %s" % (fn, got))
alpha_line = [n for n in names if n.startswith("alpha at ")]
src = open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "symprog.c")).read().splitlines()
want = 1 + next(i for i, l in enumerate(src) if "static int alpha(" in l)
if alpha_line and alpha_line[0] != "alpha at symprog.c:%d" % want:
    failures.append("--lines: expected alpha at symprog.c:%d, got %s" % (want, alpha_line[0]))
# Stripped binary with its symbols in a separate file found by .gnu_debuglink.
d = tempfile.mkdtemp()
stripped, debug = os.path.join(d, base), os.path.join(d, base + ".debug")
subprocess.run(["objcopy", "--only-keep-debug", prog, debug], check=True)
subprocess.run(["objcopy", "--strip-all", "--add-gnu-debuglink=" + debug, prog, stripped], check=True)
with open(path) as f:
    text = f.read().replace(prog, stripped)
with open(path, "w") as f:
    f.write(text)
check(["-g"], ["main;_Z5gammai 7", "main;_Z5gammai;beta 11", "main;_Z5gammai;beta;alpha 13",
               "main;%s+0x10 5" % base])
os.unlink(stripped); os.unlink(debug); os.rmdir(d)
# --sysroot: a dump made on another machine names the target's paths; the
# ELF file is read under the sysroot, and a stripped one's debug file is
# found by build-id under the sysroot's /usr/lib/debug.
d = tempfile.mkdtemp()
target_path = "/igprof-sysroot-test/usr/bin/" + base
in_root = os.path.join(d, target_path.lstrip("/"))
os.makedirs(os.path.dirname(in_root))
subprocess.run(["cp", prog, in_root], check=True)
with open(path) as f:
    text = f.read().replace(stripped, target_path)
with open(path, "w") as f:
    f.write(text)
resolved = ["main;_Z5gammai 7", "main;_Z5gammai;beta 11", "main;_Z5gammai;beta;alpha 13",
            "main;%s+0x10 5" % base]
check(["-g", "--sysroot", d], resolved)
got = flame("-g")
if got == sorted(resolved):
    failures.append("-g without --sysroot resolved %s, which does not exist here" % target_path)
notes = subprocess.run(["readelf", "-n", prog], capture_output=True, text=True).stdout
build_id = next((l.split()[-1] for l in notes.splitlines() if "Build ID:" in l), None)
if build_id is None:
    failures.append("symprog has no build-id note")
else:
    debug = os.path.join(d, "usr/lib/debug/.build-id", build_id[:2], build_id[2:] + ".debug")
    os.makedirs(os.path.dirname(debug))
    subprocess.run(["objcopy", "--only-keep-debug", prog, debug], check=True)
    subprocess.run(["objcopy", "--strip-all", prog, in_root], check=True)
    check(["-g", "--sysroot", d], resolved)
for args, err in ((["--sysroot", d], "--sysroot needs -g"),
                  (["-g", "--sysroot", os.path.join(d, "none")], "not a directory")):
    r = subprocess.run([analyse, *args, path], capture_output=True, text=True)
    if r.returncode == 0 or err not in r.stderr:
        failures.append("%s: expected a usage error with %r, got %d %r" % (args, err, r.returncode, r.stderr))
subprocess.run(["rm", "-rf", d], check=True)
# --lines expands the call inside inlined code into outer2 > inl, each with the
# line of its own call.
inl_line = 1 + next(i for i, l in enumerate(src) if "void inl(void)" in l)
outer_line = 1 + next(i for i, l in enumerate(src) if "static void outer2(void)" in l)
inl_dump = dump(["C1 FN0=(F0=(%s)+%x N=(@?0x1))+0 V0=(MEM_TOTAL):(1,3,3)" % (prog, o["inlined_site"])])
r = subprocess.run([analyse, "-g", "--lines", "--flame", inl_dump], capture_output=True, text=True)
want = "outer2 at symprog.c:%d;inl at symprog.c:%d 3" % (outer_line, inl_line)
if r.stdout.strip() != want:
    failures.append("inline frames: expected %r, got %r %s" % (want, r.stdout.strip(), r.stderr))
os.unlink(inl_dump)
os.unlink(path)
if failures:
    sys.exit("\n".join(failures))
print("ok")
