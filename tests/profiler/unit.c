/* Unit tests of the runtime's pieces, linked against their objects:
 *   unit options | format | live | live-size | tree
 * Each prints what it checked and exits non-zero on the first mismatch. */
#define _GNU_SOURCE
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "internal.h"
#include "options.h"
#include "symbols.h"

static int failures;

#define CHECK(cond, ...)                                   \
  do {                                                     \
    if (!(cond)) {                                         \
      fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__); \
      fprintf(stderr, __VA_ARGS__);                        \
      fputc('\n', stderr);                                 \
      failures++;                                          \
    }                                                      \
  } while (0)

/* ---------------------------------------------------------------- */

struct collected {
  char text[2048];
};

static int collect(void *ctx, const struct igprof_token *t, char *err, size_t errlen)
{
  struct collected *c = ctx;
  if (strcmp(t->module, "reject") == 0) {
    snprintf(err, errlen, "rejected by callback");
    return -1;
  }
  size_t n = strlen(c->text);
  snprintf(c->text + n, sizeof c->text - n, "[%s|%s|%s%s]", t->module, t->key, t->has_value ? "=" : "",
           t->value);
  return 0;
}

static void parse_ok(const char *in, const char *want)
{
  struct igprof_token tok;
  struct collected c = {""};
  char err[256];
  int rc = igprof_options_parse(in, &tok, collect, &c, err, sizeof err);
  CHECK(rc == 0, "parse '%s' failed: %s", in, err);
  CHECK(strcmp(c.text, want) == 0, "parse '%s': got %s, want %s", in, c.text, want);
}

static void parse_bad(const char *in, const char *want_err)
{
  struct igprof_token tok;
  struct collected c = {""};
  char err[256];
  int rc = igprof_options_parse(in, &tok, collect, &c, err, sizeof err);
  CHECK(rc == -1, "parse '%s' should fail", in);
  CHECK(strcmp(err, want_err) == 0, "parse '%s': error '%s', want '%s'", in, err, want_err);
}

static void test_options(void)
{
  parse_ok("", "");
  parse_ok("  ,, ", "");
  parse_ok("mem", "[mem||]");
  parse_ok("mem,perf:real  mem:overhead=delta", "[mem||][perf|real|][mem|overhead|=delta]");
  parse_ok("igprof:out='|gzip -c > x, y.gz'", "[igprof|out|=|gzip -c > x, y.gz]");
  parse_ok("igprof:out='it\\'s \\\\ here'", "[igprof|out|=it's \\ here]");
  parse_ok("igprof:depth=512\tigprof:debug", "[igprof|depth|=512][igprof|debug|]");
  parse_bad("Mem", "column 1: option name expected");
  parse_bad("mem:", "column 5: option name expected after ':'");
  parse_bad("mem=1", "column 4: a module token takes no value");
  parse_bad("igprof:out='x", "column 12: unterminated quoted value");
  parse_bad("igprof:out='x'y", "column 15: separator expected after quoted value");
  parse_bad("igprof:out=", "column 12: empty value after '='");
  parse_bad("igprof:out=a'b", "column 13: quote, backslash or '=' in an unquoted value");
  parse_bad("memory:x:y", "column 9: unexpected character");
  parse_bad("mem reject", "column 5: rejected by callback");

  char q[64];
  igprof_options_quote(q, sizeof q, "a'b\\c");
  CHECK(strcmp(q, "'a\\'b\\\\c'") == 0, "quote: %s", q);
  /* quote and parse are inverse */
  char text[128];
  snprintf(text, sizeof text, "igprof:out=%s", q);
  parse_ok(text, "[igprof|out|=a'b\\c]");

  CHECK(igprof_options_signal("USR1") == SIGUSR1, "USR1");
  CHECK(igprof_options_signal("SIGUSR2") == SIGUSR2, "SIGUSR2");
  CHECK(igprof_options_signal("10") == 10, "10");
  CHECK(igprof_options_signal("RTMIN+2") == SIGRTMIN + 2, "RTMIN+2");
  CHECK(igprof_options_signal("KILL") == -1, "KILL refused");
  CHECK(igprof_options_signal("SEGV") == -1, "SEGV refused (owned)");
  CHECK(igprof_options_signal("FOO") == -1, "FOO");
  CHECK(igprof_options_signal("99") == -1, "99");
  CHECK(igprof_options_int("256", 1, 65536) == 256, "256");
  CHECK(igprof_options_int("0", 1, 65536) == -1, "0 out of range");
  CHECK(igprof_options_int("12x", 1, 65536) == -1, "12x");
  CHECK(igprof_options_int("99999999999999999999", 1, 65536) == -1, "overflow");
  unsigned long long size = 7;
  CHECK(igprof_options_size("0", &size) == 0 && size == 0, "size 0");
  CHECK(igprof_options_size("1500", &size) == 0 && size == 1500, "size 1500");
  CHECK(igprof_options_size("10k", &size) == 0 && size == 10240, "size 10k");
  CHECK(igprof_options_size("3M", &size) == 0 && size == 3u << 20, "size 3M");
  CHECK(igprof_options_size("2g", &size) == 0 && size == 2ull << 30, "size 2g");
  CHECK(igprof_options_size("4294967296G", &size) == 0 && size == 1ull << 62, "size 2^62");
  size = 7;
  CHECK(igprof_options_size("4294967297G", &size) == -1 && size == 7, "size over 2^62");
  CHECK(igprof_options_size("99999999999999999999", &size) == -1, "size overflow");
  CHECK(igprof_options_size("", &size) == -1 && igprof_options_size(NULL, &size) == -1, "empty size");
  CHECK(igprof_options_size("k", &size) == -1 && igprof_options_size("-5", &size) == -1, "no digits");
  CHECK(igprof_options_size("10kb", &size) == -1 && igprof_options_size("10T", &size) == -1, "bad suffix");
  CHECK(igprof_options_size("1 k", &size) == -1 && igprof_options_size("1.5M", &size) == -1, "bad text");
  unsigned long long bytes = 0, ms = 0;
  CHECK(igprof_options_timeline("10ms", &bytes, &ms) == 0 && ms == 10 && bytes == 0, "timeline 10ms");
  CHECK(igprof_options_timeline("64k", &bytes, &ms) == 0 && ms == 10 && bytes == 65536, "timeline 64k");
  CHECK(igprof_options_timeline("0ms", &bytes, &ms) == -1 && igprof_options_timeline("0", &bytes, &ms) == -1,
        "timeline 0");
  CHECK(igprof_options_timeline("3600001ms", &bytes, &ms) == -1 && igprof_options_timeline("ms", &bytes, &ms) == -1,
        "timeline bad ms");
  CHECK(igprof_options_timeline("5s", &bytes, &ms) == -1 && igprof_options_timeline("1.5ms", &bytes, &ms) == -1
            && ms == 10 && bytes == 65536, "timeline bad text");
}

/* ---------------------------------------------------------------- */

static void format_is(const char *got, const char *want)
{
  CHECK(strcmp(got, want) == 0, "format: got '%s', want '%s'", got, want);
}

static void test_format(void)
{
  char b[64], ref[64];
  igprof_format(b, sizeof b, "%d %i %u %x", -42, 7, 4000000000u, 0xbeef);
  format_is(b, "-42 7 4000000000 beef");
  /* long is 64 bits wide on LP64 targets, 32 on ILP32 ones (i386, ARM32) */
  long big = sizeof(long) > 4 ? (long) -9000000000LL : -2000000000L;
  igprof_format(b, sizeof b, "%ld %lu %llx %zu", big, ULONG_MAX, 0x123456789abcULL, (size_t) 77);
  format_is(b, sizeof(long) > 4 ? "-9000000000 18446744073709551615 123456789abc 77"
                                : "-2000000000 4294967295 123456789abc 77");
  snprintf(ref, sizeof ref, "%p", (void *) 0x7fff1234);
  igprof_format(b, sizeof b, "%p", (void *) 0x7fff1234);
  format_is(b, ref);
  const char *volatile null_string = NULL; /* hidden from the format checker */
  igprof_format(b, sizeof b, "%s|%.*s|%c|%%|%s", "abc", 2, "xyz", 'Q', null_string);
  format_is(b, "abc|xy|Q|%|(null)");
  size_t n = igprof_format(b, 8, "0123456789");
  CHECK(n == 10 && strcmp(b, "0123456") == 0, "truncation: %zu '%s'", n, b);
  igprof_format(b, sizeof b, "%d", (int) (-2147483647 - 1));
  format_is(b, "-2147483648");
}

/* ---------------------------------------------------------------- */

#define LIVE_THREADS 4
#define LIVE_PER_THREAD 200000

static uintptr_t live_keys[LIVE_THREADS][LIVE_PER_THREAD];
/* Nodes as the tree makes them (cache-line aligned), and nodes that are
 * not: the live table keeps records of those, and of big blocks, in full
 * in its wide table (live.c). */
static struct igprof_node fake_nodes[LIVE_THREADS] __attribute__((aligned(64)));
static struct {
  char pad[8];
  struct igprof_node n[LIVE_THREADS];
} odd_nodes __attribute__((aligned(64)));
static pthread_barrier_t live_barrier;

static struct igprof_node *live_node(int t, int i) { return i % 50 == 9 ? &odd_nodes.n[t] : &fake_nodes[t]; }

static uint64_t live_size(int i) { return i % 50 == 7 ? ((uint64_t) i << 23) + 5 : (uint64_t) i; }

static void *live_worker(void *arg)
{
  int t = (int) (long) arg;
  for (int i = 0; i < LIVE_PER_THREAD; ++i) {
    live_keys[t][i] = ((uintptr_t) (t + 1) << (sizeof(uintptr_t) > 4 ? 40 : 28)) + (uintptr_t) i * 16;
    igprof_live_insert_born(live_keys[t][i], live_node(t, i), live_size(i), (int64_t) i * 3);
  }
  pthread_barrier_wait(&live_barrier);
  /* Remove the next thread's keys: every removal crosses threads. */
  int v = (t + 1) % LIVE_THREADS;
  long bad = 0;
  for (int i = 0; i < LIVE_PER_THREAD; ++i) {
    struct igprof_node *n;
    uint64_t size;
    int64_t birth;
    if (i % 4 == 0) continue;
    if (!igprof_live_remove_born(live_keys[v][i], &n, &size, &birth) || n != live_node(v, i) || size != live_size(i)
        || birth != (int64_t) i * 3)
      ++bad;
  }
  return (void *) bad;
}

struct live_sum {
  uint64_t count, size_sum;
};

static void live_visit(void *arg, uintptr_t addr, struct igprof_node *node, uint64_t size)
{
  struct live_sum *s = arg;
  (void) addr;
  (void) node;
  s->count++;
  s->size_sum += size;
}

static void test_live(void)
{
  pthread_t th[LIVE_THREADS];
  pthread_barrier_init(&live_barrier, NULL, LIVE_THREADS);
  igprof_live_keep_births(); /* births move with their blocks through grows and shifts */
  igprof_note_threads(); /* what the pthread_create hook does in the runtime */
  for (long t = 0; t < LIVE_THREADS; ++t) pthread_create(&th[t], NULL, live_worker, (void *) t);
  long bad = 0;
  for (int t = 0; t < LIVE_THREADS; ++t) {
    void *r;
    pthread_join(th[t], &r);
    bad += (long) r;
  }
  CHECK(bad == 0, "%ld removals did not find their record", bad);
  uint64_t want_count = (uint64_t) LIVE_THREADS * (LIVE_PER_THREAD / 4), want_size = 0;
  for (int i = 0; i < LIVE_PER_THREAD; i += 4) want_size += live_size(i) * LIVE_THREADS;
  CHECK(igprof_live_count() == want_count, "live count %llu, want %llu",
        (unsigned long long) igprof_live_count(), (unsigned long long) want_count);
  struct live_sum s = {0, 0};
  igprof_live_foreach(live_visit, &s);
  CHECK(s.count == want_count && s.size_sum == want_size, "foreach saw %llu blocks / %llu bytes",
        (unsigned long long) s.count, (unsigned long long) s.size_sum);
  /* Unknown and already-removed addresses are not found. */
  struct igprof_node *n;
  uint64_t size;
  CHECK(!igprof_live_remove(0x12345670, &n, &size), "unknown address found");
  CHECK(!igprof_live_remove(live_keys[1][1], &n, &size), "removed address found again");
  /* Re-inserting a live address replaces its record (its free was missed). */
  igprof_live_insert_born(live_keys[0][0], &fake_nodes[3], 999, 0);
  CHECK(igprof_live_remove(live_keys[0][0], &n, &size) && n == &fake_nodes[3] && size == 999, "replace");
  CHECK(igprof_live_count() == want_count - 1, "count after replace+remove");
  /* A wide record replaced by a packed one and the other way round: the
   * newer record is what a removal and the listing see. */
  uint64_t big = (uint64_t) 1 << 40;
  igprof_live_insert(live_keys[0][4], &odd_nodes.n[1], big);
  igprof_live_insert(live_keys[0][4], &fake_nodes[2], 17);
  igprof_live_insert(live_keys[0][8], &fake_nodes[2], 17);
  igprof_live_insert(live_keys[0][8], &fake_nodes[1], big + 1);
  s = (struct live_sum){0, 0};
  igprof_live_foreach(live_visit, &s);
  CHECK(s.count == want_count - 1 && s.size_sum == want_size - live_size(0) + (17 - live_size(4)) + (big + 1 - live_size(8)),
        "after replacing: foreach saw %llu blocks / %llu bytes", (unsigned long long) s.count,
        (unsigned long long) s.size_sum);
  CHECK(igprof_live_remove(live_keys[0][4], &n, &size) && n == &fake_nodes[2] && size == 17, "wide -> packed");
  CHECK(igprof_live_remove(live_keys[0][8], &n, &size) && n == &fake_nodes[1] && size == big + 1, "packed -> wide");
  CHECK(!igprof_live_remove(live_keys[0][8], &n, &size), "wide record removed twice");
#if UINTPTR_MAX > 0xffffffffu
  /* Addresses that are no key of the table (above 2^48, or not a multiple
   * of 8) keep their full record, birth included, in the wide table. */
  uint64_t before = igprof_live_count();
  uintptr_t high = ((uintptr_t) 1 << 50) + 64, odd = live_keys[2][4] + 4;
  igprof_live_insert_born(high, &fake_nodes[1], 40, 77);
  igprof_live_insert_born(odd, &odd_nodes.n[2], 12, 78);
  igprof_live_insert_born(odd, &fake_nodes[2], 13, 79); /* replaces */
  CHECK(igprof_live_count() == before + 2, "keyless: count %llu, want %llu", (unsigned long long) igprof_live_count(),
        (unsigned long long) (before + 2));
  s = (struct live_sum){0, 0};
  igprof_live_foreach(live_visit, &s);
  CHECK(s.count == before + 2, "keyless: foreach saw %llu blocks", (unsigned long long) s.count);
  int64_t birth = 0;
  CHECK(igprof_live_remove_born(odd, &n, &size, &birth) && n == &fake_nodes[2] && size == 13 && birth == 79,
        "keyless (odd address): %p %llu %lld", (void *) n, (unsigned long long) size, (long long) birth);
  CHECK(igprof_live_remove_born(high, &n, &size, &birth) && n == &fake_nodes[1] && size == 40 && birth == 77,
        "keyless (high address)");
  CHECK(!igprof_live_remove(high, &n, &size) && igprof_live_count() == before, "keyless: removed twice");
  /* A node beyond 32 bits of cache lines from the runtime's data: a wide
   * record under a packed address. */
  uintptr_t here = (uintptr_t) &fake_nodes[0], far = here < ((uintptr_t) 1 << 46) ? here + ((uintptr_t) 1 << 40) : here - ((uintptr_t) 1 << 40);
  far &= ~(uintptr_t) 0xfff;
  void *page = mmap((void *) far, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
  if (page != MAP_FAILED) {
    struct igprof_node *far_node = (struct igprof_node *) page + 1;
    igprof_live_insert_born(live_keys[3][8], far_node, 21, 80);
    CHECK(igprof_live_remove_born(live_keys[3][8], &n, &size, &birth) && n == far_node && size == 21 && birth == 80,
          "far node: %p for %p", (void *) n, (void *) far_node);
    munmap(page, 4096);
  } else {
    printf("live: no page at %#lx, far node not checked\n", (unsigned long) far);
  }
#endif
}

/* The table's size against its blocks: 12 bytes an entry, each shard
 * between three fifths and four fifths full once big (live.c), over 2
 * million blocks laid out as malloc lays out 32-byte blocks; then all
 * removed, each found with its own record. */
static struct line_node {
  struct igprof_node n; /* one a cache line, as the arena gives them (40 bytes on 32-bit machines) */
} __attribute__((aligned(64))) line_nodes[4];

static void test_live_size(void)
{
  const uint64_t count = 2000000, entry = 12;
  const uintptr_t base = (uintptr_t) 0x10000000 << (sizeof(uintptr_t) > 4 ? 12 : 0);
  const uintptr_t step = sizeof(uintptr_t) > 4 ? 32 : 16;
  for (uint64_t i = 0; i < count; ++i)
    igprof_live_insert(base + i * step, &line_nodes[i & 3].n, (uint64_t) (i & 255) + 1);
  uint64_t bytes = igprof_live_table_bytes(), min = count * entry * 5 / 4, max = count * entry * 100 / 64 + 256 * 64 * entry;
  printf("live-size: %llu blocks in %llu bytes (%.2f a block)\n", (unsigned long long) count,
         (unsigned long long) bytes, (double) bytes / (double) count);
  CHECK(igprof_live_count() == count, "count %llu", (unsigned long long) igprof_live_count());
  CHECK(bytes >= min && bytes <= max, "table of %llu bytes for %llu blocks, want %llu..%llu", (unsigned long long) bytes,
        (unsigned long long) count, (unsigned long long) min, (unsigned long long) max);
  long bad = 0;
  for (uint64_t i = 0; i < count; i += 2) {
    struct igprof_node *n;
    uint64_t size;
    bad += !igprof_live_remove(base + i * step, &n, &size) || n != &line_nodes[i & 3].n || size != (i & 255) + 1;
  }
  for (uint64_t i = 1; i < count; i += 2) {
    struct igprof_node *n;
    uint64_t size;
    bad += !igprof_live_remove(base + i * step, &n, &size) || n != &line_nodes[i & 3].n || size != (i & 255) + 1;
  }
  CHECK(bad == 0 && igprof_live_count() == 0, "%ld removals wrong, %llu left", bad,
        (unsigned long long) igprof_live_count());
}

/* ---------------------------------------------------------------- */

#define TREE_THREADS 4
#define TREE_STACKS 64
#define TREE_ROUNDS 2000

static int tree_counter;

/* Stack k: 6 frames, outermost 0x1000, then branching by k's bits. */
static int make_stack(int k, uintptr_t *pcs)
{
  int n = 0;
  uintptr_t outer[6] = {0x1000, 0x2000 + (uintptr_t) (k & 1), 0x3000 + (uintptr_t) (k & 3),
                        0x4000 + (uintptr_t) (k & 7), 0x5000 + (uintptr_t) (k & 15), 0x6000 + (uintptr_t) k};
  for (int i = 5; i >= 0; --i) pcs[n++] = outer[i];
  return n;
}

static void *tree_worker(void *arg)
{
  int t = (int) (long) arg;
  uintptr_t pcs[8];
  igprof_tls.guard = 1;
  igprof_thread_prepare();
  for (int r = 0; r < TREE_ROUNDS; ++r) {
    int k = (r * 7 + t * 13) % TREE_STACKS;
    int n = make_stack(k, pcs);
    struct igprof_node *leaf = igprof_tree_push(pcs, n, 0);
    igprof_counter_add(leaf, tree_counter, 1, k + 1);
  }
  return NULL;
}

static void count_nodes(struct igprof_node *n, int depth, long *per_depth, int64_t *ticks, int64_t *value)
{
  for (struct igprof_node *c = atomic_load(&n->children); c; c = c->sibling) {
    per_depth[depth]++;
    struct igprof_counter_value *v = atomic_load(&c->counters);
    if (v) {
      *ticks += v[tree_counter].ticks;
      *value += v[tree_counter].value;
    }
    for (struct igprof_node *d = c->sibling; d; d = d->sibling)
      if (d->pc == c->pc) per_depth[7]++; /* duplicate sibling: must never happen */
    count_nodes(c, depth + 1, per_depth, ticks, value);
  }
}

static void test_tree(void)
{
  tree_counter = igprof_counter_define("TEST", IGPROF_COUNTER_TICK, 0);
  pthread_t th[TREE_THREADS];
  igprof_note_threads();
  for (long t = 0; t < TREE_THREADS; ++t) pthread_create(&th[t], NULL, tree_worker, (void *) t);
  for (int t = 0; t < TREE_THREADS; ++t) pthread_join(th[t], NULL);
  long per_depth[8] = {0};
  int64_t ticks = 0, value = 0, want_value = 0;
  count_nodes(igprof_tree_root(), 0, per_depth, &ticks, &value);
  long want[6] = {1, 2, 4, 8, 16, 64};
  for (int d = 0; d < 6; ++d) CHECK(per_depth[d] == want[d], "depth %d: %ld nodes, want %ld", d, per_depth[d], want[d]);
  CHECK(per_depth[7] == 0, "%ld duplicate children", per_depth[7]);
  for (int t = 0; t < TREE_THREADS; ++t)
    for (int r = 0; r < TREE_ROUNDS; ++r) want_value += (r * 7 + t * 13) % TREE_STACKS + 1;
  CHECK(ticks == TREE_THREADS * TREE_ROUNDS && value == want_value, "ticks %lld value %lld, want %d %lld",
        (long long) ticks, (long long) value, TREE_THREADS * TREE_ROUNDS, (long long) want_value);
  /* A truncated stack hangs under the marker frame. */
  uintptr_t pcs[8];
  igprof_tls.guard = 1;
  igprof_thread_prepare();
  int n = make_stack(5, pcs);
  struct igprof_node *leaf = igprof_tree_push(pcs, n, 1);
  struct igprof_node *top = leaf;
  while (top->parent != igprof_tree_root()) top = top->parent;
  CHECK(top->pc == IGPROF_PC_TRUNCATED && leaf->pc == pcs[0], "truncation marker at the root");
  /* Long stacks that share all but one frame with the stack pushed just
   * before (any depth: inside or at the end of a block the shared-prefix
   * compare takes at once), with and without truncation: the leaf's path
   * is the stack pushed, frame by frame. */
  for (int trunc = 0; trunc <= 1; ++trunc)
    for (int d = 0; d < 21; ++d)
      for (int pass = 0; pass < 3; ++pass) {
        uintptr_t stack[21];
        int len = 21 - (pass == 2 ? d % 3 : 0); /* shorter too, as stacks come */
        for (int k = 0; k < len; ++k) stack[k] = 0x70000 + (uintptr_t) (len - 1 - k) * 16;
        if (pass == 1 && d < len) stack[len - 1 - d] += 8; /* depth d from the outside differs */
        struct igprof_node *node = igprof_tree_push(stack, len, trunc);
        int k = 0;
        for (; node && node != igprof_tree_root() && k < len; ++k, node = node->parent)
          if (node->pc != stack[k]) break;
        if (trunc && node && k == len) node = node->pc == IGPROF_PC_TRUNCATED ? node->parent : NULL;
        CHECK(k == len && node == igprof_tree_root(), "trunc %d, depth %d, pass %d: path differs at frame %d", trunc, d,
              pass, k);
      }
  igprof_tree_reset_counters(1u << tree_counter);
  ticks = value = 0;
  memset(per_depth, 0, sizeof per_depth);
  count_nodes(igprof_tree_root(), 0, per_depth, &ticks, &value);
  CHECK(ticks == 0 && value == 0, "reset left ticks %lld value %lld", (long long) ticks, (long long) value);
}

/* Two functions side by side, for test_symbols. */
__attribute__((noinline)) int unit_probe_first(int x) { return x * 3 + 1; }
__attribute__((noinline)) int unit_probe_second(int x) { return x * 5 + 2; }

/* A function pointer's code address (ARM: bit 0 marks Thumb code). */
static uintptr_t code_of(int (*fn)(int))
{
#if defined(__arm__)
  return (uintptr_t) fn & ~(uintptr_t) 1;
#else
  return (uintptr_t) fn;
#endif
}

/* The dump's symbol lookup: a function's first byte (an interrupted PC at
 * its entry, frame 0 of a sample) and a byte inside it name the function,
 * with its code address as the start; in Thumb code too, where the ELF
 * symbol's value is the code address plus one. */
static void test_symbols(void)
{
  volatile int sink = unit_probe_first(1) + unit_probe_second(2);
  (void) sink;
  /* The main program's path, as the runtime's start-up reads it. */
  ssize_t n = readlink("/proc/self/exe", igprof_state.exe, sizeof igprof_state.exe - 1);
  igprof_state.exe[n > 0 ? n : 0] = 0;
  struct igprof_scratch scratch = {0};
  struct symbols *s = symbols_snapshot(&scratch);
  CHECK(s && symbols_count(s) > 0, "no module snapshot");
  if (!s) return;
  int (*fns[2])(int) = {unit_probe_first, unit_probe_second};
  const char *names[2] = {"unit_probe_first", "unit_probe_second"};
  for (int i = 0; i < 2; i++) {
    uintptr_t at = code_of(fns[i]);
    for (uintptr_t off = 0; off <= 2; off += 2) {
      struct symbol_info si;
      symbols_lookup(s, at + off, &si);
      CHECK(si.name && strcmp(si.name, names[i]) == 0, "%#lx (%s+%lu): named %s", (unsigned long) (at + off),
            names[i], (unsigned long) off, si.name ? si.name : "(none)");
      CHECK(si.symbol_start == at, "%s: start %#lx, code at %#lx", names[i], (unsigned long) si.symbol_start,
            (unsigned long) at);
    }
  }
  symbols_close(s);
  igprof_scratch_release(&scratch);
}

int main(int argc, char **argv)
{
  if (argc != 2) {
    fprintf(stderr, "usage: unit options|format|live|live-size|tree|symbols\n");
    return 2;
  }
  if (!strcmp(argv[1], "options")) test_options();
  else if (!strcmp(argv[1], "format")) test_format();
  else if (!strcmp(argv[1], "live")) test_live();
  else if (!strcmp(argv[1], "live-size")) test_live_size();
  else if (!strcmp(argv[1], "tree")) test_tree();
  else if (!strcmp(argv[1], "symbols")) test_symbols();
  else {
    fprintf(stderr, "unknown test %s\n", argv[1]);
    return 2;
  }
  printf("%s: %s\n", argv[1], failures ? "FAILED" : "ok");
  return failures ? 1 : 0;
}
