"""A registered or set_fact variable outranks role vars and defaults: one that reuses a role variable's name
silently replaces that variable for the rest of the play (a list of timers to mask becomes a find result, and
nothing is masked). Names set by tasks must not collide with names the roles define."""
import glob
import os

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def role_variables():
    names = {}
    for path in sorted(glob.glob(os.path.join(ROOT, "roles/*/vars/*.yml"))
                       + glob.glob(os.path.join(ROOT, "roles/*/defaults/*.yml"))):
        with open(path, encoding="utf-8") as handle:
            for name in yaml.safe_load(handle) or {}:
                names.setdefault(name, []).append(os.path.relpath(path, ROOT))
    return names


def tasks(node):
    if isinstance(node, list):
        for item in node:
            yield from tasks(item)
    elif isinstance(node, dict):
        if "register" in node or "ansible.builtin.set_fact" in node or "set_fact" in node:
            yield node
        for key in ("block", "rescue", "always", "tasks", "pre_tasks", "post_tasks", "handlers"):
            yield from tasks(node.get(key))


def task_files():
    patterns = ["roles/*/tasks/*.yml", "roles/*/handlers/*.yml", "playbooks/*.yml", "playbooks/**/*.yml"]
    return sorted({path for pattern in patterns for path in glob.glob(os.path.join(ROOT, pattern), recursive=True)})


def set_names(task):
    if "register" in task:
        yield task["register"]
    facts = task.get("ansible.builtin.set_fact", task.get("set_fact"))
    if isinstance(facts, dict):
        yield from (name for name in facts if name != "cacheable")


def test_task_files_are_found():
    assert len(task_files()) > 50


def test_no_task_sets_a_role_variables_name():
    defined = role_variables()
    assert defined, "no role variables found"
    clashes = []
    for path in task_files():
        with open(path, encoding="utf-8") as handle:
            document = yaml.safe_load(handle)
        for task in tasks(document):
            for name in set_names(task):
                if name in defined:
                    clashes.append(f"{os.path.relpath(path, ROOT)}: task {task.get('name')!r} sets {name},"
                                   f" which {', '.join(defined[name])} defines")
    assert not clashes, "\n".join(clashes)
