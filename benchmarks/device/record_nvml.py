"""Record this machine's NVML answers in the shape tests/core/recorded_nvml.py replays.

    python benchmarks/device/record_nvml.py --samples 4 --every 1 > nvml_recorded.json
    python benchmarks/device/record_nvml.py --processes > nvml_processes.json  # while runs compute

Run on a machine with an NVIDIA GPU (the device check does): each sample asks every GPU for
its utilisation, memory used, power and temperature exactly as kubelab's NvmlReader does, so a
recorded file can replace the hand-written fixture in tests. With `--processes` it also keeps
each round's `nvmlDeviceGetProcessUtilization` answer (what the hub's GPU-idle culling reads),
each pid replaced by a stable name (`process-1`, ...) since a test gives names their own pids;
a round NVML answers NotFound (no kernel ran since the last) is kept as an empty list.
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

import pynvml


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--samples", type=int, default=4)
    parser.add_argument("--every", type=float, default=1.0)
    parser.add_argument("--processes", action="store_true", help="also record per-process rounds")
    args = parser.parse_args()
    names: dict[int, str] = {}
    last_seen: dict[int, int] = {}
    pynvml.nvmlInit()
    try:
        devices: list[dict[str, Any]] = []
        handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(pynvml.nvmlDeviceGetCount())]
        for handle in handles:
            name = pynvml.nvmlDeviceGetName(handle)
            uuid = pynvml.nvmlDeviceGetUUID(handle)
            devices.append(
                {
                    "name": name.decode() if isinstance(name, bytes) else name,
                    "uuid": uuid.decode() if isinstance(uuid, bytes) else uuid,
                    "memory_total": pynvml.nvmlDeviceGetMemoryInfo(handle).total,
                    "utilization": [],
                    "memory_used": [],
                    "power_mw": [],
                    "temperature_c": [],
                }
            )
        for sample in range(args.samples):
            if sample:
                time.sleep(args.every)
            for device, handle in zip(devices, handles, strict=True):
                device["utilization"].append(pynvml.nvmlDeviceGetUtilizationRates(handle).gpu)
                device["memory_used"].append(pynvml.nvmlDeviceGetMemoryInfo(handle).used)
                try:
                    device["power_mw"].append(pynvml.nvmlDeviceGetPowerUsage(handle))
                except pynvml.NVMLError_NotSupported:
                    device["power_mw"] = "NotSupported"
                device["temperature_c"].append(
                    pynvml.nvmlDeviceGetTemperature(handle, pynvml.NVML_TEMPERATURE_GPU)
                )
                if args.processes:
                    index = handles.index(handle)
                    device.setdefault("process_utilization", []).append(
                        process_round(pynvml, handle, last_seen, index, names)
                    )
        about = f"recorded by benchmarks/device/record_nvml.py on {time.strftime('%Y-%m-%d')}"
        driver = pynvml.nvmlSystemGetDriverVersion()
        system = {
            "driver_version": driver.decode() if isinstance(driver, bytes) else driver,
            "cuda_driver_version": pynvml.nvmlSystemGetCudaDriverVersion(),
        }
        print(json.dumps({"_about": about, "system": system, "devices": devices}, indent=1))
    finally:
        pynvml.nvmlShutdown()


def process_round(
    nvml: Any, handle: Any, last_seen: dict[int, int], index: int, names: dict[int, str]
) -> list[dict[str, Any]]:
    """One round of per-process samples newer than the last round's, pids named stably."""
    try:
        samples = nvml.nvmlDeviceGetProcessUtilization(handle, last_seen.get(index, 0))
    except nvml.NVMLError_NotFound:
        return []
    answer = []
    for sample in samples:
        pid = int(sample.pid)
        name = names.setdefault(pid, f"process-{len(names) + 1}")
        last_seen[index] = max(last_seen.get(index, 0), int(sample.timeStamp))
        answer.append(
            {
                "pid": name,
                "timeStamp": int(sample.timeStamp),
                "smUtil": int(sample.smUtil),
                "memUtil": int(sample.memUtil),
                "encUtil": int(sample.encUtil),
                "decUtil": int(sample.decUtil),
            }
        )
    return answer


if __name__ == "__main__":
    main()
