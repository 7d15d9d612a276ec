"""Record this machine's NVML answers in the shape tests/core/recorded_nvml.py replays.

    python benchmarks/device/record_nvml.py --samples 4 --every 1 > nvml_recorded.json

Run on a machine with an NVIDIA GPU (the device check does): each sample asks every GPU for
its utilisation, memory used, power and temperature exactly as kubelab's NvmlReader does, so a
recorded file can replace the hand-written fixture in tests.
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
    args = parser.parse_args()
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
        about = f"recorded by benchmarks/device/record_nvml.py on {time.strftime('%Y-%m-%d')}"
        driver = pynvml.nvmlSystemGetDriverVersion()
        system = {
            "driver_version": driver.decode() if isinstance(driver, bytes) else driver,
            "cuda_driver_version": pynvml.nvmlSystemGetCudaDriverVersion(),
        }
        print(json.dumps({"_about": about, "system": system, "devices": devices}, indent=1))
    finally:
        pynvml.nvmlShutdown()


if __name__ == "__main__":
    main()
