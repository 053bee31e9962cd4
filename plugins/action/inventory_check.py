# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
# Copyright: (c) 2026, rayfleet authors
"""Action of rayfleet.cluster.inventory_check: the inventory checked on the controller alone. Each host's variables
are rendered as its roles see them (the inventory and -e over the roles' defaults), checked against each role's
argument spec, then passed to the role's own plan (the plan actions' code, called here once per host), as the
roles' validate tasks pass them. What only a host can tell is reported as deferred."""

from __future__ import annotations

import contextlib
import json
import os
import re
from collections.abc import Mapping

import jinja2
import jinja2.meta
from ansible.errors import AnsibleError
from ansible.module_utils.common.arg_spec import ArgumentSpecValidator
from ansible.plugins.action import ActionBase
from ansible_collections.rayfleet.cluster.plugins.plugin_utils.cluster_plan import PlanError, boolean, cluster_networks
from ansible_collections.rayfleet.cluster.plugins.plugin_utils.inventory_check import (
    FACT_CHECKS,
    HOST_CHECKS,
    NODE_GROUPS,
    SPEC_ONLY_ROLES,
    Report,
    checked_roles,
    contract_problems,
    offline_node_ip,
)
from ansible_collections.rayfleet.cluster.plugins.plugin_utils.plans import Call, plan_variables, run_plan
from ansible_collections.rayfleet.cluster.plugins.plugin_utils.ssh_trust_plan import PASSWORD_VARS

ROLES_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "roles")
UNRENDERED = object()
# Jinja's parser, for the names a template reads (each template's kept)
PARSER = jinja2.Environment()
TEMPLATE_NAMES = {}
# The names in a template that only a run on the host defines: its facts, magic variables, a task's results
HOST_ONLY = re.compile(r"\b((?:ansible_|__)[A-Za-z0-9_]+)")


def plain(value):
    """value with its mappings and sequences as plain dicts and lists (a rendered value may be a lazy container that
    renders its items on access), and its scalars untagged (Ansible tags what it reads with where it was written)."""
    if isinstance(value, Mapping):
        return {plain(key): plain(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(item) for item in value]
    # a value Ansible tagged (where it was written) as its plain type: a copy costs nothing then
    for kind in (bool, str, int, float):
        if isinstance(value, kind):
            return kind(value)
    return value


def spec_of(options):
    """An argument spec's options as the validator reads them (their descriptions left out)."""
    return {name: {key: spec_of(item) if key == "options" else item for key, item in option.items()
                   if key not in ("description", "version_added")}
            for name, option in options.items()}


def has_template(value):
    """Whether value holds a template anywhere (a string with Jinja's markers): else rendering returns it as it is."""
    if isinstance(value, str):
        return "{{" in value or "{%" in value
    if isinstance(value, Mapping):
        return any(has_template(key) or has_template(item) for key, item in value.items())
    if isinstance(value, (list, tuple)):
        return any(has_template(item) for item in value)
    return False


def template_names(value):
    """The variables the templates in value read (None where Jinja cannot parse one: it is rendered every time)."""
    if isinstance(value, Mapping):
        parts = [template_names(part) for item in value.items() for part in item]
    elif isinstance(value, (list, tuple)):
        parts = [template_names(item) for item in value]
    elif not isinstance(value, str):
        return []
    else:
        if value not in TEMPLATE_NAMES:
            try:
                TEMPLATE_NAMES[value] = sorted(jinja2.meta.find_undeclared_variables(PARSER.parse(value)))
            except jinja2.TemplateError:
                TEMPLATE_NAMES[value] = None
        return TEMPLATE_NAMES[value]
    if any(part is None for part in parts):
        return None
    return sorted({name for part in parts for name in part})


class HostValues:
    """One host's variables as its roles see them: the inventory's and -e's over every role's defaults and vars,
    rendered on demand (once each) in the host's context."""

    def __init__(self, templar, raw, defaults, shared):
        self.env = {**defaults, **raw}
        self.shared = shared
        self.raw = raw
        self.templar = templar.copy_with_new_env(available_variables=self.env)
        self._cache = {}
        self.errors = {}

    def get(self, name, default=None):
        """The rendered value of name; default where it is not set, or where it cannot be rendered from the
        inventory alone (it reads facts or results: the reason kept in errors)."""
        if name not in self._cache:
            if name not in self.env:
                return default
            self._cache[name] = UNRENDERED  # a template that reads itself, read from within, reads as unset
            try:
                self._cache[name] = self._render(self.env[name])
            except AnsibleError as exc:
                self._cache[name] = UNRENDERED
                self.errors[name] = str(exc).splitlines()[0]
        value = self._cache[name]
        return default if value is UNRENDERED else value

    def _render(self, raw):
        """raw rendered in the host's context. A value with templates is a function of the variables they name:
        where those read the same on another host, its value there is taken (shared), not rendered again."""
        if not has_template(raw):
            return plain(raw)
        names = template_names(raw)
        if names is None:
            return plain(self.templar.template(raw))
        key = (json.dumps(raw, sort_keys=True, default=repr),
               json.dumps([self.get(name, self.env.get(name)) for name in names], sort_keys=True, default=repr))
        if key not in self.shared:
            self.shared[key] = plain(self.templar.template(raw))
        return self.shared[key]

    def pick(self, names):
        """The rendered values of those of names that are set (the plan action's arguments)."""
        return {name: self.get(name) for name in names if name in self.env and self.get(name, UNRENDERED)
                is not UNRENDERED}

    def facts(self):
        facts = self.raw.get("ansible_facts")
        return dict(facts) if isinstance(facts, Mapping) else {}


class MemberView(Mapping):
    """Another host's inventory variables as the cluster plan reads them (hostvars[name]), with the offline address
    of a host whose ray_node_ip comes from its facts."""

    def __init__(self, hostvars, name, node_ip):
        self._vars = hostvars[name]
        self._rendered = {"ray_node_ip": node_ip}

    def __getitem__(self, key):
        if key not in self._rendered:
            try:
                self._rendered[key] = plain(self._vars[key])
            except AnsibleError:  # it reads facts or results: unset offline (its own host's check names it)
                self._rendered[key] = UNRENDERED
        if self._rendered[key] is UNRENDERED:
            raise KeyError(key)
        return self._rendered[key]

    def __iter__(self):
        return iter(self._vars)

    def __len__(self):
        return len(self._vars)


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _requires_connection = False
    _supports_check_mode = True
    _VALID_ARGS = frozenset(("scope",))

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        del tmp
        task_vars = task_vars or {}
        result["changed"] = False
        groups = task_vars.get("groups", {})
        scope = self._task.args.get("scope", "inventory")
        if scope not in ("inventory", "contract"):
            result.update(failed=True, msg="inventory_check: scope is %r; expected inventory or contract." % (scope,))
            return result
        report = Report()
        for problem in contract_problems(groups):
            report.problem(problem)
        if scope == "contract" or report.problems:
            return self._result(result, report)

        roles = checked_roles()
        defaults, specs = self._load_roles([role for role, _groups in roles])
        self._defaults = defaults
        hostvars = self._hostvars = task_vars["hostvars"]
        targets = []
        for _role, role_groups in roles:
            for group in role_groups:
                targets += [host for host in groups.get(group, []) if host not in targets]
        shared = {}
        values = {host: HostValues(self._templar, dict(hostvars.raw_get(host)), defaults, shared) for host in targets}
        members = [host for group in NODE_GROUPS for host in groups.get(group, [])]
        addresses = self._addresses(members, values, report)
        self._groups, self._report, self._plans, self._cluster_plan = groups, report, {}, None
        self._members = {host: MemberView(hostvars, host, addresses[host]) for host in members}
        for host in targets:
            v = values[host]
            for role, role_groups in roles:
                if not any(host in groups.get(group, []) for group in role_groups):
                    continue
                # a value that is no boolean is named by the role's spec and plan
                if boolean(v.get("%s_enabled" % role, True)) is False:
                    continue
                report.ran(role, host)
                self._check_spec(role, specs.get(role), host, v, report)
                for check in HOST_CHECKS.get(role, ()):
                    report.defer(role, check, host)
                if role in SPEC_ONLY_ROLES:
                    for check in FACT_CHECKS[role]:
                        report.defer(role, check, host)
                    continue
                with contextlib.suppress(PlanError):
                    self._check_role(role, host, v)
            self._unrendered(host, v, report)
        return self._result(result, report)

    @staticmethod
    def _unrendered(host, v, report):
        """The variables of host that could not be rendered from the inventory: deferred where they read facts,
        magic variables or a task's results (rendered when a run reaches the host), else a problem."""
        for name, error in v.errors.items():
            reads = HOST_ONLY.search(str(v.env.get(name)))
            if reads:
                report.defer("variables", "%s, which reads %s" % (name, reads.group(1)), host)
            else:
                report.problem("%s on %s cannot be rendered from the inventory: %s; expected a value, or a template "
                               "of variables the inventory, the roles' defaults or the host's facts define."
                               % (name, host, error))

    def _result(self, result, report):
        result.update(report.to_dict())
        if report.problems:
            result.update(failed=True, msg=" ".join(report.problems))
        else:
            result["msg"] = "The inventory passes the offline check: %d hosts; %d checks wait for the hosts." % (
                report.to_dict()["hosts"], len(report.deferred))
        return result

    def _load(self, path):
        if not os.path.isfile(path):
            return {}
        try:  # ansible-core 2.19 and later: the roles' files are trusted templates, as when a play loads them
            data = self._loader.load_from_file(path, trusted_as_template=True)
        except TypeError:
            data = self._loader.load_from_file(path)
        return dict(data or {})

    def _load_roles(self, roles):
        """Every role's defaults and vars (one namespace: each role's variables carry its name), and each role's
        main argument spec."""
        defaults, specs = {}, {}
        for role in roles:
            base = os.path.join(ROLES_DIR, role)
            defaults.update(self._load(os.path.join(base, "defaults", "main.yml")))
            defaults.update(self._load(os.path.join(base, "vars", "main.yml")))
            spec = self._load(os.path.join(base, "meta", "argument_specs.yml"))
            options = ((spec.get("argument_specs") or {}).get("main") or {}).get("options")
            specs[role] = ArgumentSpecValidator(spec_of(plain(options))) if options else None
        return defaults, specs

    def _addresses(self, members, values, report):
        """Each Ray host's address for the cluster plan: its ray_node_ip as the inventory renders it, else a
        stand-in (offline_node_ip), the check of its real address deferred."""
        found = {}
        for index, host in enumerate(members):
            v = values[host]
            networks = cluster_networks(v.get("ray_cluster_networks")) if v.get("ray_membership") == "network" \
                else None
            found[host], known = offline_node_ip(index, v.get("ray_node_ip"), v.get("ansible_host"), networks)
            if not known:
                for check in FACT_CHECKS["ray"]:
                    report.defer("ray", check, host)
        return found

    @staticmethod
    def _check_spec(role, spec, host, v, report):
        """The role's main argument spec (types, choices, required) against the host's rendered values."""
        if not spec:
            return
        validated = spec.validate(v.pick(spec.argument_spec))
        for message in validated.error_messages:
            report.problem("%s on %s: %s (the role's argument spec)." % (role, host, message))

    def _plan(self, role, host, v, task_vars, given=None, *, overrides=None):
        """The role's plan, as its validate task asks for it, from the host's values rendered offline (overrides:
        those the offline check sets itself); its problems reported."""
        values = {**v.pick(plan_variables(role)), **(overrides or {})}
        call = Call(host, values, given or {}, {"inventory_hostname": host, **task_vars},
                    template=v.templar.template, role_default=lambda var: self._role_default(var, v))
        try:
            return run_plan(role, call)
        except PlanError as exc:
            for problem in exc.problems:
                self._report.problem(problem)
            raise

    def _role_default(self, var, v):
        """The roles' default of var, rendered in the host's context (None: none)."""
        default = self._defaults.get(var)
        return plain(v.templar.template(default)) if default is not None else None

    def _check_role(self, role, host, v):
        facts = v.facts()
        common = {"groups": self._groups, "group_names": v.get("group_names", []),
                  "ansible_host": v.get("ansible_host"), "ansible_facts": facts}
        if role == "ray":
            task_vars = {**common, "hostvars": self._members}
            overrides = {"ray_node_ip": self._members[host]["ray_node_ip"]}
            mine = self._plan(role, host, v, task_vars, overrides=overrides)["host"]
            if self._cluster_plan is None:  # the same for every host, as a run's
                self._cluster_plan = self._plan(role, host, v, task_vars, {"cluster": True, "left_out": []},
                                                overrides=overrides)["cluster"]
            self._plans[host] = {"host": mine, "cluster": self._cluster_plan}
        elif role == "ssh_trust":
            plan = self._ray_plan(host)
            passwords = {name: v.env[name] for name in PASSWORD_VARS if name in v.env}
            if not facts.get("ssh_host_key_ed25519_public"):
                for check in FACT_CHECKS[role]:
                    self._report.defer(role, check, host)
            self._plan(role, host, v, {**common, **passwords, "ansible_user": v.env.get("ansible_user")},
                       {"membership": plan["cluster"]["membership"], "node_ip": plan["host"]["node_ip"]})
        elif role == "firewall":
            plan = self._ray_plan(host)
            given = {"cluster_addresses": plan["cluster"]["sources"], "ray_ports": plan["host"]["ray_ports"],
                     "worker_port_range": plan["host"]["worker_port_range"]}
            # the host's ephemeral port range is read on the host: offline, the rest is checked without it
            overrides = {"firewall_restrict_ephemeral_ports": False} \
                if boolean(v.get("firewall_restrict_ephemeral_ports")) else {}
            self._plan(role, host, v, common, given, overrides=overrides)
        elif role in ("shared_storage", "nfs_server"):
            if not facts.get("os_family"):
                for check in FACT_CHECKS[role]:
                    self._report.defer(role, check, host)
            given = {"cluster_addresses": self._cluster()["sources"]} if role == "nfs_server" else {}
            self._plan(role, host, v, {**common, "hostvars": self._hostvars}, given)
        elif role == "nccl":
            if facts.get("interfaces") is None and v.get("nccl_socket_ifname") not in ("", "auto"):
                for check in FACT_CHECKS[role]:
                    self._report.defer(role, check, host)
            self._plan(role, host, v, common)
        elif role == "monitoring":
            self._check_monitoring(host, v, facts, common)
        elif role == "submit_host":
            self._plan(role, host, v, {**common, "hostvars": self._hostvars, "ansible_user": v.env.get("ansible_user")})
        else:  # common, pytorch, apex, checkpoint_store (its secret read as the host's variable)
            self._plan(role, host, v, common)

    def _check_monitoring(self, host, v, facts, common):
        plan = self._ray_plan(host)
        given = {"membership": plan["cluster"]["membership"], "cluster": plan["cluster"]["scrape"]}
        overrides = {}
        # Grafana's key is picked by the host's OS family: offline, without its facts, the rest is checked
        if not facts.get("os_family") and boolean(v.get("monitoring_grafana", False)):
            overrides["monitoring_grafana"] = False
            for check in FACT_CHECKS["monitoring"]:
                self._report.defer("monitoring", check, host)
        self._plan("monitoring", host, v, common, given, overrides=overrides)

    def _ray_plan(self, host):
        """The host's cluster plan (computed before its other roles'); a host whose plan failed checks no role
        that reads it (its problems are reported already)."""
        if host not in self._plans:
            raise PlanError([])
        return self._plans[host]

    def _cluster(self):
        """The cluster section of the plans (the same on every host); none when no host's plan passed."""
        if not self._plans:
            raise PlanError([])
        return next(iter(self._plans.values()))["cluster"]
