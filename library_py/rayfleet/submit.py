# SPDX-License-Identifier: GPL-3.0-or-later
"""playbooks/submit.yml from a submit host (roles/submit_host writes ~/.local/bin/rayfleet-submit-<cluster>, which
runs this with the client venv's Python and the cluster's ansible.cfg). The words after ``--`` are the job's
command, passed on as one JSON extra var so that no quoting is lost:

  rayfleet-submit-<cluster> [ansible-playbook options, -e submit_...] -- python train.py --lr 3e-4
  rayfleet-submit-<cluster> -e submit_working_dir=. -e submit_id=run-7 -- python train.py
"""

from __future__ import annotations

import json
import os
import shlex
import sys
from pathlib import Path

PLAYBOOK = "rayfleet.cluster.submit"


def playbook_argv(args: list[str], bindir: Path) -> list[str]:
    """ansible-playbook's argv for ``args`` (options, then ``--`` and the job's command)."""
    if "--" in args:
        cut = args.index("--")
        args, command = args[:cut], args[cut + 1:]
        if command:
            args = [*args, "-e", json.dumps({"submit_entrypoint": shlex.join(command)})]
    playbook = str(bindir / "ansible-playbook")
    return [playbook, PLAYBOOK, *args]


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if not args or args[0] in ("-h", "--help"):
        print(__doc__)
        return 0 if args else 2
    os.environ["PWD"] = os.getcwd()  # submit_log_dir: ./artifacts/jobs
    cmd = playbook_argv(args, Path(sys.executable).parent)
    os.execv(cmd[0], cmd)
    return 1  # not reached


if __name__ == "__main__":
    sys.exit(main())
