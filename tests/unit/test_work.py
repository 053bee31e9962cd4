# SPDX-License-Identifier: GPL-3.0-or-later
"""rayfleet.work on Ray's own GCS tables (job, actor and resource-usage records shaped as Ray's protobufs): what a
restart of the cluster or of one node would end, and Ray's own bookkeeping left out."""

from types import SimpleNamespace as NS

from rayfleet.work import Job, Work, find_node, held_resources, live_actors, running_jobs, wait_idle

HEAD, WORKER = bytes.fromhex("aa" * 28), bytes.fromhex("bb" * 28)


def job(job_id, namespace, node, dead=False, submission=""):
    return NS(job_id=bytes.fromhex(job_id), is_dead=dead, entrypoint="python train.py" if submission else "",
              config=NS(ray_namespace=namespace, metadata={"job_submission_id": submission} if submission else {}),
              driver_address=NS(node_id=node, ip_address="10.0.0.10" if node == HEAD else "10.0.0.11"),
              driver_ip_address="")


JOBS = {1: job("01000000", "_ray_internal_dashboard", HEAD),   # the dashboard agent's own
        2: job("02000000", "9d39", HEAD, submission="train-7"),
        3: job("03000000", "c0ff", WORKER),                     # a driver run on the worker (ray.init)
        4: job("04000000", "c0ff", WORKER, dead=True),
        5: job("05000000", "_rayfleet", WORKER)}                # an admission link check's client


def actor(actor_id, state, namespace, node, name="", class_name="Trainer"):
    return NS(actor_id=bytes.fromhex(actor_id), state=state, ray_namespace=namespace, node_id=node, name=name,
              class_name=class_name, job_id=bytes.fromhex("02000000"),
              address=NS(ip_address="10.0.0.10" if node == HEAD else "10.0.0.11"))


ACTORS = {1: actor("01", 2, "SUPERVISOR_ACTOR_RAY_NAMESPACE", HEAD, "_ray_internal_job_actor_train-7",
                   "JobSupervisor"),
          2: actor("02", 2, "9d39", WORKER, "ps"),
          3: actor("03", 4, "9d39", WORKER),                    # dead
          4: actor("04", 3, "9d39", HEAD),                      # restarting: still the job's
          5: actor("05", 2, "_rayfleet", WORKER, class_name="_Rank")}


def test_the_cluster_scope_has_every_live_job_and_actor_but_rays_and_rayfleets_own():
    assert [j.job_id for j in running_jobs(JOBS)] == ["02000000", "03000000"]
    assert [a.actor_id for a in live_actors(ACTORS)] == ["02", "04"]
    work = Work(jobs=running_jobs(JOBS), actors=live_actors(ACTORS))
    assert work.describe() == ("job train-7 ('python train.py' on 10.0.0.10); driver job 03000000 (on 10.0.0.11); "
                               "actor Trainer 'ps' of job 02000000 on 10.0.0.11; "
                               "actor Trainer of job 02000000 on 10.0.0.10")
    assert not work.to_dict()["idle"]


def test_the_node_scope_has_its_drivers_actors_and_held_resources_only():
    node = WORKER.hex()
    assert [j.job_id for j in running_jobs(JOBS, node)] == ["03000000"]
    assert [a.actor_id for a in live_actors(ACTORS, node)] == ["02"]
    usage = NS(resource_usage_data=NS(batch=[
        NS(node_id=HEAD, resources_total={"CPU": 4.0}, resources_available={"CPU": 1.0}),
        NS(node_id=WORKER, resources_total={"CPU": 8.0, "GPU": 1.0, "memory": 1e9},
           resources_available={"CPU": 6.0, "GPU": 1.0, "memory": 5e8})]))
    assert held_resources(usage, node) == {"CPU": 2.0}
    assert held_resources(usage, "cc" * 28) == {}
    idle = Work(node_ip="10.0.0.11")
    assert not idle and idle.describe() == "nothing" and idle.to_dict()["idle"]
    assert Work(node_ip="10.0.0.11", held={"CPU": 2.0, "GPU": 0.5}).describe() == (
        "tasks holding 2 CPU, 0.5 GPU on 10.0.0.11")


def test_a_node_is_found_by_its_name_where_it_has_one_else_by_its_ip_and_alive_only():
    nodes = [{"node_id": "dead", "node_ip": "10.0.0.11", "node_name": "10.0.0.11", "state": "DEAD"},
             {"node_id": "w", "node_ip": "10.0.0.11", "node_name": "10.0.0.11", "state": "ALIVE"},
             {"node_id": "g1", "node_ip": "10.0.0.11", "node_name": "10.0.0.11/gpu1", "state": "ALIVE"}]
    assert find_node(nodes, "10.0.0.11") == "w"
    assert find_node(nodes, "10.0.0.11", "10.0.0.11/gpu1") == "g1"
    assert find_node(nodes, "10.0.0.12") is None


def test_wait_idle_reads_until_the_work_ends_or_the_time_is_up():
    busy, idle = Work(held={"CPU": 1.0}), Work()
    readings = iter([busy, busy, idle])
    now = [0.0]
    assert wait_idle(lambda: next(readings), 60, clock=lambda: now[0],
                     sleep=lambda s: now.__setitem__(0, now[0] + s)) is idle
    assert now[0] == 10.0
    now[0] = 0.0
    assert wait_idle(lambda: busy, 12, clock=lambda: now[0], sleep=lambda s: now.__setitem__(0, now[0] + s)) is busy
    assert now[0] == 12.0


def test_a_hosts_nodes_are_read_from_their_settings_files_head_for_the_cluster_worker_for_itself(
        tmp_path, monkeypatch):
    """What a reboot of a host would end: its head node's cluster work, its worker node's own, once each; files that
    are not a node's settings are passed over."""
    import json

    from rayfleet import work

    ray = tmp_path / "ray"
    head = {"role": "head", "node_ip": "10.0.0.10", "ray_bin": str(ray), "ports": {"gcs": 6380},
            "auth_token_path": "/etc/rayfleet/auth-token"}
    worker = {"role": "worker", "node_ip": "10.0.0.10", "ray_bin": str(ray), "head_address": "10.0.0.9",
              "node_name": "10.0.0.10/gpu1"}
    (tmp_path / "ray-head.json").write_text(json.dumps(head))
    (tmp_path / "rayb-worker.json").write_text(json.dumps(worker))
    (tmp_path / "nvidia-driver.json").write_text(json.dumps({"version": "580.95.05"}))
    (tmp_path / "ray-broken.json").write_text("{")
    calls = []
    shared = Job(job_id="02000000", submission_id="train-7", entrypoint="python train.py", driver_ip="10.0.0.10")

    def read(address, node_ip="", node_name=None, timeout=10, auth_token_path=None):
        calls.append((address, node_ip, node_name, auth_token_path))
        return Work(node_ip=node_ip or "10.0.0.10", jobs=[shared], held={"GPU": 1.0} if node_ip else {})

    monkeypatch.setattr(work, "read_work", read)
    found = work.settings_work(str(p) for p in tmp_path.glob("*.json"))
    assert calls == [("10.0.0.10:6380", "", None, "/etc/rayfleet/auth-token"),
                     ("10.0.0.9:6379", "10.0.0.10", "10.0.0.10/gpu1", None)]
    both = work.merged(found)
    assert [j.job_id for j in both.jobs] == ["02000000"]
    assert both.describe() == "job train-7 ('python train.py' on 10.0.0.10); tasks holding 1 GPU on 10.0.0.10"
    assert not work.merged([])
