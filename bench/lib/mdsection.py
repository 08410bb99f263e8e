#!/usr/bin/env python3
"""Replace (or append) one dated section of docs/benchmarks.md.

usage: mdsection.py MD_FILE KEY < SECTION_TEXT
The section is wrapped in <!-- bench:KEY --> ... <!-- /bench:KEY --> markers.
"""
import os, re, sys

HEADER = """# Benchmarks

Produced by `make bench` (or the scripts under `bench/` one by one); see the header of
each script for the exact method.  Every run replaces its own dated section here and
writes machine-readable results to `build/bench/*.json`.  Numbers depend on the machine
and are not checked by any test.
"""

def main():
    md_path, key = sys.argv[1], sys.argv[2]
    body = sys.stdin.read().strip('\n')
    sec = '<!-- bench:%s -->\n%s\n<!-- /bench:%s -->\n' % (key, body, key)
    md = open(md_path).read() if os.path.exists(md_path) else HEADER
    pat = r'<!-- bench:%s -->.*?<!-- /bench:%s -->\n?' % (re.escape(key), re.escape(key))
    if re.search(pat, md, flags=re.S):
        md = re.sub(pat, lambda m: sec, md, flags=re.S)
    else:
        md = md.rstrip('\n') + '\n\n' + sec
    open(md_path, 'w').write(md)

main()
