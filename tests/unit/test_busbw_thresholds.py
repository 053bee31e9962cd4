# SPDX-License-Identifier: GPL-3.0-or-later
"""The preflight's floors per instance type (roles/preflight/files/busbw_thresholds.yml), looked up with the role's
own expressions (roles/preflight/tasks/main.yml), as the preflight does on the head's hardware."""

import base64
from pathlib import Path

import pytest
import yaml
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar, trust_as_template

ROOT = Path(__file__).resolve().parents[2]
TABLE = yaml.safe_load((ROOT / "roles/preflight/files/busbw_thresholds.yml").read_text())["instance_types"]
TASKS = yaml.safe_load((ROOT / "roles/preflight/tasks/main.yml").read_text())
AZURE = {"Standard_ND96isr_H100_v5": 460, "Standard_ND96isr_H200_v5": 431, "Standard_ND96asr_v4": 228,
         "Standard_ND96amsr_A100_v4": 228}


def _task(prefix: str) -> dict:
    return next(t for t in TASKS if t["name"].startswith(prefix))


def floor(instance_type: str = "", dmi_product_name: str = "", nodes: int = 1) -> float:
    """The floor the role passes to collective_check, computed by its expressions."""
    lookup = _task("Look up the floor for this hardware")
    check = _task("Measure all-reduce bandwidth")
    variables = {
        "preflight_instance_type": instance_type,
        "preflight_min_busbw_gbps": None,
        "__preflight_dmi": {"content": base64.b64encode(f"{dmi_product_name}\n".encode()).decode()},
        "__preflight_table": TABLE,
        "__preflight_members": [f"n{i}" for i in range(nodes)],
        "__preflight_type": lookup["vars"]["__preflight_type"],
        "__preflight_known": lookup["ansible.builtin.set_fact"]["__preflight_known"],
        "__preflight_scope": lookup["ansible.builtin.set_fact"]["__preflight_scope"],
        "__preflight_floor": check["vars"]["__preflight_floor"],
    }
    templar = Templar(loader=DataLoader(), variables={
        k: trust_as_template(v) if isinstance(v, str) else v for k, v in variables.items()})
    return float(templar.template(trust_as_template("{{ __preflight_floor }}")))


@pytest.mark.parametrize(("size", "gbps"), sorted(AZURE.items()))
def test_azure_vm_sizes_get_azures_single_vm_floor(size, gbps):
    assert floor(instance_type=size) == gbps
    entry = TABLE[size]
    assert entry["gpus"] == 8 and entry["network"] == "IB"
    row = entry["single_node"]
    assert row["vendor_floor"] is True and row["min_busbw_gbps"] == gbps
    assert row["source"].startswith("https://github.com/Azure/azurehpc-health-checks/blob/")
    assert row["source"].endswith(f"/conf/{size.removeprefix('Standard_').lower()}.conf")
    assert len(row["source_date"]) == 10 and row["source_date"][4] == row["source_date"][7] == "-"
    # Azure publishes single-VM floors only: a multi-node cluster of these sizes is measured, not gated
    assert floor(instance_type=size, nodes=2) == 0


def test_the_dmi_product_name_finds_aws_types_but_not_azure_sizes():
    """AWS's DMI product name is the instance type; Azure's is "Virtual Machine": preflight_instance_type it is."""
    assert floor(dmi_product_name="p5.48xlarge", nodes=2) == TABLE["p5.48xlarge"]["multi_node"]["min_busbw_gbps"]
    assert floor(dmi_product_name="Virtual Machine") == 0
    assert floor(instance_type="Standard_ND96isr_H200_v5", dmi_product_name="Virtual Machine") == 431
