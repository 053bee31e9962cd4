# rayfleet — a newcomer on a fresh Debian 12 machine needs two commands:
#   make demo    a local 3-node Ray cluster (podman hosts), built by site.yml
#   make test    everything CI checks (lint, sanity, unit, aws, gpu-stack, molecule, bake)
SHELL := /bin/bash
.DEFAULT_GOAL := help

VENV      ?= .venv
PYTHON    ?= python3
WORKERS   ?= 2
SANDBOX   ?= demo
SUDO      := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
APT_PKGS  := podman runc netavark aardvark-dns iptables debootstrap openssh-client rsync iproute2 python3-venv shellcheck

export PATH := $(CURDIR)/$(VENV)/bin:$(PATH)
export CONTAINERS_CONF := $(CURDIR)/sandbox/containers.conf
export ANSIBLE_CONFIG := $(CURDIR)/ansible.cfg
export PYTHONDONTWRITEBYTECODE := 1

.PHONY: help deps venv image node-image wheels demo demo-down doctor dashboard logs test test-full test-ubuntu lint sanity unit aws gpu-stack molecule molecule-full bake bake-full bench-converge bench-bake bench-join bench-collective bench-localize bench-check test-gpu gpu-wheels bench-gpu collection docs clean

help:
	@echo "make demo [WORKERS=N] [SUBMIT=1]  local Ray cluster on podman hosts, SUBMIT=1 adds a submit host (make demo-down removes it)"
	@echo "make test              (lint + sanity + unit + aws beside gpu-stack) + molecule + bake, with per-stage durations (the CI gate)"
	@echo "make test-full         make test with every verify module (adds Apex, checkpoint store, submit host, containers)"
	@echo "                       and test-ubuntu: the molecule scenario on Ubuntu 24.04 hosts (RAYFLEET_SANDBOX_DISTRO=ubuntu2404)"
	@echo "make doctor [INVENTORY=inventories/x]  every host as site.yml reaches it: SSH, become, python, OS"
	@echo "make logs [INVENTORY=inventories/x]    every node's Ray logs and unit journals into artifacts/logs/"
	@echo "make dashboard [INVENTORY=inventories/x]  SSH tunnel to the head's Ray dashboard; prints the URL"
	@echo "make unit | aws | lint | sanity | gpu-stack | molecule | molecule-full | bake | bench-converge | bench-collective"
	@echo "make bench-localize    the preflight's slow-node search on a simulated cluster (no Ray): rounds, pair tests,"
	@echo "                       wall time, false positives/negatives for 8-1024 nodes -> docs/benchmarks.md"
	@echo "make test-gpu (on a GPU host) | make gpu-wheels (Ray + ansible-core for a GPU host without network)"
	@echo "make collection        the collection tarball (ansible-galaxy collection build) -> $(COLLECTION_DIR)/"
	@echo "make docs              the module, plugin and role reference (antsibull-docs) -> $(REFERENCE_DIR)/"

deps:  ## system packages the sandbox needs (Debian/Ubuntu)
	@missing=$$(for p in $(APT_PKGS); do dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q '^install ok installed' || echo $$p; done); \
	if [ -n "$$missing" ]; then \
	  echo "installing:" $$missing; \
	  $(SUDO) apt-get update -q && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -q --no-install-recommends $$missing; \
	fi

venv: $(VENV)/.installed
$(VENV)/.installed: requirements-dev.txt
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install -q -r requirements-dev.txt
	touch $@

image: deps
	tools/sandbox.py image

# The Ray node image of containerized nodes (images/ray-node on the sandbox host image, Ray at the ray role's
# version, with the wheelhouse's torch) in two tags, saved in .cache/images/ for the ray role to load
# (ray_container_image_archive)
node-image: image venv wheels
	tools/sandbox.py node-image

# The sandbox hosts' wheelhouse (mounted read-only): a CPU build of the pinned torch, as they have no GPU, with its
# dependencies for Debian 12's Python (3.11): those hosts install torch from the wheelhouse alone (pytorch_no_index).
# pip takes it from a local mirror where one is configured (find-links), else from the index.
TORCH_VERSION := $(shell sed -n 's/^pytorch_version: "\(.*\)"/\1/p' roles/pytorch/defaults/main.yml)
# and NVIDIA's NCCL wheel the sandbox pins (NCCL's library and bootstrap need no GPU), uv at the ray role's pinned
# version (ray_installer uv installs with it), and Ray at the ray role's
# pinned version with its extras, NVML bindings and dependencies, for the hosts' Python (Debian 12's 3.11, Ubuntu
# 24.04's 3.12): the sandbox installs Ray from the wheelhouse alone (ray_pip_extra_args: --no-index), as an offline
# site does, so N hosts do not download the same wheels N times.
NCCL_VERSION := $(shell sed -n 's/^nccl_wheel_version: "\(.*\)"/\1/p' inventories/sandbox/group_vars/all/nccl.yml)
RAY_VERSION := $(shell sed -n 's/^ray_version: "\(.*\)"/\1/p' roles/ray/defaults/main.yml)
RAY_EXTRAS := $(shell sed -n 's/^ray_pip_extras: \[\(.*\)\]/\1/p' roles/ray/defaults/main.yml | tr -d ' ')
NVML_PACKAGE := $(shell sed -n 's/^ray_nvml_package: "\(.*\)"/\1/p' roles/ray/defaults/main.yml)
UV_VERSION := $(shell sed -n 's/^ray_uv_version: "\(.*\)"/\1/p' roles/ray/defaults/main.yml)
HOST_PYTHONS := 3.11 3.12
# and Ray Train's dependencies (the checkpoint store's, ray[train] at that version) for Python 3.11, installed from the
# wheelhouse alone too (checkpoint_store_no_index, default pytorch_no_index).
# The manylinux platforms whose wheels run on the hosts
MANYLINUX := $(foreach tag,manylinux_2_28 manylinux_2_17 manylinux2014 manylinux_2_5 manylinux1,--platform $(tag)_$(shell uname -m))
wheels: venv
	@for py in $(HOST_PYTHONS); do \
	  done=.cache/wheels/.ray-$(RAY_VERSION)-$(RAY_EXTRAS)-py$$py; test -f $$done && continue; \
	  echo "downloading Ray $(RAY_VERSION) and its dependencies for Python $$py into .cache/wheels"; \
	  pip download -q --only-binary=:all: --python-version $$py $(MANYLINUX) -d .cache/wheels \
	    "ray[$(RAY_EXTRAS)]==$(RAY_VERSION)" "$(NVML_PACKAGE)" && touch $$done || exit 1; done
	@ls .cache/wheels/torch-$(TORCH_VERSION)[-+]*.whl >/dev/null 2>&1 || \
	  pip download -q --no-deps --only-binary=:all: --python-version 3.11 \
	    --platform manylinux_2_28_$$(uname -m) -d .cache/wheels "torch==$(TORCH_VERSION)"
	@ls .cache/wheels/torch-$(TORCH_VERSION)[-+]*.whl
	@test -f .cache/wheels/.torch-$(TORCH_VERSION)-deps-py3.11 || { \
	  echo "downloading torch $(TORCH_VERSION)'s dependencies for Python 3.11 into .cache/wheels"; \
	  pip download -q --only-binary=:all: --python-version 3.11 --platform manylinux_2_28_$$(uname -m) \
	    --platform manylinux_2_17_$$(uname -m) --platform manylinux2014_$$(uname -m) \
	    --find-links .cache/wheels -d .cache/wheels "torch==$(TORCH_VERSION)" \
	  && touch .cache/wheels/.torch-$(TORCH_VERSION)-deps-py3.11; }
	@test -f .cache/wheels/.ray-train-$(RAY_VERSION)-py3.11 || { \
	  echo "downloading Ray Train's dependencies (the checkpoint store's) for Python 3.11 into .cache/wheels"; \
	  pip download -q --only-binary=:all: --python-version 3.11 $(MANYLINUX) \
	    --find-links .cache/wheels -d .cache/wheels "ray[train]==$(RAY_VERSION)" \
	  && touch .cache/wheels/.ray-train-$(RAY_VERSION)-py3.11; }
	@ls .cache/wheels/nvidia_nccl_cu13-$(NCCL_VERSION)-*.whl >/dev/null 2>&1 || \
	  pip download -q --no-deps --only-binary=:all: --python-version 3.11 \
	    --platform manylinux_2_18_$$(uname -m) -d .cache/wheels "nvidia-nccl-cu13==$(NCCL_VERSION)"
	@ls .cache/wheels/nvidia_nccl_cu13-$(NCCL_VERSION)-*.whl
	@ls .cache/wheels/uv-$(UV_VERSION)-*.whl >/dev/null 2>&1 || \
	  pip download -q --no-deps --only-binary=:all: --python-version 3.11 $(MANYLINUX) -d .cache/wheels \
	    "uv==$(UV_VERSION)"
	@ls .cache/wheels/uv-$(UV_VERSION)-*.whl

demo: deps venv image wheels
	tools/sandbox.py up --name $(SANDBOX) --workers $(WORKERS) $(if $(SUBMIT),--submit) > /dev/null
	RAYFLEET_SANDBOX=$(SANDBOX) ansible-playbook site.yml -i inventories/sandbox
	@RAYFLEET_SANDBOX=$(SANDBOX) tools/summary.py

demo-down:
	tools/sandbox.py down --name $(SANDBOX)

INVENTORY ?= inventories/sandbox
doctor: venv  ## every inventory host as site.yml reaches it: SSH, become, python, OS (playbooks/doctor.yml)
	RAYFLEET_SANDBOX=$(SANDBOX) ansible-playbook playbooks/doctor.yml -i $(INVENTORY)

dashboard: venv  ## an SSH tunnel (host key verified) to the head's Ray dashboard and Jobs API; prints the URL
	RAYFLEET_SANDBOX=$(SANDBOX) PYTHONPATH=library_py python -m rayfleet.dashboard -i $(INVENTORY) $(DASHBOARD_ARGS)

logs: venv  ## every node's Ray logs and the rayfleet units' journal -> artifacts/logs/<time>/
	RAYFLEET_SANDBOX=$(SANDBOX) ansible-playbook playbooks/logs.yml -i $(INVENTORY)

# make test is the CI gate: the verify modules marked extended (Apex, the checkpoint store, the submit host, Ray in
# podman and docker containers, the spot-notice drain, the health timer: about 32 minutes together on two CPUs) run in
# make test-full. The static checks run beside the gpu-stack scenario (dpkg unpacking the CUDA toolkit on one core):
# two single-core jobs on two cores. The Ray sandboxes (molecule, bake) run alone: their fault tests wait on real
# timeouts.
STAGES_FIRST := gpu-stack+lint,sanity,unit,aws
test: deps venv
	tools/stages.py $(STAGES_FIRST) molecule bake

test-full: deps venv
	tools/stages.py $(STAGES_FIRST) molecule-full bake-full test-ubuntu

# The molecule scenario on Ubuntu 24.04 LTS hosts (the usual OS of GPU hosts and cloud images) instead of Debian 12.
# Their Python is 3.12, for which there is no CPU torch wheel here: pip takes PyPI's CUDA build (about 4 GB a host).
test-ubuntu: deps venv wheels
	RAYFLEET_SANDBOX_DISTRO=ubuntu2404 tools/sandbox.py image
	RAYFLEET_SANDBOX_DISTRO=ubuntu2404 PYTEST_ADDOPTS="-m 'not extended'" molecule test

# CHANGELOG.md is rendered from changelogs/changelog.yaml: lint fails on a bad fragment and on a CHANGELOG.md that
# was edited by hand or not regenerated (antsibull-changelog generate). Likewise the plugins' and roles' docs
# (schema, markup, references) and docs/reference/, which must be what make docs writes.
LINT_TMP := .cache/lint
lint: venv
	ruff check .
	ansible-lint
	antsibull-changelog lint
	mkdir -p $(LINT_TMP)
	antsibull-changelog generate --output $(LINT_TMP)/CHANGELOG.md --output-format md
	diff -u CHANGELOG.md $(LINT_TMP)/CHANGELOG.md
	antsibull-docs lint-collection-docs --plugin-docs .
	rm -rf $(LINT_TMP)/reference && mkdir -p $(LINT_TMP)/reference
	$(REFERENCE_BUILD) --dest-dir $(LINT_TMP)/reference rayfleet.cluster
	@diff -r -q $(REFERENCE_DIR) $(LINT_TMP)/reference || { echo "$(REFERENCE_DIR) is stale: run make docs"; exit 1; }

sanity: venv
	tools/ansible-test.sh sanity --python 3.11

unit: venv
	pytest -q tests/unit

# On a GPU host (the project's GPU machine): needs only python3 with torch, nvidia-ml-py and pytest - no venv, no
# network. Without an NVIDIA GPU every test skips saying so. The Ray and Ansible tests (a head started as the unit
# starts it, gpu_check / collective_check through ansible-core) need Ray and ansible-core: `make gpu-wheels` on a
# machine with network, copy .cache/gpu-wheels along, and test-gpu installs them (no index) into .cache/gpu-site.
GPU_PYTHON ?= python3
GPU_PYVER  ?= 3.12
GPU_SITE   := $(CURDIR)/.cache/gpu-site
test-gpu:
	@if ls .cache/gpu-wheels/*.whl >/dev/null 2>&1; then \
	  echo "installing the carried wheels (.cache/gpu-wheels) into $(GPU_SITE)"; \
	  $(GPU_PYTHON) -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
	    --target $(GPU_SITE) .cache/gpu-wheels/*.whl; fi
	PYTHONPATH=library_py:$(GPU_SITE) $(GPU_PYTHON) -m pytest -q -rs -s -p no:cacheprovider --durations=0 tests/gpu
	$(GPU_PYTHON) tools/bench_gpu.py

gpu-wheels:  ## wheels test-gpu needs on a GPU host without network (Ray slimmed, ansible-core) -> .cache/gpu-wheels
	$(PYTHON) tools/gpu_wheels.py --python-version $(GPU_PYVER)

bench-gpu:  ## gpu_check's NVML reading vs an nvidia-smi subprocess -> artifacts/bench-gpu.json
	$(GPU_PYTHON) tools/bench_gpu.py

aws: venv  ## AWS inventory and AMI paths against moto's server on loopback (no AWS account, no traffic out)
	pytest -q -p no:cacheprovider tests/aws

molecule: deps venv image wheels
	PYTEST_ADDOPTS="-m 'not extended'" molecule test

molecule-full: deps venv image wheels node-image
	molecule test

gpu-stack: deps venv image  ## the GPU-stack roles on a sandbox host without a GPU (Debian non-free driver)
	molecule test -s gpu_stack

bake: deps venv image wheels  ## playbooks/bake.yml end to end: bare builder -> image -> 3 hosts from it -> site.yml
	pytest -q -p no:cacheprovider --durations=0 -m 'not extended' tests/bake

bake-full: deps venv image wheels  ## make bake, and a Ray Train run resumed on a spot reclaim's booted replacement
	pytest -q -p no:cacheprovider --durations=0 tests/bake

bench-converge: deps venv image wheels  ## site.yml first run vs the hand-install floor, idempotent and one-drift re-runs (wall, controller CPU), ray start floor -> docs/benchmarks.md
	tools/bench_converge.py --workers $(WORKERS)
	tools/bench_report.py

bench-bake: deps venv image wheels  ## baked image vs bare hosts: boot to Ray alive, to verified -> docs/benchmarks.md
	tools/bench_bake.py --workers $(WORKERS)
	tools/bench_report.py

bench-join: deps venv image wheels  ## site.yml joining a bare host to a network-membership cluster and removing it -> docs/benchmarks.md
	tools/bench_join.py --workers $(WORKERS)
	tools/bench_report.py

bench-collective: deps venv image wheels  ## gloo busbw vs iperf3 on the sandbox, preflight time -> docs/benchmarks.md
	tools/bench_collective.py --workers $(WORKERS)
	tools/bench_report.py

# Python's standard library only (rayfleet.localize on its bandwidth model): no venv, no sandbox, about a minute.
# LOCALIZE_ARGS passes options, e.g. LOCALIZE_ARGS="--trials 100 --seed 2"
bench-localize:  ## the preflight's pair tests finding slow nodes on a simulated cluster -> docs/benchmarks.md
	$(PYTHON) tools/bench_localize.py $(LOCALIZE_ARGS)
	$(PYTHON) tools/bench_report.py

bench-check: venv  ## the offline inventory check on 10, 100 and 1000 hosts (no host contacted) -> docs/benchmarks.md
	tools/bench_check.py $(CHECK_ARGS)
	tools/bench_report.py

# The collection as Galaxy and `ansible-galaxy collection install` take it; galaxy.yml's build_ignore keeps local
# state (venv, sandbox, caches, artifacts) out of it.
COLLECTION_DIR ?= artifacts/collection
collection: venv
	mkdir -p $(COLLECTION_DIR)
	ansible-galaxy collection build --force --output-path $(COLLECTION_DIR) .

# The module, plugin and role reference, from the plugins' DOCUMENTATION and the roles' argument specs, as
# reStructuredText (antsibull-docs writes no Markdown). ansible.cfg's collections_path resolves this checkout as
# rayfleet.cluster; --cleanup everything removes pages of plugins that are gone.
REFERENCE_DIR := docs/reference
REFERENCE_BUILD := antsibull-docs collection --use-current --fail-on-error --output-format simplified-rst \
	--squash-hierarchy --no-add-antsibull-docs-version --cleanup everything
docs: venv
	mkdir -p $(REFERENCE_DIR)
	$(REFERENCE_BUILD) --dest-dir $(REFERENCE_DIR) rayfleet.cluster

clean: demo-down
	rm -rf .cache tests/output artifacts
