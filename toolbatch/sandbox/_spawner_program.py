"""The program that runs inside a session's ``bwrap``: it starts the session's commands.

It is run as ``python -I -S -c SPAWNER_SOURCE FD`` (no ``site``, no toolbatch import: a few
milliseconds, once per session) with ``FD`` the spawner's end of a ``SOCK_SEQPACKET``
socketpair the host made before ``bwrap`` started (the seccomp filter refuses
``socket(AF_UNIX)``, not an inherited socket nor ``sendmsg``/``recvmsg``).

Protocol (one datagram each way, never more):

* ``ready`` from the spawner once it runs.
* Per command, from the host, ahead of it: ``C`` with one ``SCM_RIGHTS`` fd, the next
  command's own ``SOCK_SEQPACKET`` channel (the host reads that command's replies there);
  then, when the command comes, ``R`` + ``marshal.dumps((argv, cwd, env))`` (or ``R`` alone
  with a memfd holding it, for large ones) with fds ``[stdin, stdout, stderr]`` (then the
  memfd). ``C`` and ``R`` alternate; the reader (below) reads one of each per command.
* Per command, from its *supervisor* on ``channel``: ``P`` as soon as it holds the channel
  (its pid, known before the command can run and signal ``$PPID``, and off the command's
  path), then ``X<errno> <message>`` / ``V<message>`` when the shell could not be started
  (``OSError``/``ValueError``), else ``E<exit code> <alone>`` when the shell exits
  (``alone``: 1 when no other process of the command is left). The host reads the
  supervisor's host pid from the ``SCM_CREDENTIALS`` every datagram carries (the kernel
  translates it into the host's PID namespace).

* Between the spawner and each supervisor, on a ``SOCK_SEQPACKET`` link only the two hold:
  ``r`` (spawner: read the control socket now), ``t`` (supervisor: I took my request and
  started the shell), ``e`` (my command ended, nothing of it is left), ``i`` (the host let
  it go: I can run another), ``x`` (spawner: leave), ``q`` (the host closed its end). EOF on
  a link: that supervisor left or died.

Supervisors are kept, not forked per command. Exactly one of them, the *reader*, reads the
control socket (a ``C``, then an ``R``); once it took its request and started the shell
(``t``) the spawner names the next reader: one that ran a command before and is free again
(``i``; at most ``IDLE_KEPT`` wait, more are told to leave), else one whose command just
ended, once the host lets that go (within ``READER_WAIT_MS``), else a new fork. A session's
sequential commands so alternate between two supervisors and fork nothing (a fork of the
spawner costs about 0.3 ms, and the new process's first steps over 1 ms more of copied pages,
all on a 2-core machine's CPU beside the command); concurrent commands fork one each until
supervisors come free. A supervisor becomes free only once the host closed the command's
channel, so no signal the host sends for a command can reach the next one (the host closes
it when it sends its next request: the supervisor comes free while that command runs, not
while the host finishes this one). The link's EOF,
not a byte written, says that a reader died: a command can kill its supervisor (``kill -9
$PPID``, or another command's ``kill``) before the supervisor has said anything, and a
session whose reader died unseen would never start another command.

A supervisor is the session and process-group leader of each command it runs and a child
subreaper, so everything the command starts stays beneath it (``setsid`` escapees included)
until it is stopped; it ignores the catchable signals a command may send its group (``kill
0``), so it survives to report the exit status. It runs another command only when none of
the last one's processes is left; else it leaves once they are gone. Its cwd is each
command's own; it keeps no state of one command for the next that a command could not
already reach (the session's commands share a trust domain: see the package README). The
reader reads EOF when the host closes its end (or dies) and tells the spawner, which exits:
the namespace's init then exits and the kernel kills every process in it.
"""

from __future__ import annotations

from typing import Final

__all__ = ["SPAWNER_SOURCE"]

SPAWNER_SOURCE: Final = r"""
import array, ctypes, gc, marshal, os, select, signal, socket, sys

gc.disable()  # nothing cyclic here; a collection would touch (copy) every page after a fork
PR_SET_CHILD_SUBREAPER = 36
IGNORED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT, signal.SIGPIPE,
           signal.SIGTSTP, signal.SIGTTIN, signal.SIGTTOU, signal.SIGUSR1, signal.SIGUSR2,
           signal.SIGALRM)
RESET = IGNORED + (signal.SIGCHLD,)
libc = ctypes.CDLL(None, use_errno=True)
# Not dumpable (inherited by the supervisors, reset by the command's execve): a command can
# neither ptrace nor open /proc/<pid>/mem of the spawner or a supervisor, which runs the
# session's later commands and reports their exit status (the capabilities are dropped).
PR_SET_DUMPABLE = 4
libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
control = socket.socket(fileno=int(sys.argv[1]))
control.set_inheritable(False)
for number in IGNORED:
    signal.signal(number, signal.SIG_IGN)
signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # the kernel reaps the supervisors
FDS = socket.CMSG_SPACE(8 * array.array("i").itemsize)
IDLE_KEPT = 2  # supervisors kept for another command; more leave
# One receive buffer: a fresh 1 MiB bytes per message cost an mmap and a munmap on the
# command's path.
BUFFER = bytearray(1 << 20)
BUFFER_VIEW = memoryview(BUFFER)
READER_WAIT_MS = 2  # how long the next command may wait for one, rather than for a fork


def spawn(argv, env, stdio):
    actions = [(os.POSIX_SPAWN_DUP2, fd, target) for target, fd in enumerate(stdio)]
    if "/" in argv[0]:
        path = argv[0]
    else:
        # As execvp, but each candidate is checked with access(2) first: a failed
        # posix_spawn costs a whole clone. Not os.get_exec_path: its first call imports
        # warnings, about 1 ms in each fresh supervisor.
        for directory in env.get("PATH", os.defpath).split(os.pathsep):
            path = (directory or ".") + "/" + argv[0]
            if os.access(path, os.X_OK) and not os.path.isdir(path):
                break
        else:
            raise FileNotFoundError(2, "No such file or directory: %r" % argv[0])
    return os.posix_spawn(path, argv, env, file_actions=actions, setsigdef=RESET)


def run(channel, data, fds):
    # Start the shell and report its end; True when no process of the command is left.
    try:
        if not data:
            with open(fds[3], "rb", closefd=False) as memfd:
                data = memfd.read()
        argv, cwd, env = marshal.loads(data)
        os.chdir(cwd)
        shell = spawn(argv, env, fds[:3])
    except ValueError as exc:
        reply = b"V" + str(exc).encode("utf-8", "replace")
    except OSError as exc:
        reply = b"X%d %s" % (exc.errno or 0, (exc.strerror or str(exc)).encode())
    else:
        reply = None
    # The output's end reaches the host as the shell exits, while this supervisor wakes
    # to send the status: the host's wake-up (on the other core, often idle and halted)
    # overlaps that instead of following it, and it reads the status on the way.
    for fd in fds:
        os.close(fd)
    # Only now the spawner names the next reader: a fork beside this posix_spawn would
    # compete with it for the CPU on the command's path. The command may kill this
    # supervisor before it gets here (kill -9 $PPID): its link's EOF says the same.
    link.send(b"t")
    if reply is not None:
        link.send(b"e")
        channel.send(reply)
        return True
    while True:
        try:
            pid, status = os.wait()
        except ChildProcessError:
            os._exit(0)
        if pid != shell:
            continue
        alone = 0
        while True:
            try:
                pid, _ = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                alone = 1
                break
            if pid == 0:
                break
        # Nothing was said since P: the host wakes once per command, for this. Then the
        # spawner, which waits for no command: its wake-up is not on this one's path.
        channel.send(b"E%d %d" % (os.waitstatus_to_exitcode(status), alone))
        if alone:
            link.send(b"e")  # free again once the host lets the command go
            return True


def receive(tag, count):
    # The next message's payload and fds if it is a `tag` one with at least `count` fds;
    # None at EOF (the host is gone or done) or out of turn.
    size, ancillary, _, _ = control.recvmsg_into([BUFFER], FDS, socket.MSG_CMSG_CLOEXEC)
    data = BUFFER_VIEW[:size].tobytes()
    fds = []
    for level, kind, payload in ancillary:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            received = array.array("i")
            received.frombytes(payload[: len(payload) - len(payload) % received.itemsize])
            fds.extend(received)
    if data[:1] == tag and len(fds) >= count:
        return data[1:], fds
    for fd in fds:
        os.close(fd)
    return None


def supervise():
    # Session leader and subreaper; each turn it is named the reader it takes the channel
    # of its command-to-be, tells the host its pid on it (P) before the request comes (so
    # that only chdir and posix_spawn are left when it does), runs the command, and, once
    # the host let the command go, waits for another turn.
    os.setsid()
    libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    while link.recv(1) == b"r":
        given = receive(b"C", 1)
        if given is None:
            link.send(b"q")
            break
        # Its kind given, not asked of the kernel (three system calls).
        channel = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET, 0, given[1][0])
        for fd in given[1][1:]:
            os.close(fd)
        channel.send(b"P")  # the host knows this pid before the command can signal it
        request = receive(b"R", 3)
        if request is None or not run(channel, *request):
            break
        # EOF once the host let the command go: no signal of the host's for this command
        # can reach the next one then.
        channel.recv(1)
        channel.close()
        link.send(b"i")
    os._exit(0)


def make_supervisor():
    # Its own link, whose other end only it holds: EOF once it died (however: a command may
    # kill it), or left.
    global link
    mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    if os.fork() == 0:
        mine.close()
        for other in links.values():
            other.close()
        link = theirs
        try:
            supervise()
        finally:
            os._exit(127)
    theirs.close()
    links[mine.fileno()] = mine
    watch.register(mine, select.POLLIN)
    return mine.fileno()


def drop(fd):
    watch.unregister(fd)
    links.pop(fd).close()
    finishing.discard(fd)
    if fd in idle:
        idle.remove(fd)


def tell(fd, order):
    # False when that supervisor is gone (killed while free: its EOF is still unread).
    try:
        links[fd].send(order)
    except OSError:
        drop(fd)
        return False
    return True


def name_reader(fd):
    global reader
    while not tell(fd, b"r"):
        fd = idle.pop() if idle else make_supervisor()
    reader = fd


# Exactly one supervisor reads the control socket at a time (C, then R, in turn): one that
# ran a command before if one waits, else one whose command just ended (once the host lets
# that go, within READER_WAIT_MS), else a new one.
links = {}
idle = []
finishing = set()
watch = select.poll()
name_reader(make_supervisor())
control.send(b"ready")
while True:
    events = watch.poll(READER_WAIT_MS if reader is None else None)
    for fd, _ in events:
        if fd not in links:  # dropped by an earlier event of this batch
            continue
        try:
            said = links[fd].recv(1, socket.MSG_DONTWAIT)
        except BlockingIOError:  # a stale event of a dropped link's number, reused since
            continue
        except OSError:
            said = b""
        if said == b"q":  # the host closed its end: the free supervisors leave first
            leaving = [links[free] for free in (*idle, *finishing)]
            try:
                for other in leaving:
                    other.send(b"x")
                for other in leaving:
                    while other.recv(1):  # EOF once it has gone
                        pass
            except OSError:
                pass
            os._exit(0)
        if said == b"e":
            finishing.add(fd)
        elif said == b"i":
            finishing.discard(fd)
            if reader is None:
                name_reader(fd)
            elif len(idle) < IDLE_KEPT:
                idle.append(fd)
            else:
                tell(fd, b"x")
        else:  # b"t": it took its request; b"": it left or died
            if not said:
                drop(fd)
            if fd == reader:
                reader = None
                if idle:
                    name_reader(idle.pop())
                elif not finishing:
                    name_reader(make_supervisor())
    if reader is None and not events:  # no command ending was let go in time
        name_reader(make_supervisor())
"""
"""The spawner (``python -I -S -c SPAWNER_SOURCE FD``); see the module docstring."""
