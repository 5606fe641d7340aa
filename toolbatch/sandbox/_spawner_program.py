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
  memfd). ``C`` and ``R`` alternate; each waiting supervisor reads one of each.
* Per command, from its *supervisor* on ``channel``: ``P`` as soon as it holds the channel
  (its pid, known before the command can run and signal ``$PPID``, and off the command's
  path), then ``X<errno> <message>`` / ``V<message>`` when the shell could not be started
  (``OSError``/``ValueError``), else ``E<exit code> <alone>`` when the shell exits
  (``alone``: 1 when no other process of the command is left). The host reads the
  supervisor's host pid from the ``SCM_CREDENTIALS`` every datagram carries (the kernel
  translates it into the host's PID namespace).

A supervisor is forked in advance and waits on the control socket itself: it takes the next
channel and request, starts the shell and closes the pipe only it writes to, and the spawner,
reading EOF there, forks the next one, so the fork (about 0.5 ms of copying a Python process,
more under load) is off the command's path. EOF, not a byte written: a command can kill its
supervisor (``kill -9 $PPID``, or another command's ``kill``) before the supervisor has said
anything, and its death closes the pipe all the same; a byte would die with it, and no
supervisor would ever be forked for the session's next command. The
supervisor is the command's session and process-group leader and a child subreaper, so
everything the command starts stays beneath it (``setsid`` escapees included) until it is
stopped; it ignores the catchable signals a command may send its group (``kill 0``), so it
survives to report the exit status, and leaves once no process of the command is left. The
waiting supervisor reads EOF when the host closes its end (or dies) and tells the spawner,
which exits: the namespace's init then exits and the kernel kills every process in it.
"""

from __future__ import annotations

from typing import Final

__all__ = ["SPAWNER_SOURCE"]

SPAWNER_SOURCE: Final = r"""
import array, ctypes, gc, marshal, os, signal, socket, sys

gc.disable()  # nothing cyclic here; a collection would touch (copy) every page after a fork
PR_SET_CHILD_SUBREAPER = 36
IGNORED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT, signal.SIGPIPE,
           signal.SIGTSTP, signal.SIGTTIN, signal.SIGTTOU, signal.SIGUSR1, signal.SIGUSR2,
           signal.SIGALRM)
RESET = IGNORED + (signal.SIGCHLD,)
libc = ctypes.CDLL(None, use_errno=True)
control = socket.socket(fileno=int(sys.argv[1]))
control.set_inheritable(False)
for number in IGNORED:
    signal.signal(number, signal.SIG_IGN)
signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # the kernel reaps the supervisors
FDS = socket.CMSG_SPACE(8 * array.array("i").itemsize)


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


def supervise(channel, data, fds):
    try:
        if not data:
            with open(fds[3], "rb", closefd=False) as memfd:
                data = memfd.read()
        argv, cwd, env = marshal.loads(data)
        os.chdir(cwd)
        shell = spawn(argv, env, fds[:3])
    except ValueError as exc:
        os.close(waiting)
        channel.send(b"V" + str(exc).encode("utf-8", "replace"))
        os._exit(127)
    except OSError as exc:
        os.close(waiting)
        channel.send(b"X%d %s" % (exc.errno or 0, (exc.strerror or str(exc)).encode()))
        os._exit(127)
    for fd in fds:
        os.close(fd)
    # Nothing is said now (the host wakes once, for E). Only now the spawner forks the next
    # supervisor: a fork beside this posix_spawn would compete with it for the CPU on the
    # command's path. The command may kill this
    # supervisor before it gets here (kill -9 $PPID): its death closes the pipe just the same.
    os.close(waiting)
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
        channel.send(b"E%d %d" % (os.waitstatus_to_exitcode(status), alone))
        if alone:
            os._exit(0)


def receive(tag, count):
    # The next message's payload and fds if it is a `tag` one with at least `count` fds;
    # None at EOF (the host is gone or done) or out of turn.
    data, ancillary, _, _ = control.recvmsg(1 << 20, FDS, socket.MSG_CMSG_CLOEXEC)
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


def wait_for_request():
    # A supervisor made in advance: session leader and subreaper, holding the channel of
    # its command-to-be and its pid told to the host on it (P) before the request comes, so
    # that only chdir and posix_spawn are left when it does.
    os.setsid()
    libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    given = receive(b"C", 1)
    request = None
    if given is not None:
        channel = socket.socket(fileno=given[1][0])
        for fd in given[1][1:]:
            os.close(fd)
        channel.send(b"P")  # the host knows this pid before the command can signal it
        request = receive(b"R", 3)
    if request is None:
        if given is None:
            os.write(waiting, b"q")
        os._exit(0)
    control.close()
    supervise(channel, *request)


def make_supervisor():
    # Its own pipe, whose write end only it holds: EOF once it took a request or died
    # (however: a command may kill it first), b"q" when the host is gone.
    global waiting
    done, waiting = os.pipe()
    if os.fork() == 0:
        os.close(done)
        try:
            wait_for_request()
        finally:
            os._exit(127)
    os.close(waiting)
    return done


supervisor = make_supervisor()
control.send(b"ready")
while True:
    said = os.read(supervisor, 1)
    if said:  # b"q": the host closed its end
        break
    os.close(supervisor)
    supervisor = make_supervisor()
"""
"""The spawner (``python -I -S -c SPAWNER_SOURCE FD``); see the module docstring."""
