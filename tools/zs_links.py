#!/usr/bin/env python3
"""Account for every link's idle time in a zero-sided run (docs/zero-sided.md,
"Where the link time goes").

    rnicsim run scenarios/zero-sided/fig09-zs.yaml --set vars.bytes=4MiB --quiet \\
        --trace --timeline-window 27.1ms:29ms | python3 tools/zs_links.py FROM_US TO_US

FROM_US / TO_US: the window to account (the job's start, the producers'
t_start_ns, and its end, the last consumer's t_head_ns, in us).  Reads the
`--trace` lines of the links (a frame: [first bit .. last bit]) and prints,
per link: the busy share, the busy share by kind of frame (data: the
FIRST / MIDDLE / LAST packets of READ responses and WRITEs; polls: 4-byte
READ requests and RESPONSE ONLY; ACKs; WRITE ONLY: pointer WRITEs and
single-packet data), the idle share by gap length, and for each
producer node's uplink the idle share by how many data READs (switch ->
producer, from the request leaving the switch to its last response) were
outstanding to that node; then the distribution of outstanding data READs
per node and in total.  A data READ is one answered by RESPONSE FIRST ..
LAST (polls are single-packet).
"""
import collections
import re
import sys

FRAME = re.compile(r"link (\S+)\s+(\S+) (\d+)\s+\[([\d.]+) \.\. ([\d.]+) ns\]\s+qp (\S+)")
GAPS = [(100, "<100ns"), (1000, "<1us"), (5000, "<5us"), (20000, "<20us"), (float("inf"), ">=20us")]


def kind(op):
    """A frame's kind, for the busy share by kind."""
    if op.endswith(("_FIRST", "_MIDDLE", "_LAST")):
        return "data"
    if op in ("RDMA_READ_REQUEST", "RDMA_READ_RESPONSE_ONLY"):
        return "polls+READ-requests"
    if op == "ACKNOWLEDGE":
        return "ACKs"
    return op


def main():
    t0, t1 = float(sys.argv[1]) * 1e3, float(sys.argv[2]) * 1e3  # ns
    frames = collections.defaultdict(list)
    req, first, reads = {}, {}, []
    for ln in sys.stdin:
        m = FRAME.search(ln)
        if not m:
            continue
        link, op, psn, a, b, qp = m.groups()
        psn, a, b = int(psn), float(a), float(b)
        frames[link].append((a, b, op))
        if link.startswith("sw0->") and op == "RDMA_READ_REQUEST":
            req[(link[5:], psn)] = b
        elif link.endswith("->sw0"):
            node = link[:-5]
            if op == "RDMA_READ_RESPONSE_FIRST":
                first[(node, qp)] = (psn, a)
            elif op == "RDMA_READ_RESPONSE_LAST" and (node, qp) in first:
                fpsn, fa = first.pop((node, qp))
                reads.append((node, req.get((node, fpsn), fa), b))
    span = t1 - t0
    out = collections.defaultdict(list)  # node -> outstanding-READ events
    for node, r, e in reads:
        out[node] += [(r, 1), (e, -1)]
    print(f"window {span / 1e3:.1f} us, {len(reads)} data READs")
    for link in sorted(frames):
        busy, prev, gaps = 0.0, t0, collections.Counter()
        idle_by_reads = collections.Counter()
        ev = sorted(out.get(link[:-5], [])) if link.endswith("->sw0") else []
        for a, b, _ in sorted(frames[link]):
            if b < t0 or a > t1:
                continue
            a, b = max(a, t0), min(b, t1)
            if a > prev:
                gaps[next(n for lim, n in GAPS if a - prev < lim)] += a - prev
            busy += max(0.0, b - max(a, prev))
            prev = max(prev, b)
        if t1 > prev:
            gaps[next(n for lim, n in GAPS if t1 - prev < lim)] += t1 - prev
        line = f"{link:12s} busy {100 * busy / span:5.1f}%  idle by gap:"
        line += "".join(f" {n} {100 * gaps[n] / span:.1f}%" for _, n in GAPS)
        print(line)
        kinds = collections.Counter()
        for a, b, op in frames[link]:
            if b >= t0 and a <= t1:
                kinds[kind(op)] += min(b, t1) - max(a, t0)
        print("             busy by kind:" +
              "".join(f" {k} {100 * v / span:.2f}%" for k, v in kinds.most_common()))
        if ev:  # uplink: idle time by READs outstanding to the node (20 ns steps)
            fr = sorted((a, b) for a, b, _ in frames[link])
            i = j = cnt = 0
            t = t0
            while t < t1:
                while i < len(ev) and ev[i][0] <= t:
                    cnt += ev[i][1]
                    i += 1
                while j < len(fr) and fr[j][1] < t:
                    j += 1
                if not (j < len(fr) and fr[j][0] <= t):
                    idle_by_reads[min(cnt, 4)] += 20.0
                t += 20.0
            print("             idle with 0/1/2/3/4+ data READs outstanding to the node:" +
                  "".join(f" {100 * idle_by_reads[k] / span:.1f}%" for k in range(5)))
    # outstanding data READs per node and in total
    ev = sorted((t, node, d) for node, lst in out.items() for t, d in lst)
    cnt, last = collections.Counter(), t0
    per, tot = collections.defaultdict(collections.Counter), collections.Counter()
    nodes = sorted(out)
    for t, node, d in ev:
        tt = min(max(t, t0), t1)
        if tt > last:
            for n in nodes:
                per[n][cnt[n]] += tt - last
            tot[sum(cnt.values())] += tt - last
            last = tt
        cnt[node] += d
    for n in nodes:
        print(f"{n}: time with k data READs outstanding:" +
              "".join(f" {k}:{100 * v / span:.0f}%" for k, v in sorted(per[n].items())))
    print("all nodes: " + "".join(f" {k}:{100 * v / span:.0f}%" for k, v in sorted(tot.items())))


if __name__ == "__main__":
    main()
