/* Random numbers: xoshiro256** (Blackman & Vigna, 2018) seeded through
 * splitmix64 from (scenario seed, FNV-1a hash of the stream name).  Every
 * component draws from its own named stream, so adding a component or a
 * draw in one place does not shift the numbers any other component sees. */
#include "sim_internal.h"

static uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static uint64_t fnv1a64(const char *s)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (; s && *s; s++) {
        h ^= (unsigned char)*s;
        h *= 0x100000001b3ull;
    }
    return h;
}

void sim_rng_seed(struct sim_rng *r, uint64_t seed, const char *stream_name)
{
    uint64_t x = seed ^ splitmix64(&(uint64_t){fnv1a64(stream_name)});
    for (int i = 0; i < 4; i++)
        r->s[i] = splitmix64(&x);
}

void sim_rng_stream(const struct sim *sim, struct sim_rng *r, const char *stream_name)
{
    sim_rng_seed(r, sim->seed, stream_name);
}

static inline uint64_t rotl(uint64_t x, int k)
{
    return (x << k) | (x >> (64 - k));
}

uint64_t sim_rng_u64(struct sim_rng *r)
{
    uint64_t *s = r->s;
    uint64_t result = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

double sim_rng_uniform(struct sim_rng *r)
{
    return (double)(sim_rng_u64(r) >> 11) * 0x1.0p-53;
}

/* Lemire's multiply-and-reject method: unbiased, usually one draw. */
uint64_t sim_rng_below(struct sim_rng *r, uint64_t n)
{
    __extension__ typedef unsigned __int128 u128;
    if (n == 0)
        return 0;
    u128 m = (u128)sim_rng_u64(r) * n;
    uint64_t low = (uint64_t)m;
    if (low < n) {
        uint64_t threshold = -n % n;
        while (low < threshold) {
            m = (u128)sim_rng_u64(r) * n;
            low = (uint64_t)m;
        }
    }
    return (uint64_t)(m >> 64);
}
