#!/usr/bin/env bash
# Run ansible-test on this checkout: it needs the collection at .../ansible_collections/rayfleet/cluster,
# so copy the tracked (and new, not ignored) files into such a tree and run it there.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
# Outside the repository: inside it, ansible-test would ask git, which ignores the copy.
base="${TMPDIR:-/tmp}/rayfleet-ansible-test"
tree="$base/ansible_collections/rayfleet/cluster"
rm -rf "$base" && mkdir -p "$tree"
cd "$root"
git ls-files -co --exclude-standard | grep -v '^collections/' | tar -cf - -T - | tar -C "$tree" -xf -
# ansible-test bootstraps pip in its sanity venvs with a script fetched from a host that is not a package
# registry; give it tools/ansible-test/get_pip.py (ensurepip + PyPI) under the name it looks for.
pip_version=$(python -c 'from ansible_test._internal.python_requirements import get_venv_packages as g
class P: version = "3.11"
print(g(P())["pip"])')
cache="$HOME/.ansible/test/cache/get_pip_${pip_version//./_}.py"
mkdir -p "$(dirname "$cache")"
cmp -s "$root/tools/ansible-test/get_pip.py" "$cache" || cp "$root/tools/ansible-test/get_pip.py" "$cache"
cd "$tree"
exec ansible-test "$@"
