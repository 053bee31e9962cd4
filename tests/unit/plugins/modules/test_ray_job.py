# SPDX-License-Identifier: GPL-3.0-or-later
"""ray_job: submit once per submission id, wait for the end, fail on a failed job (Ray's client faked)."""

from types import SimpleNamespace

from ansible_collections.rayfleet.cluster.plugins.modules import ray_job

P = {"entrypoint": "python train.py", "submission_id": None, "runtime_env": {}, "metadata": {"team": "ml"},
     "entrypoint_num_cpus": None, "entrypoint_num_gpus": None, "wait": True, "timeout": 5, "log_lines": 2}


class FakeClient:
    def __init__(self, final="SUCCEEDED", known=()):
        self.jobs = {k: final for k in known}
        self.final = final
        self.submitted = []

    def get_job_info(self, sid):
        if sid not in self.jobs:
            raise RuntimeError(f"Request failed with status code 404: Job {sid} does not exist.")
        return SimpleNamespace(message="done" if self.jobs[sid] == "SUCCEEDED" else "exit code 1")

    def submit_job(self, **kwargs):
        sid = kwargs["submission_id"] or "raysubmit_x"
        self.submitted.append(kwargs)
        self.jobs[sid] = self.final
        return sid

    def get_job_status(self, sid):
        return SimpleNamespace(value=self.jobs[sid])

    def get_job_logs(self, sid):
        return "a\nb\nc\n"


def test_submits_and_waits():
    client = FakeClient()
    result, failure = ray_job.submit_and_wait(client, dict(P), check_mode=False)
    assert failure is None and result["changed"] and result["status"] == "SUCCEEDED"
    assert result["logs"] == ["b", "c"] and client.submitted[0]["metadata"] == {"team": "ml"}


def test_existing_submission_id_is_not_submitted_again():
    client = FakeClient(known=["train-1"])
    result, failure = ray_job.submit_and_wait(client, dict(P, submission_id="train-1"), check_mode=False)
    assert failure is None and not result["changed"] and client.submitted == []


def test_failed_job_fails_with_its_message():
    result, failure = ray_job.submit_and_wait(FakeClient("FAILED"), dict(P), check_mode=False)
    assert failure == "job raysubmit_x FAILED: exit code 1" and result["status"] == "FAILED"


def test_check_mode_submits_nothing():
    client = FakeClient()
    result, failure = ray_job.submit_and_wait(client, dict(P, submission_id="new"), check_mode=True)
    assert failure is None and client.submitted == []
    assert result == {"changed": True, "status": "NOT_SUBMITTED", "submission_id": "new"}
