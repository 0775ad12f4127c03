/* Who talks to whom (Huang & Ghandeharizadeh, Section IV): the nodes,
 * threads and RC connections ("links", one QP at each end) of the three
 * abstractions.  Pure functions of the options, so every node computes the
 * same list and the out-of-band exchange only carries QP numbers and keys.
 *
 *   M:1  node 0 responds; nodes 1..P request.  Requesting thread (i, k) has
 *        one QP, to responding thread ((i-1) S + k) mod T of node 0, where T
 *        is hg_m1_resp_threads: with S = 16 and T = 16 that is thread k, as
 *        the paper's T(i,k) -> T(P+1,k); with S = 1, P = 28 it is 14 threads
 *        of 2 QPs each (Section IV-A2).
 *   1:M  node 0 requests; nodes 1..Q respond.  Requesting thread (0, k) has
 *        one QP to thread k of every responding node: Q QPs per thread, Q S
 *        on node 0, S per responding node.
 *   M:M  nodes 0..N-1, each with S requesting threads 0..S-1 and S
 *        responding threads S..2S-1; requesting thread (i, k) has one QP to
 *        responding thread (j, S + k) of every other node j: (N-1) 2 S QPs
 *        per node.
 *
 * The paper numbers nodes from 1 and puts the "one" side last (node P+1,
 * node Q+1); here it is node 0, so a sweep over P or Q keeps the same hosts
 * and the nodes beyond the configuration simply have nothing to do. */
#include "protocols/huang/hg.h"

uint32_t hg_nodes(const struct hg_opts *o)
{
    switch (o->abs) {
    case HG_M1:
        return o->P + 1;
    case HG_1M:
        return o->Q + 1;
    case HG_MM:
    case HG_ABS_COUNT:
        break;
    }
    return o->N;
}

uint32_t hg_m1_resp_threads(const struct hg_opts *o)
{
    if (o->resp_threads)
        return o->resp_threads;
    uint32_t t;
    if (o->S == 1)
        t = (o->P + 1) / 2; /* two requesting threads per responding thread */
    else
        t = o->P * o->S;
    if (t > 16) /* the paper's 16 threads of the NIC's socket */
        t = 16;
    return t ? t : 1;
}

void hg_node_threads(const struct hg_opts *o, uint32_t node, uint32_t *req, uint32_t *resp,
                     uint32_t *resp_base)
{
    *req = *resp = *resp_base = 0;
    if (node >= hg_nodes(o))
        return;
    switch (o->abs) {
    case HG_M1:
        if (node == 0)
            *resp = hg_m1_resp_threads(o);
        else
            *req = o->S;
        break;
    case HG_1M:
        if (node == 0)
            *req = o->S;
        else
            *resp = o->S;
        break;
    case HG_MM:
    case HG_ABS_COUNT:
        *req = o->S;
        *resp = o->S;
        *resp_base = o->S;
        break;
    }
}

uint64_t hg_links(const struct hg_opts *o, struct hg_link *out)
{
    uint64_t n = 0;
    switch (o->abs) {
    case HG_M1: {
        uint32_t T = hg_m1_resp_threads(o);
        for (uint32_t i = 1; i <= o->P; i++)
            for (uint32_t k = 0; k < o->S; k++, n++)
                if (out)
                    out[n] =
                        (struct hg_link){i, k, 0, (uint32_t)(((uint64_t)(i - 1) * o->S + k) % T)};
        break;
    }
    case HG_1M:
        for (uint32_t k = 0; k < o->S; k++)
            for (uint32_t j = 1; j <= o->Q; j++, n++)
                if (out)
                    out[n] = (struct hg_link){0, k, j, k};
        break;
    case HG_MM:
    case HG_ABS_COUNT:
        for (uint32_t i = 0; i < o->N; i++)
            for (uint32_t k = 0; k < o->S; k++)
                for (uint32_t j = 0; j < o->N; j++) {
                    if (j == i)
                        continue;
                    if (out)
                        out[n] = (struct hg_link){i, k, j, o->S + k};
                    n++;
                }
        break;
    }
    return n;
}

uint64_t hg_max_qps_per_node(const struct hg_opts *o)
{
    switch (o->abs) {
    case HG_M1:
        return (uint64_t)o->P * o->S;
    case HG_1M:
        return (uint64_t)o->Q * o->S;
    case HG_MM:
    case HG_ABS_COUNT:
        break;
    }
    return (uint64_t)(o->N - 1) * 2 * o->S;
}
