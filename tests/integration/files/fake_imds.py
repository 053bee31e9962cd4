# SPDX-License-Identifier: GPL-3.0-or-later
"""A fake EC2 instance metadata service (IMDSv2 only) on loopback, for the preemption test.

  python3 fake_imds.py PORT NOTICE_FILE
The spot notice (GET /latest/meta-data/spot/instance-action) is 404 until NOTICE_FILE exists, then its content.
"""

import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

PORT, NOTICE = int(sys.argv[1]), Path(sys.argv[2])
TOKEN = "fake-imds-token"


class Handler(BaseHTTPRequestHandler):
    def _send(self, code: int, body: str = "") -> None:
        self.send_response(code)
        self.end_headers()
        self.wfile.write(body.encode())

    def do_PUT(self):
        if self.path == "/latest/api/token" and self.headers.get("X-aws-ec2-metadata-token-ttl-seconds"):
            self._send(200, TOKEN)
        else:
            self._send(400)

    def do_GET(self):
        if self.headers.get("X-aws-ec2-metadata-token") != TOKEN:
            self._send(401)
        elif self.path == "/latest/meta-data/spot/instance-action" and NOTICE.exists():
            self._send(200, NOTICE.read_text())
        else:
            self._send(404)


ThreadingHTTPServer(("127.0.0.1", PORT), Handler).serve_forever()
