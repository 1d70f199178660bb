#!/usr/bin/env python3
"""Checks every #include in core/<folder>/ (subfolders too) against the
allowed edges in layers.txt, and that those edges form a DAG.
  check.py [CORE_DIR [LAYERS]]   exit 0: clean; 1: a violation or an error
Includes are resolved as the compiler does (the file's folder, then -I core
and -I core/netstack); whatever resolves outside core/ (system, lwIP,
include/chute) is no edge between folders."""
import os, re, sys

here = os.path.dirname(os.path.abspath(__file__))
core = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(here, '../../core'))
path = sys.argv[2] if len(sys.argv) > 2 else os.path.join(here, 'layers.txt')
layers = os.path.relpath(path, os.path.dirname(core))  # as messages name it
errors, deps = [], {}
for n, line in enumerate(open(path), 1):
    name, sep, rest = line.split('#')[0].partition(':')
    if not (name + sep).strip():
        continue
    name = name.strip()
    if not sep or not re.fullmatch(r'[a-z0-9_]+(/[\w./-]+\.h)?', name) or name in deps:
        errors.append(f'{layers}:{n}: expected "folder: deps..." once per folder: {line.strip()}')
    else:
        deps[name] = rest.split()
for name, ds in deps.items():
    errors += [f'{layers}: {name}: "{d}" has no line of its own' for d in ds if d not in deps]
    if '/' in name and name.split('/')[0] not in deps:
        errors.append(f'{layers}: {name}: its folder has no line')
# A folder's files may include its own single-header nodes: an edge too.
graph = {a: [d for d in ds if d in deps] + [h for h in deps if h.startswith(a + '/')]
         for a, ds in deps.items()}
state = {}
def visit(a, path):
    state[a] = 'open'
    for d in graph[a]:
        if state.get(d) == 'open':
            cycle = ' -> '.join(path[path.index(d):] + [d])
            errors.append(f'{layers}: the allowed edges are not a DAG: {cycle}')
        elif d not in state:
            visit(d, path + [d])
    state[a] = 'done'
for a in graph:
    if a not in state:
        visit(a, [a])
def below(a, seen):
    for d in graph[a]:
        if d not in seen:
            seen.add(d)
            below(d, seen)
    return seen

def resolve(quoted, name, folder):
    for base in ([folder] if quoted else []) + [core, os.path.join(core, 'netstack')]:
        p = os.path.normpath(os.path.join(base, name))
        if os.path.isfile(p) and p.startswith(core + os.sep):
            return os.path.relpath(p, core)
    return None

include = re.compile(r'\s*#\s*include\s*([<"])([^>"]+)[>"]')
bad, nfiles, nedges = {}, 0, 0
for top in sorted(os.listdir(core)):
    if not os.path.isdir(os.path.join(core, top)):
        errors.append(f'core/{top}: outside every folder: move it into one')
    elif top not in deps:
        errors.append(f'core/{top}/: no line in {layers}: add one, with its place in the DAG')
    else:
        for folder, _, files in sorted(os.walk(os.path.join(core, top))):
            for f in sorted(x for x in files if x.endswith(('.c', '.h'))):
                rel, nfiles = os.path.relpath(os.path.join(folder, f), core), nfiles + 1
                src = rel if rel in deps else top
                for n, line in enumerate(open(os.path.join(folder, f), errors='replace'), 1):
                    m = include.match(line)
                    t = m and resolve(m[1] == '"', m[2], folder)
                    if not t or (src == top and t.split('/')[0] == top):
                        continue
                    dst = t if t in deps else t.split('/')[0]
                    nedges += 1
                    if t in deps[src] or t.split('/')[0] in deps[src]:
                        continue
                    bad.setdefault(f'{src} -> {dst}', []).append(f'core/{rel}')
                    why = (f'goes up ({dst} is above {src}): move what {src} needs down, or inject it'
                           if dst in graph and src in below(dst, set()) else
                           f'is no edge: {src} may include {" ".join(deps[src]) or "nothing else"}'
                           f'; use those, or add the edge to layers.txt if the design says so')
                    print(f'core/{rel}:{n}: {src} -> {dst} ("{m[2]}") {why}')
missing = [a for a in deps if not os.path.exists(os.path.join(core, a))]
print(f'layering: {nfiles} files, {nedges} includes between folders'
      + (f'; in {layers} but not in core/ yet: {" ".join(missing)}' if missing else ''))
for e in errors:
    print(e)
if bad:
    print(f'layering: {sum(map(len, bad.values()))} includes break {layers}, on {len(bad)} edges:')
    for edge, sites in sorted(bad.items()):
        print(f'  {edge:24} {len(sites):3}  {" ".join(sorted(set(sites)))}')
sys.exit(1 if errors or bad else 0)
