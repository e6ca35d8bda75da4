"""``python -I -S fresh_launch.py NAME ARGV...``: a pytest-xdist worker of a forked run, started by
the server at NAME (tests/fresh_workers.py) rather than as a new interpreter running ARGV. Hands it
this process's stdin, stdout and stderr, working directory and environment, forwards SIGTERM, SIGINT
and SIGHUP to it, and exits as it exits (its status, or the signal that killed it). Stdlib only,
and no site: it starts in milliseconds."""

import json
import os
import signal
import socket
import sys


def _exact(conn, n):
    data = b""
    while len(data) < n:
        chunk = conn.recv(n - len(data))
        if not chunk:
            return None
        data += chunk
    return data


def main():
    name, argv = sys.argv[1], sys.argv[2:]
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    conn.connect("\0" + name)
    body = json.dumps({"argv": argv, "cwd": os.getcwd(), "env": dict(os.environ)}).encode()
    socket.send_fds(conn, [len(body).to_bytes(8, "big")], [0, 1, 2])
    conn.sendall(body)
    # Only the worker holds the pipes to pytest-xdist now: its end is their end.
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    os.dup2(null, 1)
    pid = _exact(conn, 8)
    if pid is None:
        sys.exit("tests/fresh_launch.py: the worker server went away")
    pid = int.from_bytes(pid, "big")
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, lambda s, _: os.kill(pid, s))
    status = _exact(conn, 8)
    if status is None:
        sys.exit("tests/fresh_launch.py: the worker server went away")
    status = int.from_bytes(status, "big")
    if os.WIFSIGNALED(status):
        signal.signal(os.WTERMSIG(status), signal.SIG_DFL)
        os.kill(os.getpid(), os.WTERMSIG(status))
    sys.exit(os.waitstatus_to_exitcode(status))


if __name__ == "__main__":
    main()
