#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
#
# Every @name in the kernel-doc of a uAPI struct (its block comment and its
# members' comments) names a member of that struct. scripts/kernel-doc checks
# that every member is documented, not that the prose names real members:
# a comment promising EINVAL for a nonzero "@pad" the struct does not have
# passes it (issue 11 item 8).
#
# usage: uapi-doc-refs.py HEADER
# Prints one line per stray reference; exits 1 if there is any.
import re
import sys

STRUCT = re.compile(r'/\*\*((?:(?!\*/).)*?)\*/\s*struct\s+(\w+)\s*\{(.*?)\n\};', re.S)
REF = re.compile(r'@([a-z_][a-z0-9_]*)')
MEMBER = re.compile(r'(\w+)\s*(?:\[[^\]]*\])?\s*;')
COMMENT = re.compile(r'/\*.*?\*/', re.S)


def stray_refs(text):
    for m in STRUCT.finditer(text):
        doc, name, body = m.groups()
        members = set(MEMBER.findall(COMMENT.sub('', body)))
        comments = doc + ''.join(COMMENT.findall(body))
        line = text.count('\n', 0, m.start()) + 1
        for ref in sorted(set(REF.findall(comments)) - members):
            yield f'{line}: struct {name}: @{ref} is not a member'


def main():
    with open(sys.argv[1], encoding='utf-8') as f:
        bad = list(stray_refs(f.read()))
    for b in bad:
        print(f'{sys.argv[1]}:{b}')
    return 1 if bad else 0


if __name__ == '__main__':
    sys.exit(main())
