# SPDX-License-Identifier: GPL-3.0-or-later
"""Stand-in for NVIDIA Apex (tests only): see setup.py."""
