#!/usr/bin/env python3
"""Writes the cluster files of the published runs (configs/published/*.json): Selene-like A100
machines for Megatron-LM 2021 and H100 machines for Megatron-Core 2024, 8 GPUs each, sized for
every run in configs/published/runs.json. Run it again after editing the specs below."""
import json, os, sys

root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "configs", "published")

SPECS = {
    "selene": {
        "comment": "{machines} machines x 8 A100-SXM4-80GB as on Selene (arXiv 2104.04473): NVLink 3 through "
                   "NVSwitch, 300 GB/s per GPU each way; 8 x 200 Gb/s HDR InfiniBand per machine, one 25 GB/s "
                   "port per GPU, 5 us.",
        "intra": {"type": "nvlink3-nvswitch", "bandwidth_gb_per_s": 300, "latency_us": 2},
        "inter": {"type": "infiniband-hdr-200", "bandwidth_gb_per_s": 25, "latency_us": 5},
        "device": {"kind": "gpu", "model": "A100-SXM4-80GB", "count": 8,
                   "tflops": {"f32": 19.5, "f16": 312, "f64": 9.7}, "memory_gb": 80,
                   "memory_bandwidth_gb_per_s": 2039, "profile": "../devices/a100-sxm4-80gb.json"},
    },
    "h100": {
        "comment": "{machines} machines x 8 H100-SXM5-80GB (Megatron-Core's H100 runs, its README): NVLink 4 "
                   "through NVSwitch, 450 GB/s per GPU each way; 8 x 400 Gb/s NDR InfiniBand per machine, one "
                   "50 GB/s port per GPU, 5 us.",
        "intra": {"type": "nvlink4-nvswitch", "bandwidth_gb_per_s": 450, "latency_us": 2},
        "inter": {"type": "infiniband-ndr-400", "bandwidth_gb_per_s": 50, "latency_us": 5},
        "device": {"kind": "gpu", "model": "H100-SXM5-80GB", "count": 8,
                   "tflops": {"f32": 67, "f16": 989, "f64": 34}, "memory_gb": 80,
                   "memory_bandwidth_gb_per_s": 3350, "profile": "../devices/h100-sxm5-80gb.json"},
    },
}

def main():
    runs = json.load(open(os.path.join(root, "runs.json")))["runs"]
    wanted = sorted({(r["cluster"].split("_")[0], r["gpus"]) for r in runs})
    for kind, gpus in wanted:
        spec = SPECS[kind]
        if gpus % 8:
            sys.exit(f"{kind} with {gpus} GPUs: not whole machines of 8")
        cluster = {
            "cohort_cluster": 1,
            "comment": spec["comment"].format(machines=gpus // 8),
            "inter_link": spec["inter"],
            "machines": [{"hostname": "node{i}", "port": 7000, "count": gpus // 8,
                          "intra_link": spec["intra"], "devices": [spec["device"]]}],
        }
        path = os.path.join(root, f"{kind}_{gpus}.json")
        with open(path, "w") as f:
            json.dump(cluster, f, indent=2)
            f.write("\n")
        print(path)

main()
