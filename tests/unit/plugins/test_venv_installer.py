"""rayfleet.cluster.venv_installer: the command that installs into a venv, run for real against a venv of wheels."""

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from ansible.errors import AnsibleFilterError
from ansible_collections.rayfleet.cluster.plugins.filter.venv_installer import venv_installer

WHEELHOUSE = Path(__file__).resolve().parents[3] / ".cache" / "wheels"


def _wheel(directory, name, version):
    """A pure-Python wheel of one module."""
    path = directory / f"{name}-{version}-py3-none-any.whl"
    info = f"{name}-{version}.dist-info"
    with zipfile.ZipFile(path, "w") as wheel:
        wheel.writestr(f"{name}.py", f"VALUE = {version!r}\n")
        wheel.writestr(f"{info}/METADATA", f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
        wheel.writestr(f"{info}/WHEEL",
                       "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
        wheel.writestr(f"{info}/RECORD", "")
    return path


def test_pip_installs_and_byte_compiles_into_the_venv(tmp_path):
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    _wheel(tmp_path, "rayfleet_probe_pkg", "1.2.3")
    argv = venv_installer(str(venv), False)
    assert argv[:4] == [f"{venv}/bin/python", "-m", "pip", "install"]
    done = subprocess.run([*argv, "--no-index", "--find-links", str(tmp_path), "rayfleet_probe_pkg==1.2.3"],
                          capture_output=True, text=True, check=True)
    # what the pytorch role reads to say whether it changed anything
    assert "Successfully installed" in done.stdout
    again = subprocess.run([*argv, "--no-index", "--find-links", str(tmp_path), "rayfleet_probe_pkg==1.2.3"],
                           capture_output=True, text=True, check=True)
    assert "Successfully installed" not in again.stdout
    assert list(venv.glob("lib/python*/site-packages/__pycache__/rayfleet_probe_pkg.*.pyc"))


def test_uv_is_the_venvs_own_and_byte_compiles_without_a_cache(tmp_path):
    wheels = sorted(WHEELHOUSE.glob("uv-*.whl"))
    if not wheels:
        pytest.skip(f"no uv wheel in {WHEELHOUSE} (make wheels downloads it)")
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    with zipfile.ZipFile(wheels[-1]) as wheel:
        binary = next(name for name in wheel.namelist() if name.endswith(".data/scripts/uv"))
        (venv / "bin" / "uv").write_bytes(wheel.read(binary))
    (venv / "bin" / "uv").chmod(0o755)
    _wheel(tmp_path, "rayfleet_probe_pkg", "1.2.3")
    argv = venv_installer(str(venv), True)
    assert argv[0] == f"{venv}/bin/uv" and "--compile-bytecode" in argv
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path / "home")}
    done = subprocess.run([*argv, "--no-index", "--find-links", str(tmp_path), "rayfleet_probe_pkg==1.2.3"],
                          capture_output=True, text=True, check=True, env=env)
    # what the pytorch role reads to say whether it changed anything
    assert " + rayfleet-probe-pkg==1.2.3" in done.stderr.splitlines()
    again = subprocess.run([*argv, "--no-index", "--find-links", str(tmp_path), "rayfleet_probe_pkg==1.2.3"],
                           capture_output=True, text=True, check=True, env=env)
    assert not [line for line in again.stderr.splitlines() if line.startswith((" + ", " - "))]
    assert list(venv.glob("lib/python*/site-packages/__pycache__/rayfleet_probe_pkg.*.pyc"))
    assert not (tmp_path / "home" / ".cache" / "uv").exists()


@pytest.mark.parametrize("venv", ["", "venv", None, ["/opt"]])
def test_a_venv_that_is_not_an_absolute_path_is_refused(venv):
    with pytest.raises(AnsibleFilterError, match="absolute path"):
        venv_installer(venv, True)
