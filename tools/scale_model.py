#!/usr/bin/env python3
"""scale_model.py: the paper model of docs/scale.md: steps, bytes and modelled time of one
all_reduce per GPU at 1k, 4k, 16k and 64k GPUs (8 per host), for zcoll's log-depth algorithms
and for NCCL's ring and tree, from the formulas that document gives. Not a measurement: the
constants below are assumptions, printed with the table; change them with the options."""
import argparse
import math


def lg(x):
    return math.ceil(math.log2(x)) if x > 1 else 0


def model(g, per_host, s, a_host, a_net, b_host, b_net):
    """Rows (name, steps, intra-host bytes per GPU, NIC bytes per GPU, seconds) for an all_reduce
    of s bytes on g GPUs, per_host per host, ranks numbered host by host."""
    h = max(1, g // per_host)
    lh, lg_, lp = lg(h), lg(g), lg(per_host)
    rows = []
    # zcoll recursive doubling (small): log2 g steps, the first log2(per_host) inside a host
    # (partners u ^ 1, u ^ 2, u ^ 4 share it when ranks are numbered host by host).
    rows.append(("zcoll RD", lg_, s * lp, s * lh, lp * (a_host + s * b_host) + lh * (a_net + s * b_net)))
    # zcoll hierarchical recursive doubling (small, blocks of per_host ranks, a power of two):
    # up the host's tree (log2 per_host steps), recursive doubling among the h leaders, down
    # again; a host's ranks send 2 (per_host - 1) messages inside it, only its leader crosses.
    rows.append(("zcoll HRD", 2 * lp + lh, 2 * s * (per_host - 1) / per_host, s * lh / per_host,
                 2 * lp * (a_host + s * b_host) + lh * (a_net + s * b_net)))
    # zcoll Rabenseifner (large): recursive halving then doubling; the halving steps inside a
    # host move s/2 + s/4 + ... (7s/8 at 8 per host) each way, the rest crosses hosts.
    inner = s * (1 - 1 / per_host)
    outer = s / per_host * (1 - 1 / h)
    rows.append(("zcoll Rabenseifner", 2 * lg_, 2 * inner, 2 * outer,
                 2 * (lp * a_host + lh * a_net) + 2 * (inner * b_host + outer * b_net)))
    # NCCL ring: 2(g-1) steps; of every ring's g hops, h cross hosts; per_host channels, one
    # NIC each, split the data, so a GPU's NIC carries one channel's crossing.
    ring_lat = 2 * ((g - h) * a_host + h * a_net)
    ring_bytes = 2 * s * (g - 1) / g
    rows.append(("NCCL ring", 2 * (g - 1), ring_bytes, ring_bytes / per_host,
                 ring_lat + ring_bytes * b_host + ring_bytes / per_host * b_net))
    # NCCL tree: a chain inside each host, a double binary tree across hosts; reduce up then
    # broadcast down, pipelined: 2 (per_host - 1 + log2 h) steps; each GPU moves about s up and
    # s down its chain, and a host's tree links carry about 2s, split over per_host channels.
    tree_lat = 2 * ((per_host - 1) * a_host + lh * a_net)
    rows.append(("NCCL tree", 2 * (per_host - 1 + lh), 2 * s, 2 * s / per_host,
                 tree_lat + 2 * s * b_host + 2 * s / per_host * b_net))
    return rows


def size_text(b):
    for unit, k in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if b >= k:
            return "%.1f %s" % (b / k, unit)
    return "%d B" % b


def time_text(t):
    return "%.1f us" % (t * 1e6) if t < 1e-3 else "%.2f ms" % (t * 1e3)


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--per-host", type=int, default=8)
    ap.add_argument("--gpus", default="1024,4096,16384,65536")
    ap.add_argument("--sizes", default="8,268435456", help="bytes per call")
    ap.add_argument("--alpha-host-us", type=float, default=0.5)
    ap.add_argument("--alpha-net-us", type=float, default=2.0)
    ap.add_argument("--bw-host-gbs", type=float, default=300.0, help="GB/s per GPU inside a host")
    ap.add_argument("--bw-net-gbs", type=float, default=50.0, help="GB/s per GPU's NIC")
    o = ap.parse_args()
    a_h, a_n = o.alpha_host_us * 1e-6, o.alpha_net_us * 1e-6
    b_h, b_n = 1 / (o.bw_host_gbs * 1e9), 1 / (o.bw_net_gbs * 1e9)
    print("assumed: %d GPUs per host; step latency %.2f us inside a host, %.2f us across; "
          "%.0f GB/s per GPU inside a host, %.0f GB/s per GPU's NIC"
          % (o.per_host, o.alpha_host_us, o.alpha_net_us, o.bw_host_gbs, o.bw_net_gbs))
    for s in (int(x) for x in o.sizes.split(",")):
        print()
        print("all_reduce of %s" % size_text(s))
        print()
        print("| GPUs | algorithm | steps | bytes per GPU inside its host | bytes per GPU's NIC | model time |")
        print("| --- | --- | --- | --- | --- | --- |")
        for g in (int(x) for x in o.gpus.split(",")):
            for name, steps, inner, nic, t in model(g, o.per_host, s, a_h, a_n, b_h, b_n):
                if s <= 4096 and name == "zcoll Rabenseifner":
                    continue
                if s > 4096 and name in ("zcoll RD", "zcoll HRD"):
                    continue
                print("| %d | %s | %d | %s | %s | %s |"
                      % (g, name, steps, size_text(inner), size_text(nic), time_text(t)))


if __name__ == "__main__":
    main()
