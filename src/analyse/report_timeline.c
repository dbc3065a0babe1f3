/* --timeline: the heap's live bytes over time as a text chart, one row per
 * sample (or per group of consecutive samples when there are more than
 * TIMELINE_ROWS: the group's largest), the maximum marked. */
#include "report.h"
#include "util.h"

#define TIMELINE_ROWS 40
#define TIMELINE_BAR 50

/* The first sample holding the largest live bytes: the heap's peak. */
size_t heap_timeline_peak(const struct heap_timeline *tl)
{
  size_t peak = 0;
  for (size_t i = 1; i < tl->count; ++i)
    if (tl->samples[i].bytes > tl->samples[peak].bytes) peak = i;
  return peak;
}

static void seconds(char *buf, size_t cap, int64_t us)
{
  snprintf(buf, cap, "%" PRId64 ".%03" PRId64, us / 1000000, us / 1000 % 1000);
}

void report_timeline(FILE *out, const struct heap_timeline *tl)
{
  size_t peak = heap_timeline_peak(tl), n = tl->count;
  const struct heap_sample *p = &tl->samples[peak];
  char bytes[32], blocks[32], at[32], span[32];
  format_thousands(bytes, sizeof bytes, p->bytes);
  format_thousands(blocks, sizeof blocks, p->blocks);
  seconds(at, sizeof at, p->us);
  seconds(span, sizeof span, tl->samples[n - 1].us);
  fprintf(out, "Heap timeline of %s (%s): %zu samples over %s s\n", tl->program, tl->path, n, span);
  fprintf(out, "Peak: %s bytes in %s blocks at %s s\n\n", bytes, blocks, at);
  fprintf(out, "%10s %15s %10s\n", "time s", "bytes", "blocks");
  size_t rows = n < TIMELINE_ROWS ? n : TIMELINE_ROWS;
  for (size_t row = 0; row < rows; ++row) {
    /* Samples [first, end) make this row; it shows their largest. */
    size_t first = row * n / rows, end = (row + 1) * n / rows, best = first;
    for (size_t i = first; i < end; ++i)
      if (tl->samples[i].bytes > tl->samples[best].bytes || i == peak) best = i;
    if (peak >= first && peak < end) best = peak;
    const struct heap_sample *s = &tl->samples[best];
    int bar = p->bytes ? (int) ((s->bytes * TIMELINE_BAR + p->bytes / 2) / p->bytes) : 0;
    seconds(at, sizeof at, s->us);
    format_thousands(bytes, sizeof bytes, s->bytes);
    format_thousands(blocks, sizeof blocks, s->blocks);
    fprintf(out, "%10s %15s %10s |", at, bytes, blocks);
    for (int k = 0; k < bar; ++k) fputc('#', out);
    fputs(best == peak ? " <- peak\n" : "\n", out);
  }
}
