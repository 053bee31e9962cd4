# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
# Copyright: (c) 2026, rayfleet authors
"""rayfleet.cluster.stage_items, loaded without configuration for the collection's own playbooks.

Ansible adds the plugin directories next to every playbook it loads, a collection's playbooks included (by FQCN, by
path or through import_playbook), and loads a callback found there that does not ask to be enabled. So the stage
records and the drift check work from a Galaxy install with no ansible.cfg. Where the configuration enables
rayfleet.cluster.stage_items itself, this copy stands aside and the configured one watches the run."""

from __future__ import annotations

DOCUMENTATION = r"""
---
name: rayfleet_stage_items
type: aggregate
short_description: rayfleet.cluster.stage_items for the collection's playbooks, with no configuration
description:
  - Loaded by Ansible from the directory next to the collection's playbooks; stands aside when C(callbacks_enabled)
    names C(rayfleet.cluster.stage_items).
"""

from ansible import constants as C
from ansible.plugins.callback import CallbackBase
from ansible_collections.rayfleet.cluster.plugins.callback.stage_items import CallbackModule as StageItems

CONFIGURED = {"rayfleet.cluster.stage_items", "stage_items"}


class CallbackModule(StageItems):
    CALLBACK_NAME = "rayfleet_stage_items"
    CALLBACK_NEEDS_ENABLED = False

    def __init__(self):  # pylint: disable=super-init-not-called
        if CONFIGURED & set(C.CALLBACKS_ENABLED or ()):
            # the configured callback keeps the spool: this copy makes none and is never called
            CallbackBase.__init__(self)  # pylint: disable=non-parent-init-called
            self.disabled = True
            return
        StageItems.__init__(self)
