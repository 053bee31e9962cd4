# SPDX-License-Identifier: GPL-3.0-or-later
"""Every collection the content names is declared in galaxy.yml, at a version the installed one satisfies.

`ansible-galaxy collection install rayfleet.cluster` installs what galaxy.yml's `dependencies` list and nothing
else: a module, role, playbook, lookup, filter, test, callback or module_utils import from an undeclared collection
works here (the `ansible` package brings them all) and fails on a user's controller that installed only this
collection. The scan reads roles/, playbooks/, plugins/, site.yml and ansible.cfg.
"""

import ast
import configparser
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
BUILTIN = frozenset({"ansible.builtin", "ansible.legacy", "rayfleet.cluster"})

_NAME = r"[a-z_][a-z0-9_]*"
FQCN = re.compile(rf"^({_NAME})\.({_NAME})\.(\*|{_NAME}(?:\.{_NAME})*)$")
_FQCN_IN = rf"{_NAME}\.{_NAME}\.{_NAME}"
# inside a Jinja expression: lookup('ns.coll.x'), query(...), q(...), | ns.coll.filter, is [not] ns.coll.test
JINJA_REFS = (
    re.compile(rf"\b(?:lookup|query|q)\(\s*['\"]({_FQCN_IN})['\"]"),
    re.compile(rf"\|\s*({_FQCN_IN})\b"),
    re.compile(rf"\bis\s+(?:not\s+)?({_FQCN_IN})\b"),
)
JINJA_BLOCK = re.compile(r"\{\{(.*?)\}\}|\{%(.*?)%\}", re.S)
# task keywords whose value is a bare Jinja expression
CONDITIONALS = frozenset({"when", "that", "failed_when", "changed_when", "until"})
TASK_LISTS = ("tasks", "pre_tasks", "post_tasks", "handlers")
BLOCK_LISTS = ("block", "rescue", "always")
ROLE_ACTIONS = frozenset({"include_role", "import_role"})
LOADERS = frozenset({"get", "get_with_context", "find_plugin", "find_plugin_with_context", "has_plugin"})


def collection_of(name):
    """ns.coll.plugin (ns.coll.fragment.sub, ns.coll.* for a `collections:` entry) -> ns.coll; a short name -> None."""
    match = FQCN.match(name.strip()) if isinstance(name, str) else None
    return f"{match.group(1)}.{match.group(2)}" if match else None


class _Loader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):
    """YAML as Ansible writes it: !vault, !unsafe and other local tags read as plain values."""


_Loader.add_multi_constructor("!", lambda loader, _suffix, node: (
    loader.construct_scalar(node) if isinstance(node, yaml.ScalarNode)
    else loader.construct_sequence(node) if isinstance(node, yaml.SequenceNode)
    else loader.construct_mapping(node)))


def _jinja_refs(text, bare=False):
    chunks = [text] if bare else [a or b for a, b in JINJA_BLOCK.findall(text)]
    for chunk in chunks:
        for pattern in JINJA_REFS:
            yield from pattern.findall(chunk)


def _strings_refs(data, key=None):
    """Lookups, filters and tests in every string of a YAML document."""
    if isinstance(data, str):
        yield from _jinja_refs(data, bare=key in CONDITIONALS)
    elif isinstance(data, dict):
        for k, value in data.items():
            yield from _strings_refs(value, k)
    elif isinstance(data, list):
        for value in data:
            yield from _strings_refs(value, key)


def _role_name(entry):
    if isinstance(entry, str):
        return entry
    if isinstance(entry, dict):
        return entry.get("role") or entry.get("name")
    return None


def _task_refs(tasks):
    """Actions (module or action plugin keys, action/local_action), with_<lookup> loops and role includes."""
    for task in tasks if isinstance(tasks, list) else []:
        if not isinstance(task, dict):
            continue
        for key, value in task.items():
            if key in BLOCK_LISTS:
                yield from _task_refs(value)
            elif key in ("action", "local_action"):
                module = value.get("module") if isinstance(value, dict) else str(value).split(None, 1)[0]
                if module:
                    yield module
            elif key.startswith("with_"):
                yield key[len("with_"):]
            elif collection_of(key):
                yield key
                if key.rsplit(".", 1)[-1] in ROLE_ACTIONS:
                    yield _role_name(value)
                elif key.rsplit(".", 1)[-1] == "import_playbook":
                    yield value
            elif key in ROLE_ACTIONS:
                yield _role_name(value)
            elif key == "import_playbook":
                yield value


def _play_refs(plays):
    for play in plays:
        if not isinstance(play, dict):
            continue
        yield from _task_refs([{k: v for k, v in play.items() if "import_playbook" in k}])
        yield from (f"{name}.*" for name in play.get("collections") or [])
        for entry in play.get("roles") or []:
            yield _role_name(entry)
        for key in TASK_LISTS:
            yield from _task_refs(play.get(key))


def _yaml_refs(path, root):
    data = yaml.load(path.read_text(encoding="utf-8"), Loader=_Loader)
    yield from _strings_refs(data)
    parts = path.relative_to(root).parts
    if isinstance(data, list) and any(isinstance(p, dict) and ("hosts" in p or any("import_playbook" in k for k in p))
                                      for p in data):
        yield from _play_refs(data)
    elif len(parts) > 2 and parts[0] == "roles" and parts[2] in ("tasks", "handlers"):
        yield from _task_refs(data)
    elif len(parts) > 2 and parts[0] == "roles" and parts[2] == "meta" and isinstance(data, dict):
        yield from (f"{name}.*" for name in data.get("collections") or [])
        for entry in data.get("dependencies") or []:
            yield _role_name(entry)
    elif parts[0] == "plugins" and isinstance(data, dict):
        # a Jinja test or filter plugin documented in YAML
        for doc in data.values():
            if isinstance(doc, dict):
                yield from doc.get("extends_documentation_fragment") or []


def _python_refs(path):
    """module_utils/plugin_utils imports, modules an action plugin runs, plugins it loads, doc fragments."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("ansible_collections."):
            yield node.module.split(".", 1)[1]
        elif isinstance(node, ast.Import):
            yield from (alias.name.split(".", 1)[1] for alias in node.names
                        if alias.name.startswith("ansible_collections."))
        elif isinstance(node, ast.Call):
            func = node.func
            named = [kw.value for kw in node.keywords if kw.arg == "module_name"]
            if isinstance(func, ast.Attribute) and (
                    func.attr == "_execute_module"
                    or (func.attr in LOADERS and isinstance(func.value, ast.Attribute)
                        and func.value.attr.endswith("_loader"))):
                named += node.args[:1]
            yield from (arg.value for arg in named if isinstance(arg, ast.Constant) and isinstance(arg.value, str))
        elif (isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant)
              and isinstance(node.value.value, str)
              and any(isinstance(t, ast.Name) and t.id == "DOCUMENTATION" for t in node.targets)):
            doc = yaml.load(node.value.value, Loader=_Loader) or {}
            yield from doc.get("extends_documentation_fragment") or []


def _config_refs(path):
    config = configparser.ConfigParser(interpolation=None)
    config.read(path, encoding="utf-8")
    for section, key in (("defaults", "callbacks_enabled"), ("defaults", "callback_whitelist"),
                         ("defaults", "stdout_callback"), ("inventory", "enable_plugins")):
        yield from (name.strip() for name in config.get(section, key, fallback="").split(",") if name.strip())


def _text_refs(path):
    """A role's template: lookups, filters and tests in its Jinja blocks."""
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        return
    yield from _jinja_refs(text)


def scanned_files(root):
    files = [root / "site.yml", root / "ansible.cfg"]
    for top in ("roles", "playbooks", "plugins"):
        files += sorted(p for p in (root / top).rglob("*") if p.is_file() and "__pycache__" not in p.parts)
    return [p for p in files if p.is_file()]


def references(root):
    """(file relative to root, FQCN) for every collection-qualified name the content uses."""
    found = []
    for path in scanned_files(root):
        rel = path.relative_to(root)
        if path.suffix in (".yml", ".yaml"):
            refs = _yaml_refs(path, root)
        elif path.suffix == ".py":
            refs = _python_refs(path)
        elif path.name == "ansible.cfg":
            refs = _config_refs(path)
        elif len(rel.parts) > 2 and rel.parts[0] == "roles" and rel.parts[2] == "templates":
            refs = _text_refs(path)
        else:
            continue
        found += [(str(rel), name) for name in refs if collection_of(name)]
    return found


def declared(root):
    galaxy = yaml.safe_load((root / "galaxy.yml").read_text(encoding="utf-8"))
    return galaxy.get("dependencies") or {}


def undeclared(root, refs=None):
    """One line per reference to a collection galaxy.yml does not declare: file, FQCN, collection."""
    allowed = BUILTIN | set(declared(root))
    return sorted({f"{rel}: {name} (collection {collection_of(name)})"
                   for rel, name in (references(root) if refs is None else refs)
                   if collection_of(name) not in allowed})


@pytest.fixture(scope="module")
def checkout_refs():
    return references(ROOT)


def test_every_collection_the_content_uses_is_declared(checkout_refs):
    missing = undeclared(ROOT, checkout_refs)
    assert not missing, "not in galaxy.yml dependencies:\n" + "\n".join(missing)


def test_the_scan_sees_the_content(checkout_refs):
    """A scan that read nothing would pass the test above: it must find uses of each kind in this checkout."""
    found = set(checkout_refs)
    for wanted in (("roles/checkpoint_store/tasks/main.yml", "amazon.aws.s3_bucket"),
                   ("roles/ray/tasks/container.yml", "containers.podman.podman_load"),
                   ("roles/ray/tasks/container.yml", "community.docker.docker_image_load"),
                   ("playbooks/down.yml", "amazon.aws.ec2_vol_info"),
                   ("ansible.cfg", "ansible.posix.profile_tasks"),
                   ("plugins/action/drift_check.py", "rayfleet.cluster.drift_check")):
        assert wanted in found
    assert any(rel.startswith("plugins/") and name.startswith("rayfleet.cluster.plugins.") for rel, name in found)


def installed_collections():
    """name -> version of the collections ansible-galaxy finds (the first of each name, as Ansible loads it)."""
    galaxy = str(Path(sys.executable).parent / "ansible-galaxy")
    out = subprocess.run([galaxy, "collection", "list", "--format", "json"], cwd=ROOT,
                         capture_output=True, text=True, check=True).stdout
    installed = {}
    for collections in json.loads(out).values():
        for name, info in collections.items():
            installed.setdefault(name, info["version"])
    return installed


def test_every_dependency_is_installed_at_a_satisfying_version():
    from ansible.galaxy.dependency_resolution.versioning import meets_requirements

    installed = installed_collections()
    wrong = {name: (spec, installed.get(name)) for name, spec in declared(ROOT).items()
             if name not in installed or not meets_requirements(installed[name], spec)}
    assert not wrong, f"galaxy.yml dependency -> (declared, installed): {wrong}"


def _write(root, rel, text):
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def test_an_undeclared_collection_is_named_with_its_file(tmp_path):
    _write(tmp_path, "galaxy.yml", "dependencies:\n  ansible.posix: '>=1.5.0'\n")
    _write(tmp_path, "ansible.cfg", "[defaults]\ncallbacks_enabled = ansible.posix.profile_tasks, a.cb.timer\n")
    _write(tmp_path, "site.yml", "- name: All\n  ansible.builtin.import_playbook: b.pb.stage\n")
    _write(tmp_path, "roles/r/tasks/main.yml", """\
- name: Declared, builtin and own actions pass
  ansible.posix.mount: {path: /mnt, state: mounted}
- name: Module
  c.mod.thing: {}
  when: x is d.test.ok
- name: Block
  block:
    - name: Lookup
      ansible.builtin.debug:
        msg: "{{ lookup('e.lookup.x', 'k') | f.filter.y }}"
    - name: Role
      ansible.builtin.include_role:
        name: g.role.r
- name: Loop
  ansible.builtin.debug: {}
  with_h.loop.items: [1]
""")
    _write(tmp_path, "roles/r/meta/main.yml", "collections: [i.meta]\ndependencies: [{role: j.dep.r}]\n")
    _write(tmp_path, "roles/r/templates/x.conf.j2", "a = {{ v | k.tmpl.z }} and prose like ns.coll.name\n")
    _write(tmp_path, "roles/r/defaults/main.yml", "r_sysctl:\n  net.ipv4.ip_forward: 1\n")
    _write(tmp_path, "playbooks/p.yml", "- name: P\n  hosts: all\n  collections: [l.play]\n  roles: [m.roles.r, own]\n")
    _write(tmp_path, "plugins/action/a.py", """\
from ansible_collections.n.utils.plugins.module_utils.x import y
from ansible_collections.rayfleet.cluster.plugins.module_utils.z import w
DOCUMENTATION = '''
extends_documentation_fragment: [o.frag.docs]
'''
class ActionModule:
    def run(self):
        return self._execute_module(module_name="p.exec.mod")
""")
    missing = undeclared(tmp_path)
    for rel, name in (("ansible.cfg", "a.cb.timer"), ("site.yml", "b.pb.stage"),
                      ("roles/r/tasks/main.yml", "c.mod.thing"), ("roles/r/tasks/main.yml", "d.test.ok"),
                      ("roles/r/tasks/main.yml", "e.lookup.x"), ("roles/r/tasks/main.yml", "f.filter.y"),
                      ("roles/r/tasks/main.yml", "g.role.r"), ("roles/r/tasks/main.yml", "h.loop.items"),
                      ("roles/r/meta/main.yml", "i.meta.*"), ("roles/r/meta/main.yml", "j.dep.r"),
                      ("roles/r/templates/x.conf.j2", "k.tmpl.z"), ("playbooks/p.yml", "l.play.*"),
                      ("playbooks/p.yml", "m.roles.r"), ("plugins/action/a.py", "n.utils.plugins.module_utils.x"),
                      ("plugins/action/a.py", "o.frag.docs"), ("plugins/action/a.py", "p.exec.mod")):
        assert f"{rel}: {name} (collection {collection_of(name)})" in missing
    assert len(missing) == 16, missing  # nothing else: not the declared, builtin or own names, sysctl keys or prose

    _write(tmp_path, "galaxy.yml", "dependencies:\n" + "".join(
        f"  {c}: '*'\n" for c in ("ansible.posix", "a.cb", "b.pb", "c.mod", "d.test", "e.lookup", "f.filter",
                                   "g.role", "h.loop", "i.meta", "j.dep", "k.tmpl", "l.play", "m.roles", "n.utils",
                                   "o.frag", "p.exec")))
    assert undeclared(tmp_path) == []


def test_requirements_yml_pins_every_dependency_at_the_version_the_tests_run_with():
    """requirements.yml (what a controller with ansible-core alone installs) names galaxy.yml's dependencies, no
    more, each at the version installed here - the one the tests run - which satisfies galaxy.yml's floor."""
    from ansible.galaxy.dependency_resolution.versioning import meets_requirements

    installed = installed_collections()
    pinned = {c["name"]: c["version"] for c in yaml.safe_load((ROOT / "requirements.yml").read_text())["collections"]}
    floors = declared(ROOT)
    assert set(pinned) == set(floors)
    assert {name: installed.get(name) for name in pinned} == pinned
    assert all(meets_requirements(pinned[name], spec) for name, spec in floors.items())
