"""How `gpuval run` gives its Ansible the Lambda API key without putting it in Ansible's
environment: ansible-runner writes the whole environment of the process it starts into its
`command` artifact, and a run killed before its end leaves that file as it is.

`serving_key` listens on a Unix socket in a private folder (mode 0700) for as long as the run
lasts and answers every connection with the key; the run's environment names the socket
($GPUVAL_LAMBDA_KEY_SOCKET), and `receive_key` is how gpuval's plugins read it. Nothing of the
key is ever written to a file: a socket has no contents on disk.
"""

from __future__ import annotations

import shutil
import socket
import socketserver
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

KEY_SOCKET_ENV = "GPUVAL_LAMBDA_KEY_SOCKET"
MAX_KEY_BYTES = 4096
TIMEOUT_S = 10.0


class KeyHandoverError(Exception):
    """The key cannot be read from the socket `gpuval run` named."""


@contextmanager
def serving_key(key: str) -> Iterator[str]:
    """The path of a socket that answers the key while the context lasts."""
    encoded = key.encode()

    class Answer(socketserver.BaseRequestHandler):
        def handle(self) -> None:
            self.request.sendall(encoded)

    folder = Path(tempfile.mkdtemp(prefix="gpuval-key-"))  # mode 0700: this user only
    path = folder / "socket"
    try:
        with socketserver.ThreadingUnixStreamServer(str(path), Answer) as server:
            server.daemon_threads = True
            thread = threading.Thread(target=server.serve_forever, daemon=True)
            thread.start()
            try:
                yield str(path)
            finally:
                server.shutdown()
                thread.join()
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def receive_key(path: str) -> str:
    """The key the socket at `path` answers."""
    received = b""
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as connection:
            connection.settimeout(TIMEOUT_S)
            connection.connect(path)
            while chunk := connection.recv(MAX_KEY_BYTES):
                received += chunk
                if len(received) > MAX_KEY_BYTES:
                    break
    except OSError as problem:
        raise KeyHandoverError(
            f"cannot read the API key from gpuval run's socket {path} "
            f"({problem.strerror or type(problem).__name__}): is gpuval run still running?"
        ) from None
    if not received or len(received) > MAX_KEY_BYTES:
        raise KeyHandoverError(f"gpuval run's socket {path} answered no usable API key")
    return received.decode(errors="replace")
