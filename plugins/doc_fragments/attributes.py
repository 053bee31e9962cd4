# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
# Copyright: (c) 2026, rayfleet authors

from __future__ import annotations


class ModuleDocFragment:
    # Standard documentation for modules that only read (extends_documentation_fragment: attributes.info_module)
    DOCUMENTATION = r"""
options: {}
"""

    INFO_MODULE = r"""
options: {}
attributes:
  check_mode:
    support: full
    description: Read-only; runs the same in check mode.
  diff_mode:
    support: none
    description: Changes nothing.
"""

    # Action plugins that compute or decide on the controller and send nothing to the host
    # (extends_documentation_fragment: attributes.controller)
    CONTROLLER = r"""
options: {}
attributes:
  action:
    support: full
    description: Runs on the controller only (an action plugin); nothing is sent to the host.
  check_mode:
    support: full
    description: Changes nothing; runs the same in check mode.
  diff_mode:
    support: none
    description: Changes nothing.
"""
