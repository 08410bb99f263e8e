#!/usr/bin/env python3
# Rule 6 of scripts/check-lib.sh: no two files of the production code call each other,
# directly or around a loop. A file calls another when its object refers to a function or
# variable the other's object defines (nm: undefined there, defined here); the loops are
# the strongly connected components of that graph with more than one file. A call through an
# operations table is a call too: `--dispatch=FILE:TYPE` says FILE calls every file that
# defines a `struct TYPE` table (`const struct TYPE name = {`), which nm cannot see.
# usage: check_loops.py [--dispatch=FILE:TYPE]... BUILD DIR...
#        prints each loop, exits 1 if there is one.
import os
import re
import sys

from check_hooks import nm, objects


def components(graph):
    """Tarjan's strongly connected components, iteratively."""
    index, low, on, stack, out, n = {}, {}, set(), [], [], 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = n
        n += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = n
                    n += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                out.append(sorted(comp))
    return out


def tables(srcs, types):
    """{type: [source files defining a `const struct TYPE name = {` table]}"""
    out = {t: [] for t in types}
    pat = re.compile(r'^\s*(?:static\s+)?const\s+struct\s+(\w+)\s+\w+\s*=\s*\{', re.M)
    for src in srcs:
        with open(src, encoding='utf-8') as fh:
            for m in pat.finditer(fh.read()):
                if m.group(1) in out:
                    out[m.group(1)].append(src)
    return out


def main():
    args, dispatch = sys.argv[1:], []
    while args and args[0].startswith('--dispatch='):
        caller, _, typ = args[0][len('--dispatch='):].partition(':')
        dispatch.append((caller, typ))
        args = args[1:]
    build, dirs = args[0], args[1:]
    objs = {rel + '.c': obj for rel, obj in objects(build, dirs) if os.path.exists(rel + '.c')}
    owner = {}
    for src, obj in objs.items():
        for f in nm(obj, '--defined-only', '-g'):
            if len(f) >= 3:
                owner[f[2]] = src
    graph, why = {s: set() for s in objs}, {}
    for src, obj in objs.items():
        for f in nm(obj, '-u'):
            dst = owner.get(f[-1])
            if dst and dst != src:
                graph[src].add(dst)
                why.setdefault((src, dst), []).append(f[-1])
    impl = tables(sorted(objs), {t for _, t in dispatch})
    for caller, typ in dispatch:
        if caller not in graph:
            print(f"check-lib: --dispatch {caller}:{typ}: no such file built")
            return 1
        for dst in impl[typ]:
            if dst != caller:
                graph[caller].add(dst)
                why.setdefault((caller, dst), []).append(f'(struct {typ})')
    bad = 0
    for comp in components(graph):
        if len(comp) < 2:
            continue
        bad = 1
        print(f"check-lib: these files call each other around a loop: {', '.join(comp)}")
        members = set(comp)
        for a in comp:
            for b in sorted(graph[a] & members):
                print(f"check-lib:   {a} -> {b}: {', '.join(sorted(why[(a, b)])[:6])}")
    return bad


if __name__ == '__main__':
    sys.exit(main())
