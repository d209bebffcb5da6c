#!/usr/bin/python3
"""Scrapes neuron-monitor (http://127.0.0.1:9641/metrics, socket-activated) and checks
the text with prometheus_client's parser (Debian's python3-prometheus-client): every
family the README lists is there, typed, and holds what the host's state implies.

  metrics_check.py [--expect-tenant] [--expect-reclaim] [--out FILE] [--url URL] [--backend kmd|emu]
"""
import argparse
import sys
import urllib.request

from prometheus_client.parser import text_string_to_metric_families

FAMILIES = {
    "neuron_up": "gauge",
    "neuron_device_info": "gauge",
    "neuron_device_cores": "gauge",
    "neuron_device_hbm_bytes": "gauge",
    "neuron_device_hbm_used_bytes": "gauge",
    "neuron_device_utilization_ratio": "gauge",
    "neuron_core_busy_seconds": "counter",  # the parser drops _total from counter names
    "neuron_core_utilization_ratio": "gauge",
    "neuron_core_commands": "counter",
    "neuron_core_lease_info": "gauge",
    "neuron_core_tile_seconds": "gauge",
    "neuron_pool_cores": "gauge",
    "neuron_pool_queue_depth": "gauge",
    "neuron_pool_latency_p99_seconds": "gauge",
    "neuron_loans_open": "gauge",
    "neuron_tenant_busy_seconds": "counter",
    "neuron_tenant_latency_seconds": "gauge",
    "neuron_tenant_queue_depth": "gauge",
    "neuron_tenant_hbm_used_bytes": "gauge",
    "neuron_faults": "counter",
    "neuron_core_resets": "counter",
    "neuron_loans": "counter",
    "neuron_reclaim_seconds": "histogram",
    "neuron_reclaims_late": "counter",
}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--expect-tenant", action="store_true")
    ap.add_argument("--expect-reclaim", action="store_true")
    ap.add_argument("--out")
    ap.add_argument("--url", default="http://127.0.0.1:9641/metrics")
    ap.add_argument("--backend", default="kmd")
    args = ap.parse_args()
    with urllib.request.urlopen(args.url, timeout=60) as r:
        ctype = r.headers.get("Content-Type", "")
        text = r.read().decode()
    if args.out:
        open(args.out, "w").write(text)
    assert ctype.startswith("text/plain") and "version=0.0.4" in ctype, f"Content-Type {ctype}"
    fams = {f.name: f for f in text_string_to_metric_families(text)}
    for name, typ in FAMILIES.items():
        assert name in fams, f"metric family {name} missing"
        assert fams[name].type == typ, f"{name} is a {fams[name].type}, not a {typ}"

    def samples(name, suffix=""):
        return [s for s in fams[name].samples if s.name == name + suffix]

    assert samples("neuron_up")[0].value == 1, "neuron_up is not 1"
    info = samples("neuron_device_info")
    assert info and all(s.labels["backend"] == args.backend for s in info), f"device info: {info}"
    # One busy counter per core of every device (the install test's host has two).
    cores = sum(s.value for s in samples("neuron_device_cores"))
    busy_cores = samples("neuron_core_busy_seconds", "_total")
    assert len(busy_cores) == cores, f"{len(busy_cores)} core busy counters for {cores:.0f} cores"
    assert sum(s.value for s in busy_cores) > 0, "no core time (the demo ran)"
    assert all(s.value > 0 for s in samples("neuron_device_hbm_bytes")), "a device without HBM"
    if args.expect_tenant:
        busy = samples("neuron_tenant_busy_seconds", "_total")
        assert busy, "no tenant while neuron-demo is connected"
        assert any(s.labels["kind"] in ("training", "inference") for s in busy)
        assert samples("neuron_tenant_hbm_used_bytes") and max(s.value for s in samples("neuron_tenant_hbm_used_bytes")) > 0
    if args.expect_reclaim:
        assert {s.labels["state"] for s in samples("neuron_loans_open")} == {"active", "reclaiming"}, "open loans by state"
        assert samples("neuron_loans", "_total")[0].value >= 1, "the lend is not counted"
        count = samples("neuron_reclaim_seconds", "_count")[0].value
        assert count >= 1, "the reclaim is not counted"
        inf = [s for s in samples("neuron_reclaim_seconds", "_bucket") if s.labels["le"] == "+Inf"][0].value
        assert inf == count, "histogram +Inf bucket != count"
    print(f"{len(fams)} metric families parsed")


if __name__ == "__main__":
    try:
        main()
    except AssertionError as e:
        sys.exit(f"metrics check: {e}")
