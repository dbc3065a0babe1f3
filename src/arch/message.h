/* An allocation-free builder for short human-readable messages (hook failure
 * reasons). The runtime may not call printf-family functions that can
 * allocate, so the hook engine and the architecture layer build their
 * `detail` strings with these few appenders. Output is always terminated and
 * silently truncated at the buffer's capacity. */
#ifndef IGPROF_ARCH_MESSAGE_H
#define IGPROF_ARCH_MESSAGE_H

#include <stddef.h>
#include <stdint.h>

struct message {
  char *buf;
  size_t cap;
  size_t len;
};

static inline struct message message_start(char *buf, size_t cap)
{
  struct message m = {buf, cap, 0};
  if (cap)
    buf[0] = 0;
  return m;
}

static inline struct message *message_char(struct message *m, char ch)
{
  if (m->len + 1 < m->cap) {
    m->buf[m->len++] = ch;
    m->buf[m->len] = 0;
  }
  return m;
}

static inline struct message *message_str(struct message *m, const char *s)
{
  while (s && *s)
    message_char(m, *s++);
  return m;
}

static inline struct message *message_dec(struct message *m, uint64_t v)
{
  char digits[24];
  int n = 0;
  do {
    digits[n++] = (char)('0' + v % 10);
    v /= 10;
  } while (v);
  while (n)
    message_char(m, digits[--n]);
  return m;
}

static inline struct message *message_hex(struct message *m, uint64_t v)
{
  char digits[20];
  int n = 0;
  do {
    digits[n++] = "0123456789abcdef"[v & 15];
    v >>= 4;
  } while (v);
  message_str(m, "0x");
  while (n)
    message_char(m, digits[--n]);
  return m;
}

#endif
