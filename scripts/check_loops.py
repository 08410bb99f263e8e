#!/usr/bin/env python3
# Rule 6 of scripts/check-lib.sh: no two files of the production code call each other,
# directly or around a loop. A file calls another when its object refers to a function or
# variable the other's object defines (nm: undefined there, defined here); the loops are
# the strongly connected components of that graph with more than one file.
# usage: check_loops.py BUILD DIR...   prints each loop, exits 1 if there is one.
import os
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


def main():
    build, dirs = sys.argv[1], sys.argv[2:]
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
