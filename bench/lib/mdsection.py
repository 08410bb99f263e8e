#!/usr/bin/env python3
"""Replace (or append) one dated section of docs/benchmarks.md.

usage: mdsection.py MD_FILE KEY [PARENT] < SECTION_TEXT
The section is wrapped in <!-- bench:KEY --> ... <!-- /bench:KEY --> markers. With PARENT,
a KEY section not yet in the file goes at the end of the PARENT section (inside it).
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
    parent = sys.argv[3] if len(sys.argv) > 3 else None
    body = sys.stdin.read().strip('\n')
    sec = '<!-- bench:%s -->\n%s\n<!-- /bench:%s -->\n' % (key, body, key)
    md = open(md_path).read() if os.path.exists(md_path) else HEADER
    pat = r'<!-- bench:%s -->.*?<!-- /bench:%s -->\n?' % (re.escape(key), re.escape(key))
    end = '<!-- /bench:%s -->' % parent if parent else None
    if re.search(pat, md, flags=re.S):
        md = re.sub(pat, lambda m: sec, md, flags=re.S)
    elif end and end in md:
        md = md.replace(end, sec + end, 1)
    else:
        md = md.rstrip('\n') + '\n\n' + sec
    open(md_path, 'w').write(md)

main()
