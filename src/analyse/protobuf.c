#include "protobuf.h"

#include <stdlib.h>
#include <string.h>

#include "util.h"

enum { WIRE_VARINT = 0, WIRE_LEN = 2 };

void pb_free(struct pb_buf *b)
{
  free(b->data);
  memset(b, 0, sizeof(*b));
}

static void reserve(struct pb_buf *b, size_t n)
{
  GROW(b->data, b->cap, b->len + n);
}

static size_t varint_size(uint64_t v)
{
  size_t n = 1;
  while (v >= 0x80) { v >>= 7; ++n; }
  return n;
}

static void put_varint(uint8_t *p, uint64_t v)
{
  while (v >= 0x80) { *p++ = (uint8_t) (v | 0x80); v >>= 7; }
  *p = (uint8_t) v;
}

void pb_varint(struct pb_buf *b, uint64_t v)
{
  reserve(b, 10);
  put_varint(b->data + b->len, v);
  b->len += varint_size(v);
}

static void tag(struct pb_buf *b, uint32_t field, int wire)
{
  pb_varint(b, (uint64_t) field << 3 | (uint64_t) wire);
}

void pb_uint(struct pb_buf *b, uint32_t field, uint64_t v)
{
  tag(b, field, WIRE_VARINT);
  pb_varint(b, v);
}

void pb_int(struct pb_buf *b, uint32_t field, int64_t v)
{
  pb_uint(b, field, (uint64_t) v);
}

void pb_bytes(struct pb_buf *b, uint32_t field, const void *data, size_t len)
{
  tag(b, field, WIRE_LEN);
  pb_varint(b, len);
  reserve(b, len);
  if (len) memcpy(b->data + b->len, data, len);
  b->len += len;
}

void pb_string(struct pb_buf *b, uint32_t field, const char *s)
{
  pb_bytes(b, field, s, strlen(s));
}

/* The content starts one byte after the mark, the room of a length below
 * 128; pb_end moves it when the length needs more. */
size_t pb_begin(struct pb_buf *b, uint32_t field)
{
  tag(b, field, WIRE_LEN);
  reserve(b, 1);
  size_t mark = b->len;
  b->data[b->len++] = 0;
  return mark;
}

void pb_end(struct pb_buf *b, size_t mark)
{
  size_t len = b->len - mark - 1, n = varint_size(len);
  if (n > 1) {
    reserve(b, n - 1);
    memmove(b->data + mark + n, b->data + mark + 1, len);
    b->len += n - 1;
  }
  put_varint(b->data + mark, len);
}
