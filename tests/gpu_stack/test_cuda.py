# SPDX-License-Identifier: GPL-3.0-or-later
"""The cuda role on a sandbox host without a GPU (cuda_force via nvidia_driver_force): Debian 12's CUDA 11.8.

The toolkit is real here: nvcc must report the pinned release and build a kernel for Hopper (sm_90), checked in the
object's embedded cubin. Running that kernel needs a GPU and is not tried.
"""

import json
from pathlib import Path

import yaml

testinfra_hosts = ["ansible://nvidia"]

ROOT = Path(__file__).resolve().parents[2]
DEBIAN = yaml.safe_load((ROOT / "roles/cuda/vars/Debian.yml").read_text())["__cuda_distribution"]

KERNEL = """\
__global__ void axpy(float a, const float *x, float *y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}
"""


def test_nvcc_is_the_pinned_release(host):
    out = host.check_output("/usr/bin/nvcc --version")
    assert f"release {DEBIAN['version']}," in out, out


def test_login_shells_get_cuda_home(host):
    profile = host.file("/etc/profile.d/rayfleet-cuda.sh")
    assert profile.exists and profile.user == "root" and profile.mode == 0o644
    assert host.check_output("bash -lc 'echo $CUDA_HOME'") == DEBIAN["home"]
    assert host.check_output("bash -lc 'echo $CUDAHOSTCXX'") == DEBIAN["host_compiler"]


def test_nvcc_builds_a_hopper_kernel_in_a_login_shell(host):
    """The profile's environment (host compiler g++-11 for CUDA 11.8) is what makes a plain nvcc call work."""
    script = ("d=$(mktemp -d) && cat > $d/axpy.cu <<'EOF'\n" + KERNEL + "EOF\n"
              "cd $d && nvcc -arch=sm_90 -c axpy.cu -o axpy.o && cuobjdump --list-elf axpy.o; rc=$?; rm -rf $d; "
              "exit $rc")
    build = host.run("bash -lc %s", script)
    assert build.rc == 0, build.stderr
    assert "sm_90" in build.stdout, build.stdout


def test_state_record(host):
    state = json.loads(host.file("/etc/rayfleet/cuda.json").content_string)
    assert state == {"source": "distribution", "version": DEBIAN["version"], "home": DEBIAN["home"],
                     "packages": DEBIAN["packages"]}
