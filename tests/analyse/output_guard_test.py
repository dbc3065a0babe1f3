#!/usr/bin/env python3
"""igprof-analyse never writes a report over one of its inputs: -C FILE,
--sqlite FILE, --pprof FILE and standard output are compared with every input (and -b's
baseline) by device and inode, so the same name, another path, a symlink or a
hard link are all refused with exit 1 and the dump is left byte for byte as it
was. A fresh output file, or one that is not an input, is written normally.

  output_guard_test.py ANALYSE DUMP
"""
import os, shutil, subprocess, sys, tempfile

analyse, source = (os.path.abspath(a) for a in sys.argv[1:3])
d = tempfile.mkdtemp(prefix="igprof-guard-")
dump = os.path.join(d, "prof.dump")
shutil.copy(source, dump)
original = open(dump, "rb").read()
os.symlink("prof.dump", os.path.join(d, "link.dump"))
os.link(dump, os.path.join(d, "hard.dump"))
os.link(dump, os.path.join(d, "hard.sql3"))
fail = []


def check(args, message, stdin=None, stdout=None):
    """Expect exit 1, exactly `message` on stderr, nothing written, dump intact."""
    p = subprocess.run([analyse, *args], cwd=d, stdin=stdin, stdout=stdout or subprocess.PIPE, stderr=subprocess.PIPE)
    err = p.stderr.decode()
    if p.returncode != 1 or err != message + "\n" or (stdout is None and p.stdout):
        fail.append("%s: exit %d, stderr %r, stdout %d bytes; expected %r" % (args, p.returncode, err, len(p.stdout or b""), message))
    if open(dump, "rb").read() != original:
        fail.append("%s: the dump changed" % (args,))
        open(dump, "wb").write(original)


refuse = "igprof-analyse: %s: the output file is the input '%s'; refusing to overwrite it"
check(["-C", "prof.dump", "prof.dump"], refuse % ("prof.dump", "prof.dump"))
check(["-C", "./prof.dump", "prof.dump"], refuse % ("./prof.dump", "prof.dump"))
check(["-C", "link.dump", "prof.dump"], refuse % ("link.dump", "prof.dump"))          # symlink to the input
check(["-C", "hard.dump", "link.dump"], refuse % ("hard.dump", "link.dump"))          # hard link, input via symlink
check(["-C", os.path.join(d, "prof.dump"), "link.dump"], refuse % (os.path.join(d, "prof.dump"), "link.dump"))
check(["--sqlite", "hard.sql3", "prof.dump"], refuse % ("hard.sql3", "prof.dump"))   # an input named like a database
check(["--pprof", "link.dump", "hard.dump"], refuse % ("link.dump", "hard.dump"))
with open(dump, "ab") as out:
    check(["--pprof", "-", "prof.dump"], "igprof-analyse: standard output is the input 'prof.dump'; refusing to write the report into it",
          stdout=out)
check(["-b", "prof.dump", "-C", "hard.dump", source], refuse % ("hard.dump", "prof.dump"))   # the baseline counts
check(["-C", "prof.dump", "-"], refuse % ("prof.dump", "<stdin>"), stdin=open(dump, "rb"))
# Standard output appended to the input (a shell's >> or a dup of the file).
with open(dump, "ab") as out:
    check(["prof.dump"], "igprof-analyse: standard output is the input 'prof.dump'; refusing to write the report into it",
          stdout=out)
with open(os.path.join(d, "link.dump"), "ab") as out:
    check(["--flame", "hard.dump"], "igprof-analyse: standard output is the input 'hard.dump'; refusing to write the report into it",
          stdout=out)
with open(dump, "ab") as out:
    check(["-C", "-", "-"], "igprof-analyse: standard output is the input '<stdin>'; refusing to write the report into it",
          stdin=open(dump, "rb"), stdout=out)

# Outputs that are not inputs are written: a new file, and an existing other file.
for args in (["-C", "new.callgrind", "prof.dump"], ["-C", "new.callgrind", "prof.dump"], ["--sqlite", "new.sql3", "link.dump"],
             ["--pprof", "new.pb.gz", "prof.dump"]):
    p = subprocess.run([analyse, *args], cwd=d, capture_output=True)
    if p.returncode != 0 or p.stderr or os.path.getsize(os.path.join(d, args[1])) == 0:
        fail.append("%s: exit %d, %r" % (args, p.returncode, p.stderr))
if open(dump, "rb").read() != original:
    fail.append("the dump changed")
shutil.rmtree(d)
if fail:
    sys.exit("\n".join(fail))
print("ok")
