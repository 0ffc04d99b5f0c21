#!/usr/bin/env python3
"""tools/house.py [DIR]: the shape of the product's code, as figures.

Product code is pipeline/, receivers/, processors/ and exporters/ (.c, .h).
Prints: product lines; files over 1,000 lines; functions over 80 lines
(universal-ctags' end lines); the file call graph (file A -> file B when A
calls a non-static function B defines, found by name in A's text after
comments and strings are blanked) and its cycles (strongly connected sets
of more than one file) with the calls inside them; and the layer rule:
calls from the core (pipeline/, but not pipeline/cli/ or
pipeline/extensions/) into the command (pipeline/cli/) or into a
component, and the core's includes of the policy or the command."""
import os, re, subprocess, sys, json
from collections import defaultdict

root = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), '..'))
PARTS = ('pipeline/', 'receivers/', 'processors/', 'exporters/')

def product_files():
    out = subprocess.check_output(['git', '-C', root, 'ls-files', '*.c', '*.h'], text=True).split()
    return sorted(f for f in out if f.startswith(PARTS))

def blank(text):
    """comments and string/char literals replaced by spaces (newlines kept)"""
    pat = re.compile(r'//[^\n]*|/\*.*?\*/|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'', re.S)
    return pat.sub(lambda m: re.sub(r'[^\n]', ' ', m.group(0)), text)

def layer(f):
    if f.startswith(('pipeline/cli/', 'pipeline/policy/')): return 'cli'     # the command and its library
    if f.startswith('pipeline/extensions/'): return 'component'
    if f.startswith('pipeline/'): return 'core'
    return 'component'

files = product_files()
lines = {f: open(os.path.join(root, f), errors='replace').read().count('\n') for f in files}
tags = subprocess.check_output(['ctags', '-x', '--_xformat=%N\t%F\t%n\t%e\t%{C.properties}',
                                '--kinds-C=f', '--fields=+neS', '--language-force=C',
                                '-f', '-'] + [os.path.join(root, f) for f in files], text=True)
defs = {}
long_fns = []
nfns = 0
for row in tags.splitlines():
    name, path, start, end, props = (row.split('\t') + [''] * 5)[:5]
    rel = os.path.relpath(path, root)
    nfns += 1
    if end and int(end) - int(start) + 1 > 80:
        long_fns.append((int(end) - int(start) + 1, rel, name))
    if 'static' not in props and rel.endswith('.c'):
        defs.setdefault(name, rel)

edges = defaultdict(set)     # (a, b) -> names
for f in files:
    if not f.endswith('.c'): continue
    text = blank(open(os.path.join(root, f), errors='replace').read())
    for name in set(re.findall(r'\b([A-Za-z_]\w*)\s*\(', text)):
        d = defs.get(name)
        if d and d != f:
            edges[(f, d)].add(name)

# strongly connected components (Tarjan)
graph = defaultdict(set)
for a, b in edges: graph[a].add(b)
index, low, stack, on, sccs, counter = {}, {}, [], set(), [], [0]
sys.setrecursionlimit(10000)
def visit(v):
    index[v] = low[v] = counter[0]; counter[0] += 1
    stack.append(v); on.add(v)
    for w in graph[v]:
        if w not in index:
            visit(w); low[v] = min(low[v], low[w])
        elif w in on:
            low[v] = min(low[v], index[w])
    if low[v] == index[v]:
        comp = []
        while True:
            w = stack.pop(); on.discard(w); comp.append(w)
            if w == v: break
        if len(comp) > 1: sccs.append(sorted(comp))
for v in list(graph):
    if v not in index: visit(v)

upward = sorted((a, b, sorted(n)) for (a, b), n in edges.items()
                if layer(a) == 'core' and layer(b) in ('cli', 'component'))
bad_includes = []
for f in files:
    if layer(f) != 'core': continue
    for m in re.finditer(r'#\s*include\s*"([^"]+)"', open(os.path.join(root, f)).read()):
        inc = m.group(1)
        if 'sf_policy' in inc or inc.startswith('cli/'):
            bad_includes.append((f, inc))

print(f'product: {len(files)} files, {sum(lines.values())} lines, {nfns} functions')
big = sorted(((n, f) for f, n in lines.items() if n > 1000), reverse=True)
print(f'files over 1,000 lines: {len(big)}')
for n, f in big: print(f'  {n:6d} {f}')
print(f'functions over 80 lines: {len(long_fns)} ({100.0 * len(long_fns) / max(nfns, 1):.1f} %)')
for n, f, name in sorted(long_fns, reverse=True)[:int(os.environ.get('SF_HOUSE_TOP', '10'))]:
    print(f'  {n:6d} {f} {name}')
print(f'file call graph: {len(edges)} edges; cycles: {len(sccs)}')
for c in sccs:
    inside = sum(len(n) for (a, b), n in edges.items() if a in c and b in c)
    print(f'  {len(c)} files, {inside} called names inside: ' + ' '.join(c))
print(f'core -> command or component calls: {len(upward)}')
for a, b, n in upward: print(f'  {a} -> {b}: {", ".join(n)}')
print(f'core files including the policy or the command: {len(bad_includes)}')
for f, inc in bad_includes: print(f'  {f}: "{inc}"')
