# SPDX-License-Identifier: GPL-3.0-or-later
"""rayfleet: the node-side library of the rayfleet.cluster Ansible collection.

Importable without Ray (Ray is imported lazily where a live cluster is needed), so the logic
is unit-tested on the controller and used by the collection's modules on the nodes.
"""

__version__ = "0.1.0"
