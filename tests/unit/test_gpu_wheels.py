# SPDX-License-Identifier: GPL-3.0-or-later
"""tools/gpu_wheels.py slims Ray's wheel for a GPU host without network: what it drops, and a RECORD that matches."""

import importlib.util
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("gpu_wheels", ROOT / "tools" / "gpu_wheels.py")
gpu_wheels = importlib.util.module_from_spec(spec)
spec.loader.exec_module(gpu_wheels)

MEMBERS = {
    "ray/__init__.py": b"# ray\n",
    "ray/_raylet.so": b"\x7fELF" + b"0" * 64,
    "ray/jars/ray_dist.jar": b"PK" + b"1" * 4096,
    "ray/rllib/__init__.py": b"# rllib\n",
    "ray/dashboard/client/build/static/js/main.js": b"console.log(1)\n",
    "ray/dashboard/client/build/static/js/main.js.map": b"{}" * 512,
}


def fake_wheel(path: Path) -> None:
    record = "".join(f"{name},sha256=x,{len(data)}\n" for name, data in MEMBERS.items())
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in MEMBERS.items():
            zf.writestr(name, data)
        zf.writestr("ray-2.60.0.dist-info/METADATA", "Name: ray\nVersion: 2.60.0\n")
        zf.writestr("ray-2.60.0.dist-info/RECORD",
                    record + "ray-2.60.0.dist-info/METADATA,sha256=y,30\nray-2.60.0.dist-info/RECORD,,\n")


def test_slim_drops_jars_rllib_and_source_maps_and_rewrites_record(tmp_path):
    wheel = tmp_path / "ray-2.60.0-cp312-cp312-manylinux2014_x86_64.whl"
    fake_wheel(wheel)
    before, after = gpu_wheels.slim(wheel)
    assert after < before
    with zipfile.ZipFile(wheel) as zf:
        names = set(zf.namelist())
        record = zf.read("ray-2.60.0.dist-info/RECORD").decode()
        assert zf.read("ray/_raylet.so") == MEMBERS["ray/_raylet.so"]
    assert names == {"ray/__init__.py", "ray/_raylet.so", "ray/dashboard/client/build/static/js/main.js",
                     "ray-2.60.0.dist-info/METADATA", "ray-2.60.0.dist-info/RECORD"}
    listed = {line.split(",", 1)[0] for line in record.splitlines()}
    assert listed == names, listed ^ names


def test_pins_come_from_the_ray_role_and_requirements():
    ray = gpu_wheels.pinned(ROOT / "roles/ray/defaults/main.yml", r'^ray_version:\s*"?([0-9.]+)"?', "ray_version")
    core = gpu_wheels.pinned(ROOT / "requirements-dev.txt", r"^ansible-core==([0-9.]+)", "the ansible-core pin")
    assert ray.count(".") == 2 and core.startswith("2.")
