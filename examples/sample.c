/* A small program for the demo (scripts/demo.sh): a word-frequency table
 * that leaks on purpose, so the MEM_LIVE report has something to show.
 *
 *   build/bin/igprof -mp build/examples/sample
 *   build/bin/igprof-analyse -r MEM_LIVE igprof.sample.<pid>
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct entry {
  char *word;
  int count;
  struct entry *next;
};

#define BUCKETS 1024

static struct entry *table[BUCKETS];

static unsigned hash(const char *s)
{
  unsigned h = 5381;
  while (*s) h = h * 33 + (unsigned char) *s++;
  return h % BUCKETS;
}

/* Every distinct word: one entry and one copy of the word (kept: "leaked"). */
static void add_word(const char *w)
{
  unsigned h = hash(w);
  for (struct entry *e = table[h]; e; e = e->next)
    if (strcmp(e->word, w) == 0) { e->count++; return; }
  struct entry *e = malloc(sizeof *e);
  e->word = strdup(w);
  e->count = 1;
  e->next = table[h];
  table[h] = e;
}

/* A scratch line buffer per line, freed again: shows in MEM_TOTAL only. */
static void read_text(int lines)
{
  for (int i = 0; i < lines; ++i) {
    char *line = malloc(256);
    snprintf(line, 256, "w%d w%d w%d common", i % 97, i % 13, i);
    for (char *tok = strtok(line, " "); tok; tok = strtok(NULL, " ")) add_word(tok);
    free(line);
  }
}

/* A growing array that is released at the end. */
static void grow_array(int n)
{
  int *a = NULL;
  for (int i = 0; i < n; ++i) {
    if ((i & (i - 1)) == 0) a = realloc(a, sizeof *a * (size_t) (i ? 2 * i : 1));
    a[i] = i;
  }
  free(a);
}

int main(void)
{
  read_text(5000);
  grow_array(100000);
  int words = 0;
  for (int i = 0; i < BUCKETS; ++i)
    for (struct entry *e = table[i]; e; e = e->next) ++words;
  printf("%d distinct words\n", words);
  return 0;
}
