#!/usr/bin/env python3
"""A dump cut short by SIGKILL stays as the writer's hidden temporary file
".igprof-tmp.<pid>.<n>" (src/profiler/dump.c). Given as an input, it is named
for what it is: skipped with a one-line warning among other inputs (the report
is exactly that of the complete dumps), an error (exit 1, nothing on stdout)
when it is the only input, when every input is one, or as the baseline. Names
that only resemble it are read as dumps."""
import os, shutil, subprocess, sys, tempfile

analyse, mem = os.path.abspath(sys.argv[1]), sys.argv[2]
d = tempfile.mkdtemp()
fail = []
data = open(mem, "rb").read()
real = os.path.join(d, "igprof.prog.77")
shutil.copy(mem, real)
tmp0, tmp1 = os.path.join(d, ".igprof-tmp.77.0"), os.path.join(d, ".igprof-tmp.77.1")
with open(tmp0, "wb") as f:
    f.write(data[:len(data) // 2 + 3])          # cut in the middle of a line, as a killed writer leaves it
with open(tmp1, "wb") as f:
    f.write(data[:7])
UNFINISHED = "an unfinished temporary dump (the profiled process was killed while writing it)"


def run(args, cwd=None):
    r = subprocess.run([analyse, *args], capture_output=True, text=True, cwd=cwd)
    return r.returncode, r.stdout, r.stderr


def expect(args, want, cwd=None):
    got = run(args, cwd)
    if got != want:
        fail.append("%s:\n  got  %r\n  want %r" % (args, (got[0], got[1][:60], got[2]), (want[0], want[1][:60], want[2])))


reference = run([real])
if reference[0] != 0 or "main" not in reference[1] or reference[2]:
    sys.exit("the complete dump alone: %r" % (reference,))
alone_tree = run(["--tree", real])

# Alone: an error, whatever the report.
for args in ([tmp0], ["--tree", tmp0], ["--sqlite", "-", tmp0]):
    expect(args, (1, "", "igprof-analyse: %s: %s; no complete dump to read\n" % (tmp0, UNFINISHED)))
# Relative name, as a glob in the dump's directory gives it.
expect([".igprof-tmp.77.0"], (1, "", "igprof-analyse: .igprof-tmp.77.0: %s; no complete dump to read\n" % UNFINISHED), cwd=d)
# Every input unfinished.
expect([tmp0, tmp1], (1, "", "igprof-analyse: all 2 inputs are unfinished temporary dumps (the profiled process was "
                            "killed while writing them), such as %s; no complete dump to read\n" % tmp0))
# As the baseline.
expect(["-b", tmp0, real], (1, "", "igprof-analyse: %s: %s; not usable as the baseline\n" % (tmp0, UNFINISHED)))
# Among complete dumps (before, after, both): skipped, one warning each, the
# report byte for byte that of the complete dump alone.
warn0 = "igprof-analyse: warning: %s: %s; skipped\n" % (tmp0, UNFINISHED)
warn1 = "igprof-analyse: warning: %s: %s; skipped\n" % (tmp1, UNFINISHED)
expect([tmp0, real], (0, reference[1], warn0))
expect([real, tmp1], (0, reference[1], warn1))
expect([tmp0, real, tmp1], (0, reference[1], warn0 + warn1))
expect(["--tree", tmp1, real], (0, alone_tree[1], warn1))
expect([".igprof-tmp.77.0", "igprof.prog.77"], (0, reference[1], warn0.replace(tmp0, ".igprof-tmp.77.0")), cwd=d)

# Look-alikes are ordinary inputs: read as dumps (here complete copies).
for name in ("x.igprof-tmp.77.0", ".igprof-tmp.77", ".igprof-tmp.77.0.gz", ".igprof-tmp.a.0", ".igprof-tmp.77.0x"):
    path = os.path.join(d, name)
    shutil.copy(mem, path)
    expect([path], reference)
    os.unlink(path)

shutil.rmtree(d)
if fail:
    sys.exit("\n".join(fail))
print("ok")
