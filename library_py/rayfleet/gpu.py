# SPDX-License-Identifier: GPL-3.0-or-later
"""A node's GPUs as NVML reports them (nvidia-ml-py), checked against what Ray reports for the node.

Reads, per GPU: index, UUID, name, PCI bus id, memory, persistence mode, ECC mode and uncorrected ECC errors
since boot, row-remapping failures/pending, the PCIe link (current vs maximum width and generation), MIG mode
and NVLink links up; and the driver, CUDA driver and NVML library versions. Then lists what would make the node
unfit for a job: fewer GPUs than expected, another model than expected, a driver older than required, a Ray GPU
count that differs from NVML's (Ray started before the driver, CUDA_VISIBLE_DEVICES set in the unit, a wrong
num_gpus) or a Ray accelerator type that is not this GPU, duplicate UUIDs (two containers given the same GPU),
uncorrected ECC errors, a GPU whose memory rows need remapping (reset it), a PCIe link running narrower than the
slot allows, an NVLink link down where its peers are up, and an NVML library that is not the running driver's.

Examples (on a node, in the Ray venv):
  python -m rayfleet.gpu                      # table
  python -m rayfleet.gpu --json --expect 8    # fail (exit 1) unless 8 healthy GPUs (Xids from the kernel log too)
  python -m rayfleet.gpu --dcgm-diag 1        # and DCGM's level-1 diagnostic passes (dcgmi diag -r 1)
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Gpu:
    index: int
    uuid: str
    name: str
    pci_bus_id: str = ""
    memory_total_mib: int = 0
    persistence_mode: bool | None = None
    ecc_enabled: bool | None = None
    ecc_uncorrected_volatile: int | None = None
    remap_failure: bool | None = None
    remap_pending: bool | None = None
    pcie_width: int | None = None
    pcie_max_width: int | None = None
    pcie_gen: int | None = None
    mig_mode: bool | None = None  # MIG enabled (current mode); None where the GPU has no MIG
    nvlink_up: int | None = None  # NVLink links active; None where the GPU has no NVLink
    nvlink_total: int | None = None  # NVLink links the GPU has (active or not)


@dataclass
class NvmlReport:
    available: bool
    reason: str = ""  # why NVML could not be read (no driver, no library, ...)
    driver_version: str = ""
    cuda_driver_version: str = ""
    nvml_version: str = ""
    gpus: list[Gpu] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["count"] = len(self.gpus)
        return data


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def read_nvml(nvml: Any = None) -> NvmlReport:
    """Read every GPU through NVML; ``nvml`` is the pynvml module (injectable for tests)."""
    if nvml is None:
        try:
            import pynvml as nvml
        except ImportError as exc:
            try:  # Ray's own copy, in any image that has Ray (e.g. a container node's image)
                from ray._private.thirdparty import pynvml as nvml
            except ImportError:
                return NvmlReport(False, f"nvidia-ml-py is not installed in this Python ({exc})")
    try:
        nvml.nvmlInit()
    except nvml.NVMLError as exc:
        code = getattr(exc, "value", None)
        if code == nvml.NVML_ERROR_LIBRARY_NOT_FOUND:
            reason = "no NVIDIA driver on this host (libnvidia-ml.so.1 not found)"
        elif code == nvml.NVML_ERROR_DRIVER_NOT_LOADED:
            reason = "the NVIDIA kernel module is not loaded (driver installed but not running: reboot or modprobe)"
        elif code == getattr(nvml, "NVML_ERROR_LIB_RM_VERSION_MISMATCH", 18):
            reason = ("driver/library version mismatch: the kernel module that runs is not the installed driver "
                      "(an upgrade without a reboot: reboot, or run the nvidia_driver role)")
        else:
            reason = f"NVML could not start: {exc}"
        return NvmlReport(False, reason)
    try:
        def maybe(fn, *args):
            try:
                return fn(*args)
            except nvml.NVMLError:  # not supported on this GPU/driver
                return None

        report = NvmlReport(True, driver_version=_text(nvml.nvmlSystemGetDriverVersion()))
        cuda = maybe(nvml.nvmlSystemGetCudaDriverVersion)
        if cuda:
            report.cuda_driver_version = f"{cuda // 1000}.{cuda % 1000 // 10}"
        library = maybe(nvml.nvmlSystemGetNVMLVersion)
        report.nvml_version = _text(library) if library is not None else ""
        for i in range(nvml.nvmlDeviceGetCount()):
            h = nvml.nvmlDeviceGetHandleByIndex(i)
            ecc = maybe(nvml.nvmlDeviceGetEccMode, h)
            ecc_on = bool(ecc[0]) if ecc else None
            remap = maybe(nvml.nvmlDeviceGetRemappedRows, h)
            pci = maybe(nvml.nvmlDeviceGetPciInfo, h)
            mem = maybe(nvml.nvmlDeviceGetMemoryInfo, h)
            persistence = maybe(nvml.nvmlDeviceGetPersistenceMode, h)
            mig = maybe(nvml.nvmlDeviceGetMigMode, h)
            links = _nvlinks(nvml, h, maybe)
            report.gpus.append(Gpu(
                index=i, uuid=_text(nvml.nvmlDeviceGetUUID(h)), name=_text(nvml.nvmlDeviceGetName(h)),
                pci_bus_id=_text(pci.busId) if pci is not None else "",
                memory_total_mib=int(mem.total // (1 << 20)) if mem is not None else 0,
                persistence_mode=bool(persistence) if persistence is not None else None,
                ecc_enabled=ecc_on,
                ecc_uncorrected_volatile=maybe(nvml.nvmlDeviceGetTotalEccErrors, h,
                                               nvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, nvml.NVML_VOLATILE_ECC)
                if ecc_on else None,
                remap_pending=bool(remap[2]) if remap else None,
                remap_failure=bool(remap[3]) if remap else None,
                pcie_width=maybe(nvml.nvmlDeviceGetCurrPcieLinkWidth, h),
                pcie_max_width=maybe(nvml.nvmlDeviceGetMaxPcieLinkWidth, h),
                pcie_gen=maybe(nvml.nvmlDeviceGetCurrPcieLinkGeneration, h),
                mig_mode=bool(mig[0]) if mig else None,
                nvlink_up=links[0] if links else None,
                nvlink_total=links[1] if links else None,
            ))
        return report
    finally:
        nvml.nvmlShutdown()


# --- AMD GPUs: the same facts through AMD's SMI tools (JSON output; no ROCm Python binding is assumed) ----------
AMD_SMI_PATHS = ("/opt/rocm/bin/amd-smi", "/usr/bin/amd-smi")
ROCM_SMI_PATHS = ("/opt/rocm/bin/rocm-smi", "/usr/bin/rocm-smi")


def _first_tool(paths: tuple[str, ...], name: str) -> str | None:
    for path in paths:
        if os.access(path, os.X_OK):
            return path
    return shutil.which(name)


def _mib(value: Any, unit: str = "B") -> int:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return 0
    return int(number * {"B": 1 / (1 << 20), "KB": 1 / 1024, "MB": 1, "MiB": 1, "GB": 1024, "GiB": 1024}.get(unit, 0))


def parse_amd_smi(static: Any) -> NvmlReport:
    """``amd-smi static --asic --bus --vram --driver --json`` (ROCm 6: a list of GPUs, or {"gpu_data": [...]})."""
    gpus_data = static.get("gpu_data", []) if isinstance(static, dict) else static
    report = NvmlReport(True)
    for item in gpus_data or []:
        asic, bus, vram = item.get("asic") or {}, item.get("bus") or {}, item.get("vram") or {}
        size = vram.get("size")
        memory = _mib(size.get("value"), size.get("unit", "MB")) if isinstance(size, dict) else _mib(size, "MB")
        driver = item.get("driver") or {}
        report.driver_version = report.driver_version or str(driver.get("version", ""))
        report.gpus.append(Gpu(index=int(item.get("gpu", len(report.gpus))),
                               uuid=str(asic.get("asic_serial") or item.get("uuid") or ""),
                               name=str(asic.get("market_name") or asic.get("name") or ""),
                               pci_bus_id=str(bus.get("bdf") or item.get("bdf") or ""), memory_total_mib=memory))
    return report


def parse_rocm_smi(data: dict[str, Any]) -> NvmlReport:
    """``rocm-smi --showproductname --showbus --showuniqueid --showmeminfo vram --showdriverversion --json``."""
    report = NvmlReport(True, driver_version=str((data.get("system") or {}).get("Driver version", "")))
    cards = sorted((k for k in data if k.startswith("card")), key=lambda k: int(k[4:]) if k[4:].isdigit() else 0)
    for i, key in enumerate(cards):
        card = data[key]
        report.gpus.append(Gpu(index=i, uuid=str(card.get("Unique ID", "")),
                               name=str(card.get("Card series") or card.get("Card model") or ""),
                               pci_bus_id=str(card.get("PCI Bus", "")),
                               memory_total_mib=_mib(card.get("VRAM Total Memory (B)"), "B")))
    return report


def read_amd() -> NvmlReport:
    """AMD GPUs through amd-smi (ROCm >= 6) or rocm-smi (older, Debian's 5.2); the reason when neither can."""
    amd_smi = _first_tool(AMD_SMI_PATHS, "amd-smi")
    rocm_smi = _first_tool(ROCM_SMI_PATHS, "rocm-smi")
    if amd_smi:
        cmd = [amd_smi, "static", "--asic", "--bus", "--vram", "--driver", "--json"]
        parse = parse_amd_smi
    elif rocm_smi:
        cmd = [rocm_smi, "--showproductname", "--showbus", "--showuniqueid", "--showmeminfo", "vram",
               "--showdriverversion", "--json"]
        parse = parse_rocm_smi
    else:
        return NvmlReport(False, "no AMD SMI tool on this host (amd-smi or rocm-smi: run the rocm role)")
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=60, check=False)
    text = proc.stdout.strip()
    start = min((i for i in (text.find("{"), text.find("[")) if i >= 0), default=-1)
    try:
        data = json.loads(text[start:]) if start >= 0 else None
    except ValueError:
        data = None
    if data is None:
        why = (proc.stderr.strip() or text)[-300:] or f"exit {proc.returncode}"
        return NvmlReport(False, f"{Path(cmd[0]).name} lists no AMD GPU here ({why})")
    report = parse(data)
    if not report.gpus:
        return NvmlReport(False, f"{Path(cmd[0]).name} lists no AMD GPU here")
    return report


def read_gpus(vendor: str = "auto") -> tuple[str, NvmlReport]:
    """(vendor, report): NVML for nvidia; the SMI tools for amd; auto tries NVML, then AMD's tools where present."""
    if vendor == "amd":
        return "amd", read_amd()
    report = read_nvml()
    if vendor == "auto" and not report.available and (
            _first_tool(AMD_SMI_PATHS, "amd-smi") or _first_tool(ROCM_SMI_PATHS, "rocm-smi")):
        amd = read_amd()
        if amd.available:
            return "amd", amd
        return "amd", NvmlReport(False, f"{report.reason}; {amd.reason}")
    return "nvidia", report


def _nvlinks(nvml: Any, handle: Any, maybe) -> tuple[int, int] | None:
    """(links active, links present) of a GPU; None when it has no NVLink."""
    up = present = 0
    for link in range(getattr(nvml, "NVML_NVLINK_MAX_LINKS", 18)):
        state = maybe(nvml.nvmlDeviceGetNvLinkState, handle, link)
        if state is None:  # no such link (or no NVLink at all)
            continue
        present += 1
        up += 1 if state else 0
    return (up, present) if present else None


def version_tuple(version: str) -> tuple[int, ...]:
    """'570.86.15' -> (570, 86, 15); non-numeric parts end it."""
    out = []
    for part in version.split("."):
        if not part.isdigit():
            break
        out.append(int(part))
    return tuple(out)


def accelerator_type_matches(ray_type: str, gpu_name: str) -> bool:
    """Whether Ray's accelerator type (``H100``, ``A100``, ``L4``...) names this NVML model.

    Ray derives the type from the model name (``NVIDIA H100 80GB HBM3`` -> ``H100``); a type that is not a word of
    the name means the node was started with another GPU or a hand-set resource.
    """
    name = f" {' '.join(gpu_name.upper().replace('-', ' ').split())} "
    wanted = f" {' '.join(ray_type.upper().replace('-', ' ').split())} "
    # AMD types are the product name itself (AMD-Instinct-MI300X-OAM for "AMD Instinct MI300X"): either within the other
    return wanted in name or (len(wanted.split()) > 1 and name in wanted)


# --- Xid events: the driver's own error reports in the kernel log -------------------------------------------
# "NVRM: Xid (PCI:0000:18:00): 79, pid=1234, name=python, GPU has fallen off the bus." (older drivers omit pid/name)
XID_LINE = re.compile(r"NVRM: Xid \((?:PCI:)?([0-9a-fA-F]+:[0-9a-fA-F]{2}:[0-9a-fA-F]{2})(?:\.\d)?\): (\d+),? ?(.*)")
# Xids that mean the GPU or its links need service (NVIDIA's Xid catalog); the rest are mostly the application's
# (13 graphics engine exception, 31 MMU fault, 43 reset channel, 45 preemptive cleanup, ...)
HARDWARE_XIDS = {
    48: "double-bit ECC error", 61: "internal micro-controller breakpoint", 62: "internal micro-controller halt",
    63: "ECC page retirement or row remapping recorded", 64: "ECC page retirement or row remapping failed",
    74: "NVLink error", 79: "GPU has fallen off the bus", 92: "high single-bit ECC error rate",
    94: "contained ECC error", 95: "uncontained ECC error", 119: "GSP RPC timeout", 120: "GSP error",
    140: "unrecovered ECC error",
}


@dataclass(frozen=True)
class XidEvent:
    bus_id: str  # as the driver wrote it, e.g. 0000:18:00
    xid: int
    detail: str


def parse_xids(lines: list[str]) -> list[XidEvent]:
    events = []
    for line in lines:
        m = XID_LINE.search(line)
        if m:
            events.append(XidEvent(m.group(1), int(m.group(2)), m.group(3).strip()))
    return events


def bus_key(bus_id: str) -> tuple[int, int, int]:
    """(domain, bus, device) of a PCI address in NVML's (00000000:18:00.0) or the driver's (0000:18:00) form."""
    domain, bus, rest = bus_id.split(":")[:3]
    return int(domain, 16), int(bus, 16), int(rest.split(".")[0], 16)


def parse_kmsg_records(records: list[bytes]) -> tuple[list[str], int | None]:
    """Messages of /dev/kmsg records ("prio,seq,usec,flags;text\\n KEY=value..."), and the first record's sequence
    number (above 0: the kernel's ring buffer no longer holds the start of this boot)."""
    lines: list[str] = []
    first: int | None = None
    for record in records:
        head, sep, text = record.decode("utf-8", errors="replace").partition(";")
        if not sep:
            continue
        fields = head.split(",")
        if first is None and len(fields) > 1 and fields[1].isdigit():
            first = int(fields[1])
        lines.append(text.split("\n", 1)[0])
    return lines, first


def read_kmsg(path: str = "/dev/kmsg") -> tuple[list[str] | None, str]:
    """This boot's kernel messages still in the ring buffer, read from /dev/kmsg (one record per read), or
    (None, why not). The note says when the buffer has already dropped the oldest messages."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as exc:
        return None, f"{path} cannot be read ({exc.strerror})"
    records: list[bytes] = []
    try:
        while len(records) < 1_000_000:
            try:
                record = os.read(fd, 8192)
            except BlockingIOError:  # no more records
                break
            except BrokenPipeError:  # the record was overwritten while reading: go on with the next one
                continue
            except OSError as exc:
                return None, f"reading {path} failed ({exc.strerror})"
            if not record:
                break
            records.append(record)
    finally:
        os.close(fd)
    lines, first = parse_kmsg_records(records)
    note = (f"read from {path}: the kernel's ring buffer no longer holds the first {first} message(s) of this "
            "boot, so older Xids may be missing" if first else "")
    return lines, note


def read_kernel_xids() -> tuple[list[XidEvent] | None, str]:
    """Xid events in this boot's kernel log: journald's, else /dev/kmsg's ring buffer (hosts and VMs without
    journald). (events, a note - non-empty when the kernel's buffer has lost messages) or (None, why not)."""
    journalctl = shutil.which("journalctl")
    if journalctl is None:
        lines, note = read_kmsg()
        if lines is None:
            return None, f"no journalctl on this host, and {note}"
        return parse_xids(lines), note
    proc = subprocess.run([journalctl, "-k", "-b", "-o", "cat", "--no-pager"], capture_output=True, text=True,
                          timeout=60, check=False)
    if proc.returncode != 0:
        return None, f"journalctl -k failed: {proc.stderr.strip()[-200:]}"
    return parse_xids(proc.stdout.splitlines()), ""


def xid_findings(report: NvmlReport, events: list[XidEvent], fail_on: set[int]) -> tuple[list[str], list[str]]:
    """Each GPU's Xids since boot: those in fail_on are problems, the others warnings."""
    bad: list[str] = []
    warn: list[str] = []
    by_bus = {bus_key(g.pci_bus_id): g for g in report.gpus if g.pci_bus_id}
    grouped: dict[tuple[str, int], list[XidEvent]] = {}
    for e in events:
        grouped.setdefault((e.bus_id, e.xid), []).append(e)
    for (bus, xid), found in sorted(grouped.items()):
        try:
            g = by_bus.get(bus_key(bus))
        except ValueError:
            g = None
        who = f"GPU {g.index} ({g.uuid}, {g.pci_bus_id})" if g else f"the GPU at {bus} (not listed by NVML now)"
        what = HARDWARE_XIDS.get(xid, "see NVIDIA's Xid catalog")
        line = (f"{who}: Xid {xid} ({what}) {len(found)} time(s) since boot, last: "
                f"{found[-1].detail[:160] or 'no detail'}")
        (bad if xid in fail_on else warn).append(line)
    return bad, warn


def problems(report: NvmlReport, *, expect: int | None = None, ray_gpus: float | None = None,
             check_pcie: bool = True, expect_model: str | None = None, min_driver: str | None = None,
             fail_on_ecc: bool = True, ray_accelerator_types: list[str] | None = None,
             check_nvlink: bool = True, ray_gpus_expected: int | None = None) -> tuple[list[str], list[str]]:
    """(problems that make the node unfit, warnings) for a report; each names the GPU by index and UUID.

    ``ray_gpus`` is what Ray reports for this host's node(s) of the cluster; it must equal ``ray_gpus_expected``
    when given (the GPUs given to the cluster's containers here: ray_container_gpus, ray_node_instances), else
    NVML's count of the host's GPUs."""
    bad: list[str] = []
    warn: list[str] = []
    count = len(report.gpus)
    if not report.available:
        if expect:
            bad.append(f"expected {expect} GPU(s), but {report.reason}")
        return bad, warn
    if expect is not None and count != expect:
        bad.append(f"NVML sees {count} GPU(s), expected {expect}: "
                   + (", ".join(f"{g.index}:{g.name}" for g in report.gpus) or "none"))
    if ray_gpus is not None and ray_gpus_expected is not None:
        if abs(float(ray_gpus) - ray_gpus_expected) > 1e-6:
            bad.append(f"Ray reports {float(ray_gpus):g} GPU(s) on this host's node(s), but {ray_gpus_expected} of "
                       f"NVML's {count} were given to them (ray_container_gpus / ray_node_instances): a container "
                       "started without its GPUs, or num_gpus set wrong (ray_num_gpus)")
    elif ray_gpus is not None and abs(float(ray_gpus) - count) > 1e-6:
        bad.append(f"Ray reports {float(ray_gpus):g} GPU(s) on this node, NVML {count}: Ray started before the driver, "
                   "a CUDA_VISIBLE_DEVICES in its environment, or num_gpus set wrong (ray_num_gpus)")
    if min_driver and version_tuple(report.driver_version) < version_tuple(min_driver):
        bad.append(f"driver {report.driver_version} is older than the required {min_driver}")
    if report.nvml_version and report.driver_version and not report.nvml_version.endswith(report.driver_version):
        bad.append(f"NVML library {report.nvml_version} is not the running driver {report.driver_version}: "
                   "an upgrade without a reboot")
    if ray_accelerator_types is not None and count:
        names = sorted({g.name for g in report.gpus})
        if not ray_accelerator_types:
            warn.append(f"Ray reports no accelerator_type resource for this node's {', '.join(names)}")
        for t in ray_accelerator_types:
            if not all(accelerator_type_matches(t, n) for n in names):
                bad.append(f"Ray reports accelerator_type:{t} on this node, NVML sees {', '.join(names)}: "
                           "tasks asking for that type would land on the wrong GPU")
    links_up = {g.nvlink_up for g in report.gpus if g.nvlink_total}
    seen: dict[str, int] = {}
    for g in report.gpus:
        label = f"GPU {g.index} ({g.uuid}, {g.pci_bus_id or 'bus ?'})"
        if g.uuid in seen:
            bad.append(f"{label} has the same UUID as GPU {seen[g.uuid]}: one GPU is assigned twice")
        seen.setdefault(g.uuid, g.index)
        if expect_model and expect_model.lower() not in g.name.lower():
            bad.append(f"{label} is a {g.name}, expected {expect_model}")
        if g.ecc_uncorrected_volatile:
            (bad if fail_on_ecc else warn).append(
                f"{label} has {g.ecc_uncorrected_volatile} uncorrected ECC error(s) since boot")
        if check_nvlink and g.nvlink_total and g.nvlink_up is not None and g.nvlink_up < max(links_up):
            bad.append(f"{label}: {g.nvlink_up} of {g.nvlink_total} NVLink links up, its peers have {max(links_up)} "
                       "(a link down: GPU-to-GPU traffic falls back to PCIe)")
        if g.mig_mode:
            warn.append(f"{label}: MIG mode is on; Ray schedules whole GPUs, so MIG instances are not used as such")
        if g.remap_failure:
            bad.append(f"{label}: row remapping failed (the GPU needs service)")
        elif g.remap_pending:
            bad.append(f"{label}: row remapping pending (reset the GPU or reboot before use)")
        if check_pcie and g.pcie_width and g.pcie_max_width and g.pcie_width < g.pcie_max_width:
            bad.append(f"{label}: PCIe link x{g.pcie_width} of x{g.pcie_max_width} (degraded link or riser)")
        if g.persistence_mode is False:
            warn.append(f"{label}: persistence mode off (nvidia-persistenced not running): slower first CUDA calls")
        if g.ecc_enabled is False:
            warn.append(f"{label}: ECC is off")
    return bad, warn


def format_table(report: NvmlReport) -> str:
    if not report.available:
        return f"no GPUs read: {report.reason}"
    rows = [("IDX", "NAME", "UUID", "BUS", "MEM_MIB", "PCIE", "NVLINK", "ECC_UNCORR", "PERSIST", "MIG")]
    onoff = {True: "on", False: "off", None: "-"}
    for g in report.gpus:
        rows.append((str(g.index), g.name, g.uuid, g.pci_bus_id, str(g.memory_total_mib),
                     f"gen{g.pcie_gen} x{g.pcie_width}/x{g.pcie_max_width}" if g.pcie_width else "-",
                     f"{g.nvlink_up}/{g.nvlink_total}" if g.nvlink_total else "-",
                     "-" if g.ecc_uncorrected_volatile is None else str(g.ecc_uncorrected_volatile),
                     onoff[g.persistence_mode], onoff[g.mig_mode]))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]
    lines.append(f"driver {report.driver_version}, CUDA {report.cuda_driver_version or '?'}, {len(report.gpus)} GPU(s)")
    return "\n".join(lines)


def resolve_assignment(report: NvmlReport, wanted: list[Any]) -> list[str]:
    """The UUIDs of the GPUs given to a container, from the indices or UUIDs the inventory lists (in its order).

    Raises SettingsError naming an index this host does not have, a UUID of no GPU here, or a GPU listed twice."""
    from rayfleet.errors import SettingsError  # here: this module also runs alone, piped to a host's python3

    by_index = {g.index: g.uuid for g in report.gpus}
    known = {g.uuid for g in report.gpus}
    out: list[str] = []
    for item in wanted:
        text = str(item).strip()
        if text.isdigit():
            if int(text) not in by_index:
                raise SettingsError(f"GPU {text}: no such index; this host has {len(by_index)} GPU(s)"
                                    + (f" (0-{len(by_index) - 1})" if by_index else ""))
            uuid = by_index[int(text)]
        elif text in known:
            uuid = text
        else:
            raise SettingsError(f"GPU {text!r}: neither an index nor the UUID of one of this host's GPUs "
                                f"({', '.join(sorted(known)) or 'none'})")
        if uuid in out:
            raise SettingsError(f"GPU {text}: listed twice ({uuid})")
        out.append(uuid)
    return out


def container_gpu_problems(name: str, assigned: list[str], seen: list[str],
                           others: Mapping[str, list[str]]) -> list[str]:
    """What is wrong with the GPUs a container sees: one of its GPUs missing, a GPU it was not given, or a GPU
    another container on the host also sees (``others``: container name -> the UUIDs it sees)."""
    found: list[str] = []
    missing = [u for u in assigned if u not in seen]
    extra = [u for u in seen if u not in assigned]
    if missing:
        found.append(f"container {name} does not see its GPU(s) {', '.join(missing)}")
    if extra:
        found.append(f"container {name} sees GPU(s) it was not given: {', '.join(extra)}")
    for other, theirs in sorted(others.items()):
        both = sorted(set(seen) & set(theirs))
        if both:
            found.append(f"containers {name} and {other} both see GPU(s) {', '.join(both)}")
    return found


def container_gpus(engine: str, name: str, python: str = "python", run: Any = subprocess.run) -> list[str]:
    """The UUIDs NVML lists inside a running container (the rayfleet library is mounted there by the ray role)."""
    from rayfleet.errors import RayfleetError  # here: this module also runs alone, piped to a host's python3

    cmd = [engine, "exec", name, python, "-m", "rayfleet.gpu", "--json", "--no-xid", "--vendor", "nvidia"]
    try:
        proc = run(cmd, capture_output=True, text=True, timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise RayfleetError(f"{' '.join(cmd)}: {exc}") from None
    try:
        data = json.loads(proc.stdout)
    except ValueError:
        raise RayfleetError(f"{' '.join(cmd)} (rc={proc.returncode}) printed no GPU report: "
                            f"{(proc.stderr or proc.stdout).strip()[-400:]}") from None
    if not data.get("available"):
        # A container without the driver injected has no libnvidia-ml: it sees no GPU.
        return []
    return [g["uuid"] for g in data.get("gpus", [])]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m rayfleet.gpu", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--expect", type=int, help="the number of GPUs this node must have")
    parser.add_argument("--ray-gpus", type=float, help="the GPU count Ray reports for this node, to compare")
    parser.add_argument("--model", help="the GPU model every GPU must be (a part of its name, e.g. H100)")
    parser.add_argument("--min-driver", help="the oldest driver version accepted, e.g. 535.104")
    parser.add_argument("--no-xid", dest="xid", action="store_false",
                        help="skip reading Xid events from the kernel log")
    parser.add_argument("--vendor", choices=["auto", "nvidia", "amd"], default="auto")
    parser.add_argument("--dcgm-diag", type=int, choices=[1, 2, 3, 4], metavar="LEVEL",
                        help="also run DCGM's diagnostic (dcgmi diag -r LEVEL) and fail on a failed test")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    vendor, report = read_gpus(args.vendor)
    bad, warn = problems(report, expect=args.expect, ray_gpus=args.ray_gpus, expect_model=args.model,
                         min_driver=args.min_driver)
    if args.xid and vendor == "nvidia" and report.available and report.gpus:
        events, why_not = read_kernel_xids()
        if events is None:
            warn.append(f"Xid events not read: {why_not}")
        else:
            if why_not:
                warn.append(f"Xid events {why_not}")
            xid_bad, xid_warn = xid_findings(report, events, set(HARDWARE_XIDS))
            bad += xid_bad
            warn += xid_warn
    if args.dcgm_diag and vendor == "nvidia" and report.available and report.gpus:
        from rayfleet.dcgm import TIMEOUTS, diag_findings, run_diag

        diag, why_not = run_diag(args.dcgm_diag, TIMEOUTS[args.dcgm_diag])
        if diag is None:
            bad.append(f"DCGM diag -r {args.dcgm_diag} could not run: {why_not}")
        else:
            diag_bad, diag_warn = diag_findings(diag, {g.index: g.uuid for g in report.gpus}, args.dcgm_diag)
            bad += diag_bad
            warn += diag_warn
    if args.json:
        print(json.dumps({**report.to_dict(), "vendor": vendor, "problems": bad, "warnings": warn}, indent=2))
    else:
        print(format_table(report))
        for line in bad:
            print(f"PROBLEM: {line}")
        for line in warn:
            print(f"warning: {line}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
