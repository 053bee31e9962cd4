# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
# Copyright: (c) 2026, rayfleet authors

from __future__ import annotations


class ModuleDocFragment:
    # What the modules that read or write the stage records share (drift_check, stage_record)
    DOCUMENTATION = r"""
options:
  directory:
    description:
      - Where the stage records are. Unset, the action plugin passes C(/var/lib/rayfleet/stages/<cluster>), one
        directory per Ray cluster (C(ray_cluster_name), C(default) when unnamed).
    type: path
    default: /var/lib/rayfleet/stages
  image_directory:
    description:
      - Where a baked image keeps the records of the stages C(playbooks/bake.yml) applied on its builder. A stage
        with no record in O(directory) takes the image's, until the cluster's stage applies other inputs on the
        host.
    type: path
    default: /var/lib/rayfleet/image-stages
attributes:
  action:
    support: full
    description: Its action plugin computes the inputs digest on the controller.
"""
