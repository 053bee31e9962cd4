# SPDX-License-Identifier: GPL-3.0-or-later
"""The ray role's names, ports and shares of a host's node instances (ray_node_instances): the cluster plan's
(plugins/plugin_utils/cluster_plan.py) as the role's vars (roles/ray/vars/main.yml) read it in Ansible, with the
shares its second plan call derives from what the role finds on the host; and the same for a host's one node."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from ansible_collections.rayfleet.cluster.plugins.plugin_utils.cluster_plan import host_plan
from ansible_collections.rayfleet.cluster.plugins.plugin_utils.plans import Call, run_plan

ROOT = Path(__file__).resolve().parents[2]

SHOWN = ("{{ {'instances': __ray_instances, 'units': __ray_units, 'configs': __ray_config_paths, 'first': {"
         "'unit': __ray_unit, 'config': __ray_config_path, 'temp': __ray_temp_dir, 'container': __ray_container_name,"
         " 'node_name': __ray_node_name, 'cpus': __ray_node_cpus,"
         " 'object_store': __ray_node_object_store},"
         " 'firewall_ports': __ray_plan_result.host.ray_ports} | to_json }}")


CASES = {
    "one": {},
    "one-named": {"ray_cluster_name": "teamb"},
    "three": {"ray_cluster_name": "teamb",
              "ray_node_instances": [{"name": "gpu0", "gpus": [0]}, {"name": "gpu1", "gpus": [1]},
                                     {"name": "gpu2", "gpus": ["GPU-2"]}]},
    # an 8-GPU host cut into 4 slots, two of them taken; then one of the two taken out
    "slots": {"ray_node_instance_slots": 4, "ray_node_instances": [{"name": "gpu1", "gpus": [1], "slot": 1},
                                                                   {"name": "gpu3", "gpus": [3], "slot": 3}]},
    "slots-one-left": {"ray_node_instance_slots": 4, "ray_node_instances": [{"name": "gpu3", "gpus": [3], "slot": 3}]},
    "two-by-place": {"ray_node_instances": [{"name": "a"}, {"name": "b"}]},
    "one-left-by-place": {"ray_node_instances": [{"name": "b"}]},
}


# The ports of a host's one node (slot 0's) and the head's
SINGLE_PORTS = {6379, 8076, 8077, 8078, 8079, 8080, 8265, 10001, 44217, 44227, 52365}


def beyond_slot_0(got: dict) -> list[int]:
    """The ports the firewall opens for the host's instances beyond the single node's."""
    return sorted(set(got["firewall_ports"]) - SINGLE_PORTS)


def rendered_vars(extra: dict) -> dict:
    """One worker host's variables with the role's defaults and the case's variables, rendered."""
    defaults = yaml.safe_load((ROOT / "roles/ray/defaults/main.yml").read_text())
    rendered = {**defaults, **BASE, **{k: v for k, v in extra.items() if not k.startswith("__")}}
    name = rendered.get("ray_cluster_name", "")
    rendered["ray_temp_dir"] = "/tmp/ray" + (f"-{name}" if name else "")
    rendered.setdefault("ray_runtime", "host")
    if rendered.get("ray_node_instances"):
        rendered["ray_runtime"] = "container"
    rendered.update({"ray_head_address": "10.0.0.1", "ray_auth_token_path": "/srv/rayfleet/credentials/ray_auth_token",
                     "ray_dashboard_prometheus_url": "http://127.0.0.1:9090", "ray_dashboard_grafana_url": "",
                     "ray_dashboard_grafana_iframe_url": "", "ray_container_image": "registry.example.com/ray:2.60.0"})
    rendered.update(ray_admission_link_bytes="16M", ray_admission_link_ratio=0.75)
    return rendered


def planned(extra: dict) -> dict:
    """The cluster plan of one worker host (as cluster_plan gets its variables: rendered)."""
    rendered = rendered_vars(extra)
    gpu_host = any(i.get("gpus") for i in rendered.get("ray_node_instances") or [])
    return host_plan("w", rendered, ["ray_worker", "gpu"] if gpu_host else ["ray_worker"])


def node_planned(extra: dict) -> dict:
    """The ray role's second plan call on that host, given what the container probe found (BASE's)."""
    host = planned(extra)
    given = {"slots": host["slot_count"], "probe": BASE["__ray_container_probe"], "nccl": {},
             "checkpoint_env_sha256": None}
    return run_plan("ray", Call("w", rendered_vars(extra), {"node": given}))


@pytest.fixture(scope="module")
def computed(tmp_path_factory) -> dict[str, dict]:
    """The role's vars for one host per case (role defaults, then the case's host vars, then its plan), from one
    local play."""
    tmp = tmp_path_factory.mktemp("ray-vars")
    play = [{
        "hosts": "localhost", "gather_facts": False,
        "vars": {**yaml.safe_load((ROOT / "roles/ray/defaults/main.yml").read_text()),
                 **yaml.safe_load((ROOT / "roles/ray/vars/main.yml").read_text()), **BASE},
        "tasks": [{"ansible.builtin.copy": {"dest": str(tmp / f"{case}.json"), "mode": "0600", "content": SHOWN},
                   "vars": {**extra, "__ray_plan_result": {"host": planned(extra)},
                            "__ray_node_plan": node_planned(extra)}}
                  for case, extra in CASES.items()],
    }]
    (tmp / "play.yml").write_text(yaml.safe_dump(play))
    proc = subprocess.run([str(Path(sys.executable).parent / "ansible-playbook"), "-i", "localhost,", "-c", "local",
                           "-e", f"ansible_python_interpreter={sys.executable}", str(tmp / "play.yml")],
                          capture_output=True, text=True, check=False, cwd=tmp)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    return {case: json.loads((tmp / f"{case}.json").read_text()) for case in CASES}


BASE = {"ray_node_role": "worker", "ray_node_ip": "10.0.0.5",
        "__ray_container_probe": {"cpus": 16, "memtotal_mb": 65536}}


@pytest.mark.parametrize(("case", "ns"), [("one", ""), ("one-named", "-teamb")])
def test_a_hosts_one_node_keeps_its_names_and_ports(computed, case, ns):
    got = computed[case]
    assert got["units"] == [f"ray{ns}-worker.service"] and got["configs"] == [f"/etc/rayfleet/ray{ns}-worker.json"]
    assert got["first"] == {"unit": f"ray{ns}-worker.service", "config": f"/etc/rayfleet/ray{ns}-worker.json",
                            "temp": f"/tmp/ray{ns}", "container": f"ray{ns}-worker", "node_name": "",
                            "cpus": None, "object_store": None}
    (one,) = got["instances"]
    assert one["name"] == "" and one["ports"] == {
        "gcs": 6379, "dashboard": 8265, "client_server": 10001, "object_manager": 8076, "node_manager": 8077,
        "dashboard_agent_grpc": 8078, "runtime_env_agent": 8079, "metrics_export": 8080,
        "dashboard_agent_listen": 52365, "min_worker": 10002, "max_worker": 11999}


def test_three_instances_get_names_port_blocks_worker_port_slices_and_shares(computed):
    got = computed["three"]
    assert got["units"] == [f"ray-teamb-worker-gpu{i}.service" for i in range(3)]
    assert got["configs"] == [f"/etc/rayfleet/ray-teamb-worker-gpu{i}.json" for i in range(3)]
    assert got["first"]["temp"] == "/tmp/ray-teamb_gpu0" and got["first"]["node_name"] == "10.0.0.5/gpu0"
    assert got["first"]["container"] == "ray-teamb-worker-gpu0"
    assert got["first"]["cpus"] == 5 and got["first"]["object_store"] == int(65536 * 1048576 * 0.3 / 3)
    ports = [i["ports"] for i in got["instances"]]
    assert [p["node_manager"] for p in ports] == [8077, 8177, 8277]
    assert [p["dashboard_agent_listen"] for p in ports] == [52365, 52465, 52565]
    assert {p["gcs"] for p in ports} == {6379} and {p["client_server"] for p in ports} == {10001}
    # 1998 worker ports in three slices of 666, in order, none shared
    assert [(p["min_worker"], p["max_worker"]) for p in ports] == [(10002, 10667), (10668, 11333), (11334, 11999)]
    assert [i["gpus"] for i in got["instances"]] == [[0], [1], ["GPU-2"]]


def test_fixed_slots_keep_the_remaining_instance_as_it_was(computed):
    """With ray_node_instance_slots and each instance's slot set, an instance's ports, worker ports and shares are its
    slot's: taking another instance out changes nothing of it (its settings stay the same, so it is not restarted)."""
    two, one = computed["slots"], computed["slots-one-left"]
    assert [(i["name"], i["slot"]) for i in two["instances"]] == [("gpu1", 1), ("gpu3", 3)]
    ports = [i["ports"] for i in two["instances"]]
    assert [p["node_manager"] for p in ports] == [8177, 8377]
    # 1998 worker ports in 4 slices of 499; slots 1 and 3
    assert [(p["min_worker"], p["max_worker"]) for p in ports] == [(10501, 10999), (11499, 11997)]
    assert two["first"]["cpus"] == 4 and two["first"]["object_store"] == int(65536 * 1048576 * 0.3 / 4)
    assert one["instances"][0]["ports"] == two["instances"][1]["ports"]
    assert (one["first"]["cpus"], one["first"]["object_store"]) == (two["first"]["cpus"], two["first"]["object_store"])
    # the firewall opens each instance's node ports (slot 0's are the single ones, always open)
    assert beyond_slot_0(two) == sorted([p + 100 * s for s in (1, 3) for p in (8076, 8077, 8078, 8079, 8080, 52365)])
    assert beyond_slot_0(one) == [8376, 8377, 8378, 8379, 8380, 52665]


def test_without_fixed_slots_the_remaining_instance_changes(computed):
    """The default (one slot per instance, by place in the list): taking the first of two out moves the second into
    slot 0 with the whole host - its settings change, which restarts it. The README says so."""
    two, one = computed["two-by-place"], computed["one-left-by-place"]
    assert [i["slot"] for i in two["instances"]] == [0, 1] and one["instances"][0]["slot"] == 0
    assert one["instances"][0]["ports"] != two["instances"][1]["ports"]
    assert (two["first"]["cpus"], one["first"]["cpus"]) == (8, 16)
    assert beyond_slot_0(two) == [8176, 8177, 8178, 8179, 8180, 52465] and beyond_slot_0(one) == []
