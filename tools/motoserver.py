# SPDX-License-Identifier: GPL-3.0-or-later
"""moto's own server (moto_server, from requirements-dev.txt) for the tests: AWS APIs, S3 included, on an address
of this machine (loopback, or the sandbox network's gateway for the sandbox hosts); no traffic leaves the machine."""

from __future__ import annotations

import contextlib
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def moto_server(log: Path, host: str = "127.0.0.1", timeout: float = 30) -> Iterator[str]:
    """Start moto_server on host and a free port, wait until it answers, yield its URL, stop it afterwards."""
    server = shutil.which("moto_server", path=str(Path(sys.executable).parent)) or shutil.which("moto_server")
    if not server:
        raise RuntimeError("moto_server not found: run 'make venv' (moto[server] is in requirements-dev.txt)")
    port = free_port(host)
    with open(log, "w") as out:
        proc = subprocess.Popen([server, "-H", host, "-p", str(port)], stdout=out, stderr=subprocess.STDOUT)
    url = f"http://{host}:{port}"
    deadline = time.monotonic() + timeout
    try:
        while True:
            try:
                urllib.request.urlopen(f"{url}/moto-api/", timeout=1)  # this machine only
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"moto_server did not start on {url}: {log.read_text()[-2000:]}") from None
                time.sleep(0.2)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=10)
