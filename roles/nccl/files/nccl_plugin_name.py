# SPDX-License-Identifier: GPL-3.0-or-later
"""Print the name a NCCL net plugin gives itself - the value NCCL_NET must have to select it.

Every ncclNet_vN_t a plugin exports starts with `const char* name` ("Libfabric" for aws-ofi-nccl); NCCL looks
for the newest version first, so does this. Loads the plugin only (libfabric must be on LD_LIBRARY_PATH).
Usage: nccl_plugin_name.py /opt/amazon/ofi-nccl/lib/libnccl-net-ofi.so
"""

import ctypes
import sys

SYMBOLS = tuple(f"ncclNetPlugin_v{n}" for n in range(11, 1, -1))


def plugin_name(path):
    lib = ctypes.CDLL(path)
    for symbol in SYMBOLS:
        try:
            name = ctypes.c_char_p.in_dll(lib, symbol).value
        except ValueError:
            continue
        if name:
            return name.decode()
    raise LookupError(f"{path} exports none of {', '.join(SYMBOLS)}: not a NCCL net plugin")


def main(argv):
    if len(argv) != 2:
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    try:
        print(plugin_name(argv[1]))
    except (OSError, LookupError) as exc:
        print(f"nccl_plugin_name: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
