# SPDX-License-Identifier: GPL-3.0-or-later
"""The bake tests' marker: extended tests run in make test-full (make bake-full), not in make test."""


def pytest_configure(config):
    config.addinivalue_line("markers", "extended: a slow test left out of make bake (make test) and run by make "
                                       "bake-full (make test-full)")
