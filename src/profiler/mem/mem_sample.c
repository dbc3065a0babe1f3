/* Sampled memory profiling (igprof -mp --sample BYTES, mem:sample=BYTES).
 *
 * The bytes a thread allocates are cut by a Poisson process of mean interval
 * T bytes: each thread keeps a countdown of bytes drawn from an exponential
 * distribution of mean T; an allocation of s bytes that reaches it is
 * sampled (walked and recorded) and a new countdown is drawn; any other
 * allocation only takes its bytes off the countdown. The process is
 * memoryless, so an allocation of s bytes is sampled with probability
 * p(s) = 1 - exp(-s/T) whatever came before it, and a sampled one stands
 * for 1/p(s) allocations and s/p(s) bytes: every per-path total is then an
 * unbiased estimate of the exact one (docs/running.md, "Sampled memory
 * profiling", gives the error bars).
 *
 * Everything here runs inside a malloc hook: no allocation, no lock, no libc
 * random numbers and no libm (the runtime does not link it): a splitmix64
 * generator per thread and small series for log and exp.
 */
#include "heap.h"
#include "mem_internal.h"

#include <string.h>
#include <time.h>
#include <unistd.h>

uint64_t igprof_mem_sample_mean;
_Atomic uint64_t igprof_mem_sampled;
static uint64_t seed_base;
static int seed_fixed;
static _Atomic uint64_t threads_seeded;

void igprof_mem_sample_set_seed(uint64_t seed)
{
  seed_base = seed;
  seed_fixed = 1;
}

uint64_t igprof_mem_sample_seed(int *fixed)
{
  *fixed = seed_fixed;
  return seed_base;
}

static uint64_t next_random(uint64_t *state)
{
  uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/* A uniform number in (0, 1]: 53 random bits. */
static double uniform(uint64_t *state) { return (double) ((next_random(state) >> 11) + 1) * 0x1p-53; }

static double from_bits(uint64_t b)
{
  double d;
  memcpy(&d, &b, sizeof d);
  return d;
}

/* -ln(u) for u in (0, 1]: u = m * 2^e with m in [sqrt(1/2), sqrt(2)), then
 * ln(m) = 2 atanh(z), z = (m-1)/(m+1), |z| < 0.172: eight terms of the
 * series leave an error below 1e-13, far under what sampling needs. */
static double minus_log(double u)
{
  uint64_t b;
  memcpy(&b, &u, sizeof b);
  int e = (int) ((b >> 52) & 0x7ff) - 1023;
  double m = from_bits((b & 0x000fffffffffffffull) | 0x3ff0000000000000ull);
  if (m > 1.4142135623730951) {
    m *= 0.5;
    ++e;
  }
  double z = (m - 1) / (m + 1), z2 = z * z, term = z, sum = 0;
  for (int k = 1; k <= 15; k += 2) {
    sum += term / k;
    term *= z2;
  }
  return -(e * 0.6931471805599453 + 2 * sum);
}

/* 1 - exp(-x) for x >= 0, accurate also for tiny x (where 1 - exp(-x)
 * would cancel). */
static double one_minus_exp_neg(double x)
{
  if (x < 1e-4) return x * (1 - x * (0.5 - x * (1.0 / 6 - x / 24)));
  if (x > 40) return 1; /* exp(-40) < 5e-18: below double's resolution next to 1 */
  /* exp(-x) = 2^-k exp(-r), x = k ln2 + r, |r| <= ln2/2. */
  int k = (int) (x * 1.4426950408889634 + 0.5);
  double r = x - k * 0.6931471805599453, term = 1, sum = 1;
  for (int i = 1; i <= 16; ++i) {
    term *= -r / i;
    sum += term;
  }
  return 1 - sum * from_bits((uint64_t) (1023 - k) << 52);
}

/* A countdown: floor(E * T) + 1 bytes with E exponential of mean 1, so an
 * allocation of s bytes reaches it (s >= countdown) with probability
 * exactly 1 - exp(-s/T). */
static int64_t draw(uint64_t *state)
{
  double bytes = minus_log(uniform(state)) * (double) igprof_mem_sample_mean;
  if (bytes > 4e18) bytes = 4e18;
  return (int64_t) bytes + 1;
}

static void seed_thread(struct igprof_thread *t)
{
  uint64_t n = atomic_fetch_add_explicit(&threads_seeded, 1, memory_order_relaxed);
  uint64_t s = seed_base;
  if (!seed_fixed) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    s = (uint64_t) ts.tv_nsec ^ (uint64_t) ts.tv_sec << 30 ^ (uint64_t) getpid() << 40 ^ (uintptr_t) t;
  }
  /* The n-th thread to allocate gets its own stream of the seed's. */
  t->sample_rng = s ^ (n + 1) * 0xd1b54a32d192ed03ull;
  next_random(&t->sample_rng);
  t->sample_seeded = 1;
}

int igprof_mem_sample_reached(uint64_t size, int64_t *blocks, int64_t *bytes)
{
  struct igprof_thread *t = &igprof_tls;
  if (IGPROF_UNLIKELY(!t->sample_seeded)) {
    seed_thread(t);
    t->sample_left = draw(&t->sample_rng);
    int64_t left = t->sample_left - (int64_t) size;
    if (left > 0) {
      t->sample_left = left;
      return 0;
    }
  }
  t->sample_left = draw(&t->sample_rng);
  atomic_fetch_add_explicit(&igprof_mem_sampled, 1, memory_order_relaxed);
  double p = one_minus_exp_neg((double) size / (double) igprof_mem_sample_mean);
  double w = 1 / p;
  if (size == 0 || p <= 0) { /* not reachable: a 0-byte allocation never reaches a countdown >= 1 */
    *blocks = 1;
    *bytes = 0;
    return 1;
  }
  /* Blocks are whole: w rounded down or up at random, as likely up as its
   * fraction, so the count stays unbiased. Bytes: rounded to the nearest. */
  double whole = (double) (int64_t) w;
  *blocks = (int64_t) whole + (uniform(&t->sample_rng) <= w - whole ? 1 : 0);
  if (*blocks == 0) *blocks = 1;
  double b = (double) size * w + 0.5;
  *bytes = b > 4e18 ? (int64_t) 4e18 : (int64_t) b;
  return 1;
}
