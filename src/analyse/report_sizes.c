/* --histogram: the allocations' sizes, one row per power-of-two size class
 * that had any (the dumps' histograms added up), with a bar for the count. */
#include "report.h"
#include "util.h"

#define SIZES_BAR 40

void report_size_histogram(FILE *out, const struct size_histogram *h)
{
  int64_t count = 0, bytes = 0, most = 0;
  for (int k = 0; k < SIZE_CLASSES; ++k) {
    if (!value_add(count, h->count[k], &count) || !value_add(bytes, h->bytes[k], &bytes)) fatal_overflow("the size histogram");
    if (h->count[k] > most) most = h->count[k];
  }
  char a[32], b[32], c[32], d[32];
  format_thousands(a, sizeof a, count);
  format_thousands(b, sizeof b, bytes);
  fprintf(out, "Allocation sizes: %s allocations, %s bytes\n\n", a, b);
  fprintf(out, "%13s %13s %14s %7s %16s %7s\n", "bytes from", "to", "allocations", "%", "bytes", "%");
  for (int k = 0; k < SIZE_CLASSES; ++k) {
    if (!h->count[k]) continue;
    uint64_t lo = k ? 1ull << (k - 1) : 0, hi = k ? (k == 64 ? UINT64_MAX : (1ull << k) - 1) : 0;
    format_thousands(a, sizeof a, (int64_t) lo);
    if (hi > (uint64_t) INT64_MAX) snprintf(b, sizeof b, "2^64-1");
    else format_thousands(b, sizeof b, (int64_t) hi);
    format_thousands(c, sizeof c, h->count[k]);
    format_thousands(d, sizeof d, h->bytes[k]);
    fprintf(out, "%13s %13s %14s %7.2f %16s %7.2f |", a, b, c, 100.0 * (double) h->count[k] / (double) count, d,
            bytes ? 100.0 * (double) h->bytes[k] / (double) bytes : 0.0);
    int bar = (int) ((h->count[k] * SIZES_BAR + most / 2) / most);
    for (int i = 0; i < bar; ++i) fputc('#', out);
    fputc('\n', out);
  }
}
