#!/usr/bin/env python3
"""--json is valid JSON even when names hold bytes that are not UTF-8 (they
become U+FFFD) or quotes; values survive."""
import json, subprocess, sys
out = subprocess.run([sys.argv[1], "--json", sys.argv[2]], capture_output=True, check=True).stdout
j = json.loads(out.decode("utf-8"))
want = ["<spontaneous>", 'ok_\u00e9_"q"', "bad\ufffd\ufffdutf"]
if j["symbols"] != want or j["summary"]["total_counts"] != 5 or [r[3] for r in j["mainrows"]] != [0, 3, 2]:
    sys.exit("unexpected: %s %s" % (j["symbols"], j["mainrows"]))
print("ok")
