"""pytest-xdist's workers of a forked run (tests/fresh.py), forked too: from a server the run forks
before its session starts, so a worker does not import jax, pytest and the plugins again (~1 s of
CPU a worker; a planted ``-n 2`` run starts two).

xdist starts a worker through execnet as ``python -u -c BOOTSTRAP`` and talks to it over its stdin
and stdout (execnet/gateway_io.py ``popen_args``, ``Popen2IOMaster``). In a forked run that command is
``python -I -S tests/fresh_launch.py NAME -u -c BOOTSTRAP``: the launcher hands its stdin, stdout and
stderr, its working directory, environment and arguments to the server at NAME (an abstract unix
socket) and exits as the worker exits, with its status or the signal that killed it. The server forks
a worker that runs BOOTSTRAP as ``python -u -c`` would run it: those descriptors as 0, 1 and 2, that
directory, that environment, ``''`` and PYTHONPATH's entries first on ``sys.path``. The server is
forked before the run starts any thread, and has started no jax backend.

A worker whose environment differs from the server's in a variable read at import
(tests/fresh.py ``READ_AT_IMPORT``), or whose command has an option other than ``-u`` and ``-B``, is
started as the command says, a new interpreter. A worker's exit runs no ``atexit`` handler (a fork's
``os._exit``), as a forked run's does not."""

from __future__ import annotations

import io
import json
import os
import select
import signal
import socket
import sys
import tempfile
import traceback

from fresh_launch import _exact

HERE = os.path.dirname(os.path.abspath(__file__))
LAUNCHER = os.path.join(HERE, "fresh_launch.py")


def _worker(fds: list[int], request: dict, server_env: dict[str, str]) -> None:
    """In the worker's fork: ``python ARGV`` as the launcher was asked to run it; never returns."""
    for target, fd in zip((0, 1, 2), fds):
        os.dup2(fd, target)
        os.close(fd)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    argv, env = request["argv"], request["env"]
    import fresh

    options = argv[: argv.index("-c")] if "-c" in argv else None
    if (
        options is None
        or set(options) - {"-u", "-B"}
        or fresh._read_at_import(env) != fresh._read_at_import(server_env)
    ):
        os.execve(sys.executable, [sys.executable, *argv], env)
    code = argv[len(options) + 1]
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(env)
    tempfile.tempdir = None
    sys.dont_write_bytecode = "-B" in options or bool(env.get("PYTHONDONTWRITEBYTECODE"))
    import fresh_server

    sys.path[:] = ["", *filter(None, env.get("PYTHONPATH", "").split(os.pathsep)), *fresh_server.BASE_PATH]
    sys.argv = ["-c", *argv[len(options) + 2 :]]
    sys.stdin = open(0, encoding="utf-8", closefd=False)
    sys.stdout = io.TextIOWrapper(open(1, "wb", buffering=0, closefd=False), "utf-8", write_through=True)  # -u
    sys.stderr = open(2, "w", encoding="utf-8", closefd=False, errors="backslashreplace", buffering=1)
    status = 0
    try:
        exec(compile(code, "<string>", "exec"), {"__name__": "__main__", "__builtins__": __builtins__})
    except SystemExit as e:
        status = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        if not isinstance(e.code, int | None):
            print(e.code, file=sys.stderr)
    except BaseException:
        traceback.print_exc()
        status = 1
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:
                pass
    os._exit(status)


def _handle(conn: socket.socket, server_env: dict[str, str]) -> None:
    """In a fork of the server, one launcher's worker: fork it, tell the launcher its pid, wait for
    it (killing it if the launcher goes), tell the launcher its wait status; never returns."""
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    try:
        head, fds, _, _ = socket.recv_fds(conn, 8, 3)
        if len(head) < 8:
            head += _exact(conn, 8 - len(head)) or b""
        body = _exact(conn, int.from_bytes(head, "big")) if len(head) == 8 else None
        if body is None:
            os._exit(1)  # the launcher went away
        request = json.loads(body)
    except (OSError, ValueError):
        os._exit(1)
    pid = os.fork()
    if pid == 0:
        conn.close()
        try:
            _worker(fds, request, server_env)
        except BaseException:
            traceback.print_exc()  # on the launcher's stderr, where the worker's own goes
            os._exit(1)
    for fd in fds:
        os.close(fd)
    conn.sendall(pid.to_bytes(8, "big"))
    pidfd = os.pidfd_open(pid)
    ready, _, _ = select.select([conn, pidfd], [], [])
    if conn in ready and pidfd not in ready:  # the launcher went: its worker goes too
        os.kill(pid, signal.SIGKILL)
    _, status = os.waitpid(pid, 0)
    try:
        conn.sendall(status.to_bytes(8, "big"))
    except OSError:
        pass
    os._exit(0)


def _serve(listener: socket.socket, alive: int) -> None:
    """The server: a worker for each launcher that connects, until the run that forked it ends."""
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # its handlers are reaped as they exit
    server_env = dict(os.environ)
    while True:
        ready, _, _ = select.select([listener, alive], [], [])
        if alive in ready:
            os._exit(0)
        try:
            conn, _ = listener.accept()
        except OSError:
            continue
        if os.fork() == 0:
            listener.close()
            os.close(alive)
            _handle(conn, server_env)
        conn.close()


def start() -> None:
    """In a forked run, before its session: fork the server and have execnet start each ``popen``
    worker through the launcher. Nothing is changed where the run imports no execnet."""
    try:
        import execnet.gateway_io as gateway_io
    except ImportError:
        return
    name = f"tpumem-tests-workers-{os.getpid()}-{os.urandom(4).hex()}"
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind("\0" + name)
    listener.listen(16)
    # `keep` is held by this run alone (a pipe is not inherited across exec): the server ends when it does
    alive, keep = os.pipe()
    if os.fork() == 0:
        os.close(keep)
        try:
            _serve(listener, alive)
        finally:
            os._exit(1)
    listener.close()
    os.close(alive)

    plain = gateway_io.popen_args

    def popen_args(spec):
        args = plain(spec)
        if args[0] != sys.executable:  # a python the run named (--tx popen//python=...)
            return args
        return [sys.executable, "-I", "-S", LAUNCHER, name, *args[1:]]

    gateway_io.popen_args = popen_args
