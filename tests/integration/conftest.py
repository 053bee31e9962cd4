# SPDX-License-Identifier: GPL-3.0-or-later
"""Shared helpers for the testinfra verifier: Ray's own view of the cluster, read on the head."""

from __future__ import annotations

import base64
import contextlib
import json
import os
import re
import subprocess
import time
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
RAY_DEFAULTS = yaml.safe_load((ROOT / "roles/ray/defaults/main.yml").read_text())
VENV = RAY_DEFAULTS["ray_venv_dir"]
TOKEN_PATH = "/etc/rayfleet/auth-token"
# Ray's CLI as the Ray service user, with the cluster's token (Ray token authentication is on by default)
RAY = f"sudo -u rayfleet env RAY_AUTH_MODE=token RAY_AUTH_TOKEN_PATH={TOKEN_PATH} {VENV}/bin/ray"
RAY_NO_TOKEN = f"{VENV}/bin/ray"
# The venv's python as the Ray service user, with the token (for rayfleet.collective and friends run by hand)
PYTHON_AS_RAY = (f"cd /tmp && sudo -u rayfleet env RAY_AUTH_MODE=token RAY_AUTH_TOKEN_PATH={TOKEN_PATH} "
                 f"{VENV}/bin/python")
SANDBOX = os.environ.get("RAYFLEET_SANDBOX", "molecule")
# The dashboard (state API, Jobs API) listens on the head's loopback: commands run on the head use this.
DASHBOARD = f"http://{RAY_DEFAULTS['ray_dashboard_host']}:{RAY_DEFAULTS['ray_dashboard_port']}"
CONTAINERS_CONF = str(ROOT / "sandbox" / "containers.conf")


def pytest_configure(config) -> None:
    config.addinivalue_line(
        "markers", "extended: a slow module left out of make test (make molecule: -m 'not extended') and run by "
        "make test-full")


# RAYFLEET_VERIFY_ORDER=reverse runs the modules in reverse order (each module's tests keep theirs; test_zz_down,
# which takes the cluster down and up, stays last): every module must pass whatever ran before it.
def pytest_collection_modifyitems(config, items) -> None:
    del config
    if os.environ.get("RAYFLEET_VERIFY_ORDER", "normal") != "reverse":
        return
    modules: dict[str, list] = {}
    for item in items:
        modules.setdefault(item.module.__name__, []).append(item)
    order = sorted(modules, reverse=True)
    order.sort(key=lambda name: name.startswith("test_zz_"))
    items[:] = [item for name in order for item in modules[name]]


def drifted_stages(stdout: str) -> dict[str, list[str]]:
    """host -> the stages playbooks/drift.yml would run there, each with what drifted ("<stage>: <why>"), from the
    drift check's one report (a run whose output holds no report fails the test)."""
    lines = stdout.splitlines()
    for at, line in enumerate(lines):
        if not line.startswith("TASK [Show what drifted"):
            continue
        start = next(i for i in range(at + 1, len(lines)) if re.match(r"ok: \[[^\]]+\] => \{$", lines[i]))
        end = lines.index("}", start)
        msg = json.loads("\n".join(["{", *lines[start + 1:end], "}"]))["msg"]
        return {} if msg == "nothing drifted on any host" else {host: list(why) for host, why in msg.items()}
    raise AssertionError(f"no drift report in the run's output:\n{stdout[-3000:]}")


def run_drift() -> subprocess.CompletedProcess:
    """playbooks/drift.yml on the sandbox (changes nothing)."""
    return subprocess.run(["ansible-playbook", "playbooks/drift.yml", "-i", "inventories/sandbox"], cwd=ROOT,
                          env=ansible_env(), capture_output=True, text=True, check=False, timeout=300)


@pytest.fixture(scope="module", autouse=True)
def leaves_the_sandbox_converged(request):
    """After each module, playbooks/drift.yml finds nothing to do on any host: a module leaves the sandbox as it
    found it, so no module depends on what ran before it."""
    yield
    proc = run_drift()
    module = request.module.__name__
    assert proc.returncode == 0, f"{module} left a host unreachable or failing the drift check:\n{proc.stdout[-3000:]}"
    left = drifted_stages(proc.stdout)
    assert not left, f"{module} left drift behind (stage: what drifted, per host): {left}"


# Each module's wall time (setup, tests, teardown) in the terminal summary and artifacts/verify-modules.json.
_MODULE_SECONDS: dict[str, float] = {}
# Each failed test or fixture, with the end of its report, in artifacts/verify-failures.txt: tools/stages.py prints
# it after the stage durations, where a CI log's tail shows it.
FAILURES = ROOT / "artifacts" / "verify-failures.txt"


def pytest_sessionstart(session) -> None:
    del session
    FAILURES.unlink(missing_ok=True)


def pytest_runtest_logreport(report) -> None:
    module = report.nodeid.split("::")[0].rsplit("/", 1)[-1].removesuffix(".py")
    _MODULE_SECONDS[module] = _MODULE_SECONDS.get(module, 0.0) + report.duration
    if report.failed:
        lines = report.longreprtext.splitlines()[-25:]
        FAILURES.parent.mkdir(exist_ok=True)
        with FAILURES.open("a") as out:
            out.write(f"----- {report.nodeid} ({report.when}) -----\n" + "\n".join(lines) + "\n")


def pytest_terminal_summary(terminalreporter) -> None:
    if not _MODULE_SECONDS:
        return
    terminalreporter.section("verify modules, wall seconds (setup + tests + teardown)")
    for module, seconds in _MODULE_SECONDS.items():
        terminalreporter.write_line(f"{seconds:8.1f}  {module}")
    terminalreporter.write_line(f"{sum(_MODULE_SECONDS.values()):8.1f}  total")
    out = ROOT / "artifacts" / "verify-modules.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps({"order": os.environ.get("RAYFLEET_VERIFY_ORDER", "normal"),
                               "seconds": _MODULE_SECONDS}, indent=1) + "\n")


def role_of(host) -> str:
    groups = host.ansible.get_variables()["group_names"]
    return "head" if "ray_head" in groups else "worker"


def node_ip(host) -> str:
    """The sandbox reaches each host at its cluster address."""
    return host.ansible.get_variables()["ansible_host"]


def journal(host, unit: str) -> str:
    return host.run(f"journalctl --no-pager -n 60 -u {unit}").stdout


def ray_nodes(head, head_ip: str) -> list[dict]:
    """`ray list nodes` on the head (head_ip: its cluster address), as JSON (Ray's own CLI and state API)."""
    del head_ip  # the dashboard listens on the head's loopback
    cmd = head.run(f"cd /tmp && {RAY} list nodes --format json --limit 1000 --address {DASHBOARD}")
    assert cmd.rc == 0, f"ray list nodes failed on the head: {cmd.stderr}"
    return json.loads(cmd.stdout)


def alive_ips(nodes: list[dict]) -> list[str]:
    return sorted(n["node_ip"] for n in nodes if n["state"] == "ALIVE")


def wait_for_cluster(head, head_ip: str, want_ips: list[str], timeout: float,
                     exclude_ids: set[str] | None = None) -> tuple[float, list[dict]]:
    """Poll until exactly want_ips are alive (with node ids not in exclude_ids); return seconds taken."""
    start = time.monotonic()
    exclude_ids = exclude_ids or set()
    last: object = None
    while time.monotonic() - start < timeout:
        try:
            nodes = ray_nodes(head, head_ip)
            alive = [n for n in nodes if n["state"] == "ALIVE"]
            last = [(n["node_ip"], n["node_id"][:8]) for n in alive]
            if sorted(n["node_ip"] for n in alive) == sorted(want_ips) and not {
                    n["node_id"] for n in alive} & exclude_ids:
                return time.monotonic() - start, nodes
        except (AssertionError, json.JSONDecodeError) as exc:  # head still starting
            last = str(exc)
        time.sleep(2)
    pytest.fail(f"cluster did not show {want_ips} alive (new node ids) within {timeout:g} s; last seen: {last}")


def podman(*args: str) -> str:
    env = dict(os.environ, CONTAINERS_CONF=CONTAINERS_CONF)
    proc = subprocess.run(["podman", *args], env=env, capture_output=True, text=True, check=True)
    return proc.stdout


def container(inventory_name: str) -> str:
    return f"rayfleet-{inventory_name}"


def inventory_ips(request) -> dict[str, str]:
    """Inventory name -> address of every ray_head/ray_worker host."""
    from testinfra import get_host

    inv = request.config.option.ansible_inventory
    any_host = get_host("ansible://ray_head", ansible_inventory=inv)
    groups = any_host.ansible.get_variables()["groups"]
    members = groups["ray_head"] + groups.get("ray_worker", [])
    return {m: get_host(f"ansible://{m}", ansible_inventory=inv).ansible.get_variables()["ansible_host"]
            for m in members}


def head_host(request):
    """The head as a testinfra host, for checks that run once rather than per host."""
    from testinfra import get_host

    return get_host(f"ansible://{SANDBOX}-head", ansible_inventory=request.config.option.ansible_inventory)


@contextlib.contextmanager
def stranger(address: str):
    """A host on the sandbox network but not in the cluster (same image), removed afterwards.

    Yields run(argv, env=None) -> CompletedProcess, executing inside it.
    """
    env = dict(os.environ, CONTAINERS_CONF=CONTAINERS_CONF)
    name = f"rayfleet-{SANDBOX}-stranger"
    subprocess.run(["podman", "rm", "--force", "--ignore", name], env=env, check=True, capture_output=True)
    image = podman("inspect", container(f"{SANDBOX}-head"), "--format", "{{.ImageName}}").strip()
    podman("run", "--detach", "--name", name, "--network", f"rayfleet-{SANDBOX}", "--ip", address,
           "--systemd=always", image, "/sbin/init")

    def run(argv: list[str], extra_env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
        flags = [f for k, v in (extra_env or {}).items() for f in ("--env", f"{k}={v}")]
        return subprocess.run(["podman", "exec", *flags, name, *argv], env=env, capture_output=True, text=True,
                              check=False)

    try:
        deadline = time.monotonic() + 60
        while run(["systemctl", "is-system-running"]).stdout.strip() not in ("running", "degraded"):
            if time.monotonic() > deadline:
                pytest.fail("the stranger container did not boot in 60 s")
            time.sleep(0.5)
        yield run
    finally:
        subprocess.run(["podman", "rm", "--force", "--time", "2", name], env=env, check=False, capture_output=True)


def ansible_env(**extra: str) -> dict[str, str]:
    """Environment for running this checkout's Ansible against the sandbox from a test."""
    env = dict(os.environ, RAYFLEET_SANDBOX=SANDBOX, ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"), ANSIBLE_NOCOLOR="1",
               ANSIBLE_FORCE_COLOR="0", ANSIBLE_STDOUT_CALLBACK="default")
    env.update(extra)
    env.pop("ANSIBLE_INVENTORY", None)
    return env


def run_site(*args: str) -> subprocess.CompletedProcess:
    """`ansible-playbook site.yml -i inventories/sandbox ARGS` for the sandbox under test."""
    return subprocess.run(["ansible-playbook", "site.yml", "-i", "inventories/sandbox", *args], cwd=ROOT,
                          env=ansible_env(), capture_output=True, text=True, check=False, timeout=300)


def converge_again() -> None:
    """A plain site.yml, for a module that ran playbooks with other variables (which the stage records keep as their
    inputs) or a stage alone: the later modules find the sandbox as this one found it."""
    proc = run_site()
    assert proc.returncode == 0, proc.stdout[-3000:]


# A task pinned to one worker, never retried elsewhere: it says when it started (a file on the worker), runs 6 s,
# and its driver on the head prints what became of it.
DRAINED_TASK = """
import time, ray
ray.init(address="{gcs}")
@ray.remote(max_retries=0, resources={{"node:{ip}": 0.01}})
def work():
    open("{marker}", "w").close()
    time.sleep(6)
    return "finished"
try:
    print("RESULT", ray.get(work.remote()), flush=True)
except Exception as exc:
    print("RESULT", type(exc).__name__, str(exc)[:300], flush=True)
"""


def stop_lets_running_task_finish(request, worker: str) -> None:
    """`systemctl stop` of worker's Ray unit while a task runs there: Ray drains the node, so the task finishes
    before the node stops (instead of dying with it); the unit is started again and rejoins."""
    head = head_host(request)
    ips = inventory_ips(request)
    # in Ray's temp dir: the host's, also where a container node runs the task
    marker = "/tmp/ray/rayfleet-drain-task"  # ray_temp_dir of the sandbox's unnamed cluster
    podman("exec", container(worker), "rm", "-f", marker)
    script = DRAINED_TASK.format(ip=ips[worker], gcs=f"{node_ip(head)}:{RAY_DEFAULTS['ray_gcs_port']}", marker=marker)
    driver = subprocess.Popen(["podman", "exec", container(f"{SANDBOX}-head"), "sh", "-c",
                               f"echo {base64.b64encode(script.encode()).decode()} | base64 -d > /tmp/rf-drain.py && "
                               f"chmod 0644 /tmp/rf-drain.py && {PYTHON_AS_RAY} /tmp/rf-drain.py"],
                              env=dict(os.environ, CONTAINERS_CONF=CONTAINERS_CONF), stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True)
    old = {n["node_id"] for n in ray_nodes(head, node_ip(head)) if n["node_ip"] == ips[worker]}
    try:
        deadline = time.monotonic() + 60
        while podman("exec", container(worker), "sh", "-c", f"test -e {marker} && echo started || :"
                     ).strip() != "started":
            assert time.monotonic() < deadline and driver.poll() is None, (
                f"the task never started on {worker}: {driver.poll() is not None and driver.stdout.read()[-2000:]}")
            time.sleep(0.5)
        start = time.monotonic()
        podman("exec", container(worker), "systemctl", "stop", "ray-worker.service")
        stopped_after = time.monotonic() - start
        out = driver.communicate(timeout=60)[0]
    finally:
        driver.kill()
        podman("exec", container(worker), "systemctl", "start", "ray-worker.service")
    assert "RESULT finished" in out, f"the task did not finish on the stopping worker:\n{out[-2000:]}"
    print(f"\n{worker}: stopped {stopped_after:.1f} s after its task started (the task runs 6 s)")
    wait_for_cluster(head, node_ip(head), list(ips.values()), timeout=90, exclude_ids=old)


def wait(what: str, probe, timeout: float, every: float = 2):
    """probe() until it returns something true; its last value in the failure."""
    deadline = time.monotonic() + timeout
    while True:
        found = probe()
        if found:
            return found
        if time.monotonic() > deadline:
            pytest.fail(f"{what} not within {timeout:g} s; last seen: {found!r}")
        time.sleep(every)
