# SPDX-License-Identifier: GPL-3.0-or-later
"""The PyTorch plan (plugins/plugin_utils/pytorch_plan.py): the pytorch role's variables checked, each bad one named
with the host, and what pip installs with which arguments, as the role's Jinja computed them before."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar, trust_as_template
from ansible_collections.rayfleet.cluster.plugins.plugin_utils.pytorch_plan import (
    PYTORCH_VARS,
    PlanError,
    pytorch_plan,
)

ROOT = Path(__file__).resolve().parents[3]
DEFAULTS = yaml.safe_load((ROOT / "roles/pytorch/defaults/main.yml").read_text())
# The role's defaults as the task renders them (pytorch_venv_dir from ray_venv_dir)
RENDERED = {**{name: DEFAULTS[name] for name in PYTORCH_VARS}, "pytorch_venv_dir": "/opt/rayfleet/venv"}
# What main.yml's pip task computed in Jinja before the plan (its name and extra_args)
JINJA_PACKAGES = "{{ ['torch==' ~ pytorch_version] + pytorch_extra_packages }}"
JINJA_PIP_ARGS = ("{{ ((['--find-links ' ~ pytorch_find_links] if pytorch_find_links else [])"
                  " + (['--index-url ' ~ pytorch_index_url] if pytorch_index_url else [])) | join(' ') }}")


def settings(**extra) -> dict:
    return {**RENDERED, **extra}


def problems(**extra) -> list[str]:
    with pytest.raises(PlanError) as info:
        pytorch_plan("node7", settings(**extra))
    assert str(info.value) == " ".join(info.value.problems)
    assert all(p.startswith("pytorch on node7: ") for p in info.value.problems), info.value.problems
    return info.value.problems


def jinja(template, variables):
    return Templar(loader=DataLoader(), variables=variables).template(trust_as_template(template))


def test_the_defaults_pass():
    assert pytorch_plan("node7", settings()) == {"packages": ["torch==2.13.0"], "extra_names": [], "pip_args": ""}


def test_the_extra_packages_names_are_what_the_venv_records():
    """The role records these in the venv and removes one taken out of pytorch_extra_packages."""
    got = pytorch_plan("node7", settings(pytorch_extra_packages=["torchvision==0.29.1", "Torch_Audio[extra] >= 2.13",
                                                                 "tzdata==2026.6"]))
    assert got["extra_names"] == ["torch-audio", "torchvision", "tzdata"]


@pytest.mark.parametrize("extra", [
    {},
    {"pytorch_find_links": "/opt/rayfleet-wheels"},
    {"pytorch_index_url": "https://download.pytorch.org/whl/cu128"},
    {"pytorch_find_links": "file:///srv/wheels", "pytorch_index_url": "http://10.0.0.5:8080/simple",
     "pytorch_extra_packages": ["torchvision==0.29.1", "torchaudio[extra] >= 2.13"]},
    {"pytorch_version": "2.13.0+cpu", "pytorch_extra_packages": ["torchvision~=0.29"]},
])
def test_what_pip_gets_is_what_the_roles_jinja_computed(extra):
    v = settings(**extra)
    got = pytorch_plan("node7", v)
    assert got["packages"] == jinja(JINJA_PACKAGES, v)
    assert got["pip_args"] == jinja(JINJA_PIP_ARGS, v)


@pytest.mark.parametrize(("var", "value", "expected"), [
    ("pytorch_version", "latest", 'pytorch_version is "latest"; expected a torch release like 2.13.0 (quoted), '
                                  "optionally with a local build tag such as +cpu."),
    ("pytorch_version", 2.13, "pytorch_version is 2.13; expected a torch release"),
    ("pytorch_version", "2", 'pytorch_version is "2"; expected'),
    ("pytorch_version", "2.13.0+", 'pytorch_version is "2.13.0+"; expected'),
    ("pytorch_index_url", "ftp://mirror/simple", 'pytorch_index_url is "ftp://mirror/simple"; expected empty (PyPI) '
                                                 "or an http://, https:// or file:// URL, without blanks"),
    ("pytorch_index_url", "https://", 'pytorch_index_url is "https://"; expected empty'),
    ("pytorch_index_url", "/srv/index", 'pytorch_index_url is "/srv/index"; expected empty'),
    ("pytorch_index_url", None, "pytorch_index_url is null; expected empty"),
    ("pytorch_find_links", "wheels/", 'pytorch_find_links is "wheels/"; expected empty, an absolute path on the '
                                      "nodes or an http://, https:// or file:// URL, without blanks."),
    ("pytorch_find_links", "/srv/my wheels", 'pytorch_find_links is "/srv/my wheels"; expected empty'),
    ("pytorch_venv_dir", "venv", 'pytorch_venv_dir is "venv"; expected an absolute path (the Ray venv).'),
    ("pytorch_extra_packages", "torchvision==0.29.1",
     'pytorch_extra_packages is "torchvision==0.29.1"; expected a list of pinned requirements'),
    ("pytorch_extra_packages", ["torchvision==0.29.1", "torchaudio", "==1", 3],
     'pytorch_extra_packages has ["torchaudio", "==1", 3]; expected each pinned to match torch, like '
     "torchvision==0.29.1."),
])
def test_each_bad_variable_is_named_alone(var, value, expected):
    (problem,) = problems(**{var: value})
    assert problem.startswith("pytorch on node7: " + expected), problem


def test_an_offline_site_asks_no_index_and_needs_its_wheel_directory():
    offline = pytorch_plan("node7", settings(pytorch_no_index=True, pytorch_find_links="/opt/rayfleet-wheels"))
    assert offline["pip_args"] == "--no-index --find-links /opt/rayfleet-wheels"
    # as -e pytorch_no_index=true gives it: a string
    assert pytorch_plan("node7", settings(pytorch_no_index="true", pytorch_find_links="/w"))["pip_args"] == (
        "--no-index --find-links /w")
    (problem,) = problems(pytorch_no_index=True)
    assert problem == ("pytorch on node7: pytorch_no_index is true and pytorch_find_links is empty; expected a "
                       "wheel directory in pytorch_find_links that holds torch and its dependencies (pip asks no "
                       "index).")
    (problem,) = problems(pytorch_no_index=True, pytorch_find_links="/w",
                          pytorch_index_url="https://download.pytorch.org/whl/cpu")
    assert problem.startswith('pytorch on node7: pytorch_no_index is true and pytorch_index_url is '
                              '"https://download.pytorch.org/whl/cpu"; expected one of them'), problem
    (problem,) = problems(pytorch_no_index="sometimes")
    assert problem == 'pytorch on node7: pytorch_no_index is "sometimes"; expected true or false.'


def test_every_problem_is_named_at_once():
    found = problems(pytorch_version="latest", pytorch_index_url="x", pytorch_find_links="y", pytorch_no_index="n/a",
                     pytorch_venv_dir="z", pytorch_extra_packages=["a"])
    assert [p.split(" ")[3] for p in found] == list(PYTORCH_VARS)
