#!/usr/bin/env python3
# Rule 4 of scripts/check-lib.sh: a library function that no other production object calls
# is static, or is declared with TEST_HOOK (common/test_hook.h) because tests/unit call it;
# and a TEST_HOOK function really has no production caller outside its own file.
# usage: check_hooks.py BUILD LIBDIR... -- PRODDIR...   prints offenders, exits 1 if any.
import os
import re
import subprocess
import sys


def nm(obj, *flags):
    out = subprocess.run(['nm', *flags, obj], capture_output=True, text=True, check=True).stdout
    return [line.split() for line in out.splitlines() if line.strip()]


def objects(build, dirs):
    for d in dirs:
        for root, _, files in os.walk(os.path.join(build, 'obj', d)):
            for f in sorted(files):
                if not f.endswith('.o'):
                    continue
                obj = os.path.join(root, f)
                rel = os.path.relpath(obj, os.path.join(build, 'obj'))[:-2]
                if os.path.exists(rel + '.c') or os.path.exists(rel + '.S'):
                    yield rel, obj


def hooks(dirs):
    """name -> header:line of every declaration marked TEST_HOOK."""
    marked = {}
    for d in dirs:
        for root, _, files in os.walk(d):
            for f in files:
                if not f.endswith('.h'):
                    continue
                path = os.path.join(root, f)
                lines = open(path, encoding='utf-8').read().split('\n')
                for i, line in enumerate(lines):
                    if line.strip() != 'TEST_HOOK' or i + 1 >= len(lines):
                        continue
                    m = re.search(r'([A-Za-z_][A-Za-z0-9_]*)\s*\(', lines[i + 1])
                    if m:
                        marked[m.group(1)] = '%s:%d' % (path, i + 1)
    return marked


def main():
    build = sys.argv[1]
    sep = sys.argv.index('--')
    lib_dirs, prod_dirs = sys.argv[2:sep], sys.argv[sep + 1:]
    defined = {}
    for rel, obj in objects(build, lib_dirs):
        for parts in nm(obj, '--defined-only'):
            if len(parts) == 3 and parts[1] == 'T':
                defined[parts[2]] = rel
    called = set()
    for _, obj in objects(build, prod_dirs):
        for parts in nm(obj, '-u'):
            called.add(parts[-1])
    marked = hooks(lib_dirs)
    bad = 0
    for name, rel in sorted(defined.items(), key=lambda kv: (kv[1], kv[0])):
        if name not in called and name not in marked:
            print('check-lib: %s.c: %s() has no caller outside its file: make it static, or '
                  'mark its declaration TEST_HOOK if tests/unit call it' % (rel, name))
            bad = 1
    for name, where in sorted(marked.items()):
        if name in called:
            print('check-lib: %s: %s() is marked TEST_HOOK but production code calls it: '
                  'drop the mark' % (where, name))
            bad = 1
        elif name not in defined:
            print('check-lib: %s: %s() is marked TEST_HOOK but not defined in the library'
                  % (where, name))
            bad = 1
    return bad


if __name__ == '__main__':
    sys.exit(main())
