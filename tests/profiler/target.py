"""The machine the tested runtime was built for, as the test scripts see it.

A native build's launchers run on the host. A cross build's (arm64, run
under qemu-user through binfmt_misc) profile only programs of their own
architecture: a host program named on a command line (`sh`, `sort`,
`python3`) would run unprofiled. The cross set-up's guest root
($QEMU_LD_PREFIX, scripts/cross-setup.sh) holds the target's shell,
coreutils, sed, gzip, perl, sqlite3 and python3.11. qemu-user looks a
guest's absolute paths up in that root for open and stat but not for
execve, so programs are found by name only through a PATH that names the
guest root's directories by their host paths: setup() puts them first, for
the test script's own runs and for every program they start.
"""
import os
import shutil
import sys


def _head(path):
    """The first 20 bytes of an ELF file, or None."""
    try:
        with open(path, 'rb') as f:
            head = f.read(20)
    except OSError:
        return None
    if len(head) < 20 or head[:4] != b'\x7fELF':
        return None
    return head


EM_ARM = 40
EM_AARCH64 = 183


def _machine(path):
    """The ELF e_machine of a file, or None."""
    head = _head(path)
    if head is None:
        return None
    return int.from_bytes(head[18:20], 'little' if head[5] == 1 else 'big')


class Target:
    def __init__(self, bindir):
        launcher = os.path.join(os.path.abspath(bindir), 'igprof')
        self.cross = _machine(launcher) not in (None, _machine('/proc/self/exe'))
        # The target's word size in bytes (ELFCLASS32: 4), as its C library's
        # malloc sizes chunks by it.
        head = _head(launcher)
        self.word = 4 if head is not None and head[4] == 1 else 8
        self.root = os.environ.get('QEMU_LD_PREFIX', '') if self.cross else ''
        if self.cross and not os.path.isdir(os.path.join(self.root, 'usr', 'bin')):
            print(f'error: {launcher} is a cross build: set QEMU_LD_PREFIX to the guest root '
                  '(scripts/cross-setup.sh makes .cross/<arch>/guest)')
            sys.exit(2)
        self.path = [os.path.join(self.root, d) for d in ('usr/bin', 'bin')] if self.cross else []
        self.machine = _machine(launcher)
        # Whether the target's programs run under qemu-user through
        # binfmt_misc (scripts/cross-test.sh; i386 may run natively).
        self.emulated = self.cross and os.environ.get('CROSS_RUN_MODE') != 'native'

    def program(self, name):
        """The absolute path of program `name` of the target (for a cross
        build: in the guest root only), or None."""
        if not self.cross:
            return shutil.which(name)
        return shutil.which(name, path=os.pathsep.join(self.path))

    def python(self):
        """The target's Python 3 interpreter (the guest root's is python3.11)."""
        return self.program('python3') or self.program('python3.11')

    def skip(self, what, why):
        """Say that one check does not run here, and why."""
        print(f'skip: {what}: {why}')


def setup(bindir):
    """The target of the build whose bin directory is `bindir`; for a cross
    build, the guest root's directories go first in PATH."""
    t = Target(bindir)
    if t.cross:
        os.environ['PATH'] = os.pathsep.join(t.path + [os.environ.get('PATH', '')])
    return t


def _descendants(pid):
    """The pids of the live descendants of process `pid`."""
    children = {}
    for d in os.listdir('/proc'):
        if not d.isdigit():
            continue
        try:
            with open(f'/proc/{d}/stat') as f:
                ppid = int(f.read().rsplit(')', 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(d))
    out, todo = [], [pid]
    while todo:
        for c in children.get(todo.pop(), []):
            out.append(c)
            todo.append(c)
    return out


SYS_FUTEX_X86_64 = 202


def emulator_lock_hang(pid):
    """Whether a process under `pid` (or it) is stuck on a lock of qemu-user
    itself rather than of the program or the profiler: one of its threads
    waits in futex(2) on an address in the data of the qemu executable (the
    host mapping whose path names qemu-). The guest's locks, the profiler's
    among them, live in guest memory, never there. qemu-user 10.0.2 (Debian
    bookworm-backports) does not hold its descriptor-translation lock across
    fork: a child forked while another thread is inside write(2) inherits that
    lock held and hangs at its own first read, write or close. Returns a
    description of the stuck thread, or None."""
    for p in [pid] + _descendants(pid):
        try:
            maps = []
            with open(f'/proc/{p}/maps') as f:
                for line in f:
                    fields = line.split()
                    if len(fields) >= 6 and 'qemu-' in os.path.basename(fields[5]):
                        lo, hi = (int(x, 16) for x in fields[0].split('-'))
                        maps.append((lo, hi, fields[5]))
            tasks = os.listdir(f'/proc/{p}/task')
        except OSError:
            continue
        for t in tasks:
            try:
                with open(f'/proc/{p}/task/{t}/syscall') as f:
                    fields = f.read().split()
            except OSError:
                continue
            if len(fields) < 2 or fields[0] != str(SYS_FUTEX_X86_64):
                continue
            addr = int(fields[1], 16)
            for lo, hi, path in maps:
                if lo <= addr < hi:
                    return f'process {p} thread {t} waits on a lock at {addr:#x} in {path}'
    return None
