# SPDX-License-Identifier: GPL-3.0-or-later
"""The monitoring plan (plugins/plugin_utils/monitoring_plan.py): the monitoring role's variables checked on the
controller, each bad one named with the host and what was expected, and the listen addresses parsed for the role's
templates."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from ansible_collections.rayfleet.cluster.plugins.plugin_utils.monitoring_plan import (
    PlanError,
    monitoring_plan,
    parse_listen,
    scrape_targets,
)

ROOT = Path(__file__).resolve().parents[3]
DEFAULTS = yaml.safe_load((ROOT / "roles/monitoring/defaults/main.yml").read_text())
HOSTS = ["head1", "worker1", "worker2"]
GRAFANA_APT_KEY = "B53AE77BADB630A683046005963FA27710458545"
V6_KEY = "AB" * 32
# the controller's files, as the plan asks about them (none unless a test says so)
NO_FILES = frozenset()


def settings(**extra) -> dict:
    """The monitoring role's variables as the plan gets them (the role's defaults, rendered: the head monitors)."""
    return {**DEFAULTS, "monitoring_host": "head1", **extra}


def plan(host="head1", os_family="Debian", is_file=NO_FILES.__contains__, **extra) -> dict:
    return monitoring_plan(host, settings(**extra), HOSTS, os_family=os_family, is_file=is_file)


def problems(host="head1", os_family="Debian", is_file=NO_FILES.__contains__, **extra) -> list[str]:
    with pytest.raises(PlanError) as info:
        plan(host, os_family, is_file, **extra)
    assert str(info.value) == " ".join(info.value.problems)
    assert all(p.startswith(f"monitoring on {host}: ") for p in info.value.problems), info.value.problems
    return info.value.problems


def only_problem(**extra) -> str:
    (found,) = problems(**extra)
    return found


def test_the_shipped_defaults_pass():
    got = plan()
    assert got["monitoring_host"] == "head1" and got["is_monitoring_host"] is True
    assert got["prometheus_listen"] == {"address": "127.0.0.1", "port": 9090, "listen": "127.0.0.1:9090"}
    assert got["grafana_listen"] == {"address": "127.0.0.1", "port": 3000, "listen": "127.0.0.1:3000"}
    assert (got["node_exporter_port"], got["dcgm_exporter_port"]) == (9100, 9400)
    assert got["dcgm_cuda_major"] == "" and got["dcgm_exporter_collectors"] == ""
    # Grafana is off by default: its key is not checked
    assert got["grafana_key"] is None


def test_the_shipped_defaults_pass_with_grafana_on_debian():
    got = plan(monitoring_grafana=True)
    assert got["grafana_key"] == {"var": "monitoring_grafana_key_fingerprint", "url": "https://apt.grafana.com/gpg.key",
                                  "value": GRAFANA_APT_KEY, "pin": GRAFANA_APT_KEY}


def test_the_default_monitoring_host_is_checked_once_rendered():
    # the default names the first ray_head host; an inventory without one renders it empty
    assert only_problem(monitoring_host="") == (
        'monitoring on head1: monitoring_host is ""; expected an inventory host (by default the first host of group '
        "ray_head).")
    assert "monitoring_host is \"nohost\"" in only_problem(monitoring_host="nohost")
    assert plan(host="worker1", monitoring_host="worker2")["is_monitoring_host"] is False


@pytest.mark.parametrize("value", ["::::99999", "0.0.0.0:99999", "999.1.1.1:9090", "127.0.0.1:0", "127.0.0.1:",
                                   "127.0.0.1", ":9090", "localhost:9090", "::1:9090", "[127.0.0.1]:9090",
                                   "[::1]9090", "[::1:9090", "127.0.0.1:90a", "127.0.0.1:-1", 9090, None,
                                   "[::g]:9090"])
def test_nonsense_listen_addresses_are_refused(value):
    assert parse_listen(value) is None
    found = only_problem(monitoring_prometheus_listen=value)
    assert found.startswith("monitoring on head1: monitoring_prometheus_listen is ")
    assert found.endswith("; expected address:port, the address an IP literal (IPv4 such as 127.0.0.1, or IPv6 in "
                          "brackets such as [::1]) and the port 1-65535.")


def test_listen_addresses_are_parsed():
    assert parse_listen("0.0.0.0:9090") == ("0.0.0.0", 9090)
    assert parse_listen("[::]:9090") == ("::", 9090)
    assert parse_listen(" [0:0::1]:65535 ") == ("::1", 65535)
    assert parse_listen("10.0.0.1:1") == ("10.0.0.1", 1)


def test_bracketed_ipv6_listen_is_accepted():
    got = plan(monitoring_prometheus_listen="[::]:9090", monitoring_grafana_listen="[::1]:3300")
    assert got["prometheus_listen"] == {"address": "::", "port": 9090, "listen": "[::]:9090"}
    # the address Grafana's GF_SERVER_HTTP_ADDR takes, without brackets
    assert got["grafana_listen"] == {"address": "::1", "port": 3300, "listen": "[::1]:3300"}


def test_a_bad_grafana_listen_is_named():
    assert only_problem(monitoring_grafana_listen="999.1.1.1:3000").startswith(
        'monitoring on head1: monitoring_grafana_listen is "999.1.1.1:3000"; expected address:port')


@pytest.mark.parametrize("var", ["monitoring_node_exporter_port", "monitoring_dcgm_exporter_port"])
@pytest.mark.parametrize("value", [0, 65536, -1, "x", "", True, None, 9100.5, [9100]])
def test_bad_ports_are_named(var, value):
    found = only_problem(**{var: value})
    assert found.startswith(f"monitoring on head1: {var} is "), found
    assert "expected a TCP port (1-65535)" in found


def test_ports_as_ansible_renders_them_are_accepted():
    got = plan(monitoring_node_exporter_port="9101", monitoring_dcgm_exporter_port=" 9401 ")
    assert (got["node_exporter_port"], got["dcgm_exporter_port"]) == (9101, 9401)


def test_the_dcgm_exporter_port_is_not_node_exporters():
    assert only_problem(monitoring_dcgm_exporter_port="9100") == (
        'monitoring on head1: monitoring_dcgm_exporter_port is "9100", node exporter\'s port '
        "(monitoring_node_exporter_port 9100); expected a port of its own (both listen on the node's cluster "
        "address).")


@pytest.mark.parametrize("value", ["15", "15 d", "d", "15D", "1d12h", "15ms", 15, None])
def test_bad_retention_is_named(value):
    assert only_problem(monitoring_prometheus_retention=value).startswith(
        "monitoring on head1: monitoring_prometheus_retention is ")
    assert plan(monitoring_prometheus_retention="2y")


@pytest.mark.parametrize("value", ["15", "0s", "00ms", "15d", "1m30s", "s", 15, None])
def test_bad_scrape_interval_is_named(value):
    found = only_problem(monitoring_scrape_interval=value)
    assert found.startswith("monitoring on head1: monitoring_scrape_interval is ")
    assert found.endswith("expected a duration above zero, digits and one unit of ms, s, m or h (e.g. 15s).")


@pytest.mark.parametrize("value", ["500ms", "1s", "2m", "1h"])
def test_scrape_intervals_are_accepted(value):
    assert plan(monitoring_scrape_interval=value)


def test_version_strings_as_before():
    assert plan(monitoring_grafana_version="12.2.1", monitoring_dcgm_version="1:4.6.0-1",
                monitoring_dcgm_exporter_version="4.6.0-4.7.1-1")
    assert only_problem(monitoring_grafana_version="12.2.1; rm").startswith(
        'monitoring on head1: monitoring_grafana_version is "12.2.1; rm"; expected a quoted Grafana release')
    # a YAML number is not a version (12.10 would be read as 12.1)
    assert "monitoring_grafana_version is 12.1;" in only_problem(monitoring_grafana_version=12.1)
    found = problems(monitoring_dcgm_version="x:1", monitoring_dcgm_exporter_version="1 2")
    assert [p.split(" is ")[0] for p in found] == ["monitoring on head1: monitoring_dcgm_version",
                                                   "monitoring on head1: monitoring_dcgm_exporter_version"]


@pytest.mark.parametrize(("dcgm", "exporter"), [("1:4.6.0-1", ""), ("", "4.6.0-4.7.1-1")])
def test_dcgm_and_its_exporter_are_pinned_together(dcgm, exporter):
    assert only_problem(monitoring_dcgm_version=dcgm, monitoring_dcgm_exporter_version=exporter) == (
        f'monitoring on head1: monitoring_dcgm_version is "{dcgm}" and monitoring_dcgm_exporter_version "{exporter}"; '
        "expected both set or both empty (NVIDIA releases DCGM and its exporter in pairs: pin the pair from its "
        "version compatibility table, or neither for the repository's newest).")


@pytest.mark.parametrize("value", ["12", 12, "", None])
def test_cuda_major_two_digits_or_empty(value):
    assert plan(monitoring_dcgm_cuda_major=value)["dcgm_cuda_major"] == ("" if value in ("", None) else "12")


@pytest.mark.parametrize("value", ["1", "123", "cuda12", 9, True, 12.0])
def test_bad_cuda_major_is_named(value):
    assert only_problem(monitoring_dcgm_cuda_major=value).startswith(
        "monitoring on head1: monitoring_dcgm_cuda_major is ")


def controller_file(path):
    """Whether path is a file (the action's check on the controller)."""
    return Path(path).is_file()


def test_collectors_a_file_on_the_controller(tmp_path):
    counters = tmp_path / "counters.csv"
    counters.write_text("DCGM_FI_DEV_GPU_UTIL, gauge, GPU utilization\n")
    assert plan(is_file=controller_file,
                monitoring_dcgm_exporter_collectors=str(counters))["dcgm_exporter_collectors"] == str(counters)
    missing = str(tmp_path / "missing.csv")
    assert only_problem(is_file=controller_file, monitoring_dcgm_exporter_collectors=missing) == (
        f'monitoring on head1: monitoring_dcgm_exporter_collectors is "{missing}"; expected a counters CSV file on '
        "the controller (dcgm-exporter's format), or empty for the package's default-counters.csv.")
    # a directory is no file
    assert only_problem(is_file=controller_file, monitoring_dcgm_exporter_collectors=str(tmp_path))


def test_the_grafana_pin_is_normalised():
    spaced = "b53a e77b adb6 30a6 8304  6005 963f a277 1045 8545"
    got = plan(monitoring_grafana=True, monitoring_grafana_key_fingerprint=spaced)["grafana_key"]
    assert got["pin"] == GRAFANA_APT_KEY and got["value"] == spaced
    got = plan(monitoring_grafana=True, monitoring_grafana_key_fingerprint=V6_KEY.lower())["grafana_key"]
    assert got["pin"] == V6_KEY


def test_the_grafana_pin_on_redhat_is_the_rpm_keys():
    # no default for dnf's key: Grafana on a RedHat-family monitoring host needs it
    assert only_problem(os_family="RedHat", monitoring_grafana=True) == (
        "monitoring on head1: Grafana from Grafana's repository needs the fingerprint of its signing key "
        "(https://rpm.grafana.com/gpg.key) in monitoring_grafana_rpm_key_fingerprint; it is \"\" (expected 40 hex "
        "digits, or 64 for a version 5 or 6 key; spaces allowed). Set it to the fingerprint Grafana publishes for "
        "that key, or to the one `gpg --show-keys` prints for a copy you trust; the key is checked against it before "
        "the package manager trusts it.")
    got = plan(os_family="RedHat", monitoring_grafana=True, monitoring_grafana_rpm_key_fingerprint=V6_KEY)
    assert got["grafana_key"]["var"] == "monitoring_grafana_rpm_key_fingerprint"
    assert got["grafana_key"]["url"] == "https://rpm.grafana.com/gpg.key"


@pytest.mark.parametrize("value", ["B53AE77BADB630A683046005963FA2771045854", GRAFANA_APT_KEY + "5", "G" * 40, None,
                                   True])
def test_a_bad_grafana_pin_is_named(value):
    assert "in monitoring_grafana_key_fingerprint; it is " in only_problem(
        monitoring_grafana=True, monitoring_grafana_key_fingerprint=value)


def test_the_grafana_pin_is_only_checked_on_the_monitoring_host_with_grafana_on():
    bad = {"monitoring_grafana_key_fingerprint": "nope", "monitoring_grafana_rpm_key_fingerprint": ""}
    # another host: Grafana runs on the monitoring host only
    assert plan(host="worker1", monitoring_grafana=True, **bad)["grafana_key"] is None
    assert plan(host="worker1", os_family="RedHat", monitoring_grafana=True, **bad)["grafana_key"] is None
    # Grafana off
    assert plan(monitoring_grafana=False, **bad)["grafana_key"] is None
    # the monitoring host with Grafana on
    assert "monitoring_grafana_key_fingerprint; it is \"nope\"" in only_problem(monitoring_grafana=True, **bad)


def test_the_grafana_pin_needs_the_hosts_os_family():
    assert only_problem(os_family=None, monitoring_grafana=True).startswith(
        "monitoring on head1: the host's OS family is null; expected its os_family fact")
    assert plan(os_family=None)["grafana_key"] is None


def test_monitoring_grafana_must_be_a_boolean():
    assert only_problem(monitoring_grafana="maybe") == (
        'monitoring on head1: monitoring_grafana is "maybe"; expected true or false.')


def test_every_problem_is_named_at_once():
    found = problems(monitoring_host="nohost", monitoring_prometheus_listen="::::99999",
                     monitoring_grafana_listen="0.0.0.0:99999", monitoring_prometheus_retention="forever",
                     monitoring_scrape_interval="often", monitoring_node_exporter_port=70000,
                     monitoring_dcgm_exporter_port=0, monitoring_dcgm_version="1:4.6.0-1",
                     monitoring_grafana_version="new!", monitoring_dcgm_cuda_major="x",
                     monitoring_dcgm_exporter_collectors="/no/such.csv")
    named = [p.split(" is ")[0].removeprefix("monitoring on head1: ") for p in found]
    assert named == ["monitoring_host", "monitoring_prometheus_listen", "monitoring_grafana_listen",
                     "monitoring_prometheus_retention", "monitoring_scrape_interval", "monitoring_node_exporter_port",
                     "monitoring_dcgm_exporter_port", "monitoring_grafana_version", "monitoring_dcgm_version",
                     "monitoring_dcgm_cuda_major", "monitoring_dcgm_exporter_collectors"]


# ---- the monitoring host's scrape targets (from the cluster plan) ----

OWN = {"monitoring_enabled": True, "monitoring_node_exporter": True, "monitoring_node_exporter_port": 9100,
       "monitoring_dcgm_exporter": True, "monitoring_dcgm_exporter_port": 9400}


def _cluster(**monitoring):
    return {"members": ["h", "w1", "g1", "g2"],
            "ips": {"h": "10.0.0.1", "w1": "10.0.0.2", "g1": "10.0.0.3", "g2": "fd00::4"},
            "monitoring": {"h": {}, "w1": {}, "g1": {}, "g2": {}, **monitoring}}


def test_every_member_is_scraped_at_its_ip_with_this_hosts_ports_where_its_inventory_sets_none():
    targets = scrape_targets(_cluster(), ["g1", "g2"], OWN)
    assert targets == {"node": ["10.0.0.1:9100", "10.0.0.2:9100", "10.0.0.3:9100", "[fd00::4]:9100"],
                       "dcgm": {"g1": "10.0.0.3:9400", "g2": "[fd00::4]:9400"}}


def test_a_members_own_exporter_settings_are_its_targets():
    """A GPU group's own DCGM port, a worker without node exporter, a host out of monitoring: the monitoring host
    scrapes each as its inventory says, not as its own."""
    targets = scrape_targets(_cluster(w1={"monitoring_node_exporter": "false"},
                                      g1={"monitoring_dcgm_exporter_port": "9500",
                                          "monitoring_node_exporter_port": 9200},
                                      g2={"monitoring_enabled": False}), ["g1", "g2"], OWN)
    assert targets == {"node": ["10.0.0.1:9100", "10.0.0.3:9200"], "dcgm": {"g1": "10.0.0.3:9500"}}
    assert scrape_targets(_cluster(g1={"monitoring_dcgm_exporter": False}), ["g1"], OWN)["dcgm"] == {}


def test_a_members_bad_exporter_setting_is_named_with_the_member():
    with pytest.raises(PlanError) as info:
        scrape_targets(_cluster(g1={"monitoring_dcgm_exporter_port": 0}, w1={"monitoring_node_exporter": "maybe"}),
                       ["g1"], OWN)
    text = str(info.value)
    assert "monitoring on g1: monitoring_dcgm_exporter_port is 0; expected a TCP port (1-65535)." in text
    assert "monitoring on w1: monitoring_node_exporter is \"maybe\"; expected true or false." in text


@pytest.mark.parametrize(("prometheus", "grafana", "clash"), [
    ("127.0.0.1:9090", "127.0.0.1:9090", True), ("0.0.0.0:3000", "127.0.0.1:3000", True),
    ("127.0.0.1:3000", "[::]:3000", True), ("127.0.0.1:9090", "127.0.0.1:3000", False),
    ("127.0.0.1:3000", "10.0.0.5:3000", False),
])
def test_prometheus_and_grafana_cannot_share_a_listen_address(prometheus, grafana, clash):
    """Both run on the monitoring host: the second one could not bind the address."""
    found = problems(monitoring_grafana=True, monitoring_prometheus_listen=prometheus,
                     monitoring_grafana_listen=grafana) if clash else []
    if clash:
        assert any(p.startswith(f'monitoring on head1: monitoring_grafana_listen is "{grafana}"; expected another '
                                "address or port than monitoring_prometheus_listen") for p in found), found
    else:
        plan(monitoring_grafana=True, monitoring_prometheus_listen=prometheus, monitoring_grafana_listen=grafana)
    # without Grafana the address is not bound
    plan(monitoring_grafana=False, monitoring_prometheus_listen=prometheus, monitoring_grafana_listen=grafana)
