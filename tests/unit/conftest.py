# SPDX-License-Identifier: GPL-3.0-or-later
"""Unit tests run on the controller without hosts: the node-side library and the modules' logic."""

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
for path in (ROOT / "library_py", ROOT / "collections"):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))
