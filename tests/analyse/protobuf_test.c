/* The protocol buffers encoder of --pprof (src/analyse/protobuf.c): exact
 * bytes of varints, negative int64s, strings, nested messages whose length
 * needs one, two or three bytes, nesting and packed repeated fields. */
#include <stdio.h>
#include <string.h>

#include "../../src/analyse/protobuf.h"

static int failures;

static void expect(const char *what, const struct pb_buf *b, const unsigned char *want, size_t n)
{
  if (b->len == n && !memcmp(b->data, want, n)) return;
  printf("%s: got %zu bytes:", what, b->len);
  for (size_t i = 0; i < b->len && i < 24; ++i) printf(" %02x", b->data[i]);
  printf("\n  expected %zu bytes:", n);
  for (size_t i = 0; i < n && i < 24; ++i) printf(" %02x", want[i]);
  printf("\n");
  failures++;
}

#define EXPECT(what, b, ...) do { \
    static const unsigned char want_[] = { __VA_ARGS__ }; \
    expect(what, b, want_, sizeof(want_)); pb_free(b); } while (0)

int main(void)
{
  struct pb_buf b = { 0 };
  pb_uint(&b, 1, 300);
  EXPECT("uint 300", &b, 0x08, 0xac, 0x02);
  pb_uint(&b, 15, 0);
  pb_uint(&b, 16, 1);
  EXPECT("field 15 and 16", &b, 0x78, 0x00, 0x80, 0x01, 0x01);
  pb_int(&b, 2, -1);
  EXPECT("int -1", &b, 0x10, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01);
  pb_uint(&b, 1, UINT64_MAX);
  EXPECT("uint max", &b, 0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01);
  pb_string(&b, 6, "");
  pb_string(&b, 6, "cpu");
  EXPECT("strings", &b, 0x32, 0x00, 0x32, 0x03, 'c', 'p', 'u');
  /* packed repeated: location ids 3, 270 */
  size_t m = pb_begin(&b, 1);
  pb_varint(&b, 3);
  pb_varint(&b, 270);
  pb_end(&b, m);
  EXPECT("packed", &b, 0x0a, 0x03, 0x03, 0x8e, 0x02);
  /* nested: Sample { location_id [1], value [2] } in field 2 */
  size_t outer = pb_begin(&b, 2);
  size_t ids = pb_begin(&b, 1);
  pb_varint(&b, 1);
  pb_end(&b, ids);
  size_t vals = pb_begin(&b, 2);
  pb_varint(&b, 2);
  pb_end(&b, vals);
  pb_end(&b, outer);
  EXPECT("nested", &b, 0x12, 0x06, 0x0a, 0x01, 0x01, 0x12, 0x01, 0x02);
  pb_begin(&b, 1);
  pb_end(&b, 1);
  EXPECT("empty message", &b, 0x0a, 0x00);

  /* Blobs of 200 and 20000 bytes between two fields inside a message:
   * lengths of two and three bytes, the content moved intact. */
  static unsigned char blob[20000];
  for (size_t i = 0; i < sizeof(blob); ++i) blob[i] = (unsigned char) (i * 7);
  for (size_t n = 200; n <= 20000; n *= 100) {
    size_t mark = pb_begin(&b, 3);
    pb_uint(&b, 1, 7);
    pb_bytes(&b, 2, blob, n);
    pb_uint(&b, 1, 9);
    pb_end(&b, mark);
    size_t blob_len_size = n < 16384 ? 2 : 3;
    size_t content = 2 + 1 + blob_len_size + n + 2;
    size_t len_size = content < 16384 ? 2 : 3;
    size_t got = 0;
    for (size_t i = 0; i < len_size; ++i) got |= (size_t) (b.data[1 + i] & 0x7f) << (7 * i);
    const unsigned char *c = b.data + 1 + len_size;
    int ok = b.len == 1 + len_size + content && b.data[0] == 0x1a && got == content
             && !(b.data[len_size] & 0x80) && c[0] == 0x08 && c[1] == 7 && c[2] == 0x12
             && !memcmp(c + 3 + blob_len_size, blob, n) && c[content - 2] == 0x08 && c[content - 1] == 9;
    if (!ok) {
      printf("%zu-byte blob: %zu bytes, length field %zu for %zu\n", n, b.len, got, content);
      failures++;
    }
    pb_free(&b);
  }
  if (failures) return 1;
  printf("ok\n");
  return 0;
}
