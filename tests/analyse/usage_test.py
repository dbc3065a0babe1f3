#!/usr/bin/env python3
"""Bad command lines and unwritable outputs: exit 1, nothing on stdout, and a
message that names the problem (first line of stderr)."""
import os, subprocess, sys

analyse, data = sys.argv[1], sys.argv[2]
mem = os.path.join(data, "mem.dump")
cases = [
    ([], "igprof-analyse: no input files"),
    (["-r"], "igprof-analyse: option -r needs an argument"),
    (["-r", "A", "-r", "B", mem], "igprof-analyse: -r: only one counter can be reported"),
    (["-r", "MEM_TOTAL,MEM_LIVE", mem], "igprof-analyse: -r: only one counter can be reported, got 'MEM_TOTAL,MEM_LIVE'"),
    (["-o", "sideways", mem], "igprof-analyse: --order expects 'ascending' or 'descending', got 'sideways'"),
    (["--value", "max", mem], "igprof-analyse: --value expects 'normal' or 'peak', got 'max'"),
    (["-tn", "0", mem], "igprof-analyse: -tn expects a positive count"),
    (["-Mc", "12x", mem], "igprof-analyse: -Mc expects an integer"),
    (["-mr", "s/a", mem], "igprof-analyse: -mr: missing separator '/' after the regular expression in 's/a'"),
    (["-mr", "s/(/x/", mem], "igprof-analyse: -mr: bad regular expression '(' at offset 1: missing closing parenthesis"),
    (["-ma", "nope", mem], "igprof-analyse: -ma: expected 'REGEXP1>REGEXP2>...>REGEXPn/NEWNAME', got 'nope'"),
    (["-D", mem], "igprof-analyse: -D/--diff-mode needs -b/--baseline FILE"),
    (["--lines", mem], "igprof-analyse: --lines needs -g"),
    (["-x", mem], "igprof-analyse: unknown option -x"),
    (["--show-pages", mem], "igprof-analyse: option --show-pages is not supported"),
    (["--sqlite", "/nonexistent/dir/x.sql3", mem],
     "igprof-analyse: /nonexistent/dir/x.sql3: cannot open the database: unable to open database file"),
    (["-C", "/nonexistent/x.cg", mem], "igprof-analyse: /nonexistent/x.cg: cannot write: No such file or directory"),
]
fail = []
for args, want in cases:
    r = subprocess.run([analyse, *args], capture_output=True, text=True)
    first = r.stderr.splitlines()[0] if r.stderr else ""
    if r.returncode != 1 or r.stdout or first != want:
        fail.append("%s: rc=%d stdout=%r stderr=%r" % (args, r.returncode, r.stdout[:40], r.stderr))
r = subprocess.run([analyse, "--help"], capture_output=True, text=True)
if r.returncode != 0 or not r.stdout.startswith("usage: igprof-analyse"):
    fail.append("--help: rc=%d %r" % (r.returncode, r.stdout[:40]))
if fail:
    sys.exit("\n".join(fail))
print("ok: %d cases" % len(cases))
