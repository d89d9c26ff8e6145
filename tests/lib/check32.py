#!/usr/bin/env python3
"""Compile QEMU source files of the series for a 32-bit x86 host.

The compile commands of the x86_64 build (compile_commands.json of OBJ)
are reused with -m32, the headers of an i386 sysroot (Debian's i386 -dev
packages, unpacked) and a config-host.h made for i386.  The files are
compiled, not only parsed (some build assertions only fire when code is
generated), into /dev/null: what does not build on a 32-bit host (64-bit
atomics, size_t formats of 64-bit values...) fails here.

Usage: check32.py OBJ SYSROOT CONFIGDIR FILE...
"""
import json
import shlex
import subprocess
import sys

from results import result


def main():
    obj, root, cfg = sys.argv[1:4]
    wanted = tuple(sys.argv[4:])
    commands = json.load(open(obj + '/compile_commands.json'))
    seen = set()  # paths relative to the source tree
    failed = 0
    for entry in commands:
        src = entry['file']
        name = src.split('qemu/', 1)[-1]
        if not src.endswith(wanted) or name in seen:
            continue
        seen.add(name)
        args, skip = [], False
        for a in shlex.split(entry['command']):
            if skip:
                skip = False
                continue
            if a in ('-o', '-MF', '-MQ'):
                skip = True
                continue
            if a in ('-MD', '-c', '-mcx16') or a.endswith('ccache/gcc') \
                    or a.endswith('/gcc') or a == 'gcc' or a == 'cc':
                continue
            a = a.replace('-m64', '-m32')
            a = a.replace('/usr/include/glib-2.0',
                          root + '/usr/include/glib-2.0')
            a = a.replace('/usr/lib/x86_64-linux-gnu/glib-2.0/include',
                          root + '/usr/lib/i386-linux-gnu/glib-2.0/include')
            a = a.replace('host/include/x86_64', 'host/include/i386')
            args.append(a)
        cmd = (['gcc', '-iquote', cfg] + args +
               ['--sysroot=' + root,
                '-isystem', root + '/usr/include/i386-linux-gnu',
                '-c', '-o', '/dev/null'])
        r = subprocess.run(cmd, cwd=entry['directory'], capture_output=True,
                           text=True)
        if r.returncode:
            failed += 1
            result('fail', 'i386 build: %s' % name,
                   'does not build for a 32-bit host')
            for line in [l for l in r.stderr.splitlines() if 'error' in l][:8]:
                print('      ' + line)
        else:
            result('pass', 'i386 build: %s' % name)
    missing = [w for w in wanted if w not in seen]
    for w in missing:
        failed += 1
        result('fail', 'i386 build: %s' % w, 'not in the build')
    return 1 if failed else 0


if __name__ == '__main__':
    sys.exit(main())
