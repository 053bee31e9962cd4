# SPDX-License-Identifier: GPL-3.0-or-later
"""A stand-in for NVIDIA Apex's source tree, for the apex role's tests only (Apex itself lives on GitHub, which the
test machines must not reach). It builds the way Apex does - setup.py flags --cpp_ext/--cuda_ext (or APEX_CPP_EXT),
a torch C++ extension compiled against the installed torch (pip wheel --no-build-isolation) - so the role's build,
wheel cache and install run for real; it is not Apex and provides only `apex_C.flatten/unflatten`."""

import os
import sys

from setuptools import find_packages, setup
from torch.utils.cpp_extension import BuildExtension, CppExtension

ext_modules = []
cpp_ext = os.environ.get("APEX_CPP_EXT") == "1"
for flag in ("--cpp_ext", "--cuda_ext"):
    if flag in sys.argv:
        sys.argv.remove(flag)
        cpp_ext = cpp_ext or flag == "--cpp_ext"
        if flag == "--cuda_ext":
            raise RuntimeError("apex stand-in: no CUDA extensions here")
if cpp_ext:
    ext_modules.append(CppExtension("apex_C", ["csrc/flatten_unflatten.cpp"]))

setup(name="apex", version="0.1+standin", packages=find_packages(), ext_modules=ext_modules,
      cmdclass={"build_ext": BuildExtension})
