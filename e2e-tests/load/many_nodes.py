#!/usr/bin/env python3
"""Many Nodes: bindings spread round-robin over N distinct realistic Nodes
(the stub serves any name from test_data/node-large.json) through real
policy-server, default settings, wrk at full speed. Reports policy-server's
RSS before and after (its get_resource cache holds every Node read in the
last 5 s), bindings/s, and the Node reads the API server received per
second. Loopback only; bounded by --duration.

Usage: many_nodes.py --policy ANNOTATED.wasm [--nodes 10000] [--duration 20]
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

import harness




def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--policy", required=True)
    ap.add_argument("--nodes", type=int, default=10000)
    ap.add_argument("--duration", type=int, default=20)
    args = ap.parse_args()
    missing = [t for t in ("policy-server", "wrk") if shutil.which(t) is None]
    if missing:
        print(f"many Nodes: SKIPPED (not installed: {', '.join(missing)})")
        return 0
    work = tempfile.mkdtemp(prefix="node-metadata-many-")
    processes = []
    try:
        started = harness.default_on_any_node(processes, work, args.policy)
        if started is None:
            print("many Nodes: the stub or policy-server did not start")
            return 1
        stub, base, server = started
        review = json.loads(harness.review("binding-large-node.json"))
        review["request"]["object"]["target"]["name"] = "NODE"
        prefix, suffix = json.dumps(review).split('"NODE"')
        script = os.path.join(work, "many.lua")
        with open(script, "w") as f:
            # Each request binds to the next Node name, round-robin.
            f.write(f"""local i = 0
local prefix = {json.dumps(prefix)}
local suffix = {json.dumps(suffix)}
request = function()
  i = i % {args.nodes} + 1
  return wrk.format("POST", nil, {{["Content-Type"] = "application/json"}}, prefix .. '"node-' .. i .. '"' .. suffix)
end
""")
        harness.post(f"{base}/validate/default", harness.review("binding-large-node.json"))  # warm-up
        rss_before, reads_before = harness.rss_kib(server.pid), harness.node_reads(stub)
        out = subprocess.run(["wrk", "-t2", "-c4", f"-d{args.duration}s", "-s", script, f"{base}/validate/default"],
                             capture_output=True, text=True, timeout=args.duration + 30).stdout
        rss_after, reads = harness.rss_kib(server.pid), harness.node_reads(stub) - reads_before
        rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
        errors = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
        print(f"{args.nodes} Nodes round-robin, {args.duration} s: {rps:,.0f} bindings/s, "
              f"{int(errors.group(1)) if errors else 0} non-2xx; Node reads {reads} ({reads / args.duration:,.0f}/s); "
              f"policy-server RSS {rss_before / 1024:.0f} MiB before, {rss_after / 1024:.0f} MiB after")
        return 0
    finally:
        harness.stop(processes)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
