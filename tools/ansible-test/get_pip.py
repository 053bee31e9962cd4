# SPDX-License-Identifier: GPL-3.0-or-later
"""Stand-in for get-pip.py, which ansible-test downloads from a host outside the package registries.

ansible-test runs `python get_pip_<version>.py [pip install args] --no-setuptools --no-wheel` inside an empty
virtual environment. This does the same with what is already here: Python's own ensurepip installs its bundled
pip, which then installs the requested packages (pip==<version> among them) from the configured index.
"""

import ensurepip
import os
import subprocess
import sys

GET_PIP_ONLY = {"--no-setuptools", "--no-wheel"}

if __name__ == "__main__":
    env = dict(os.environ)  # ensurepip points PIP_CONFIG_FILE at /dev/null in this process: keep pip.conf
    ensurepip.bootstrap(upgrade=False)
    args = [a for a in sys.argv[1:] if a not in GET_PIP_ONLY]
    sys.exit(subprocess.call([sys.executable, "-m", "pip", "install", "--quiet", *args], env=env))
