#!/usr/bin/env python3
"""tools/check_enums.py ROOT: no component declares an enum that mirrors
one of the core's. A component that needs the core's contexts, signals or
rule kinds uses the core's types (pipeline/*.h); a copy held equal by
static asserts and casts is a second language for the same words, and
drifts. An enum mirrors a core enum when, once each enumerator loses its
enum's common prefix (and *_COUNT / *_NONE sentinels are set aside), at
least three names and three quarters of the smaller enum's are the other's.
Headers only: an enum in a header is vocabulary other files speak; a
parser's own tokens (transform_config.c's OTTL function names) are not. Prints each mirror and exits 1 if there is any."""
import os
import re
import sys

ENUM = re.compile(r'\benum\s+(\w+)?\s*\{([^}]*)\}', re.S)
COMMENT = re.compile(r'/\*.*?\*/|//[^\n]*', re.S)


def enums(path):
    with open(path, encoding='utf-8', errors='replace') as f:
        text = COMMENT.sub('', f.read())
    for m in ENUM.finditer(text):
        names = [e.split('=')[0].strip() for e in m.group(2).split(',')]
        names = [n for n in names if n]
        if len(names) < 3:
            continue
        prefix = os.path.commonprefix(names)
        prefix = prefix[:prefix.rfind('_') + 1] if '_' in prefix else ''
        words = {n[len(prefix):] for n in names}
        words = {w for w in words if not w.endswith('COUNT') and not w.endswith('NONE')}
        yield m.group(1) or '(anonymous)', words


def headers(root, dirs):
    for d in dirs:
        for base, _, files in os.walk(os.path.join(root, d)):
            for f in sorted(files):
                if f.endswith('.h'):
                    yield os.path.join(base, f)


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else '.'
    core = []
    for base in ('pipeline', 'pipeline/internal'):
        d = os.path.join(root, base)
        for f in sorted(os.listdir(d)):
            if f.endswith('.h'):
                core += [(os.path.join(base, f), n, w) for n, w in enums(os.path.join(d, f))]
    found = 0
    seen = set()
    comps = ('receivers', 'processors', 'exporters', 'pipeline/extensions')
    for path in headers(root, comps):
        for name, words in enums(path):
            for cpath, cname, cwords in core:
                common = len(words & cwords)
                if common >= 3 and 4 * common >= 3 * min(len(words), len(cwords)) \
                        and (path, name, cname) not in seen:
                    seen.add((path, name, cname))
                    print('%s: enum %s mirrors %s in %s' % (os.path.relpath(path, root), name,
                                                           cname, cpath))
                    found += 1
    if found:
        print('check_enums: a component mirrors a core enum; use the core\'s type '
              '(pipeline/README.md, Layout)', file=sys.stderr)
        return 1
    print('check_enums: no component mirrors a core enum')
    return 0


if __name__ == '__main__':
    sys.exit(main())
