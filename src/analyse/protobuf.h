/* A protocol buffers encoder for the few wire types a pprof profile needs:
 * varints (wire type 0) and length-delimited fields (wire type 2: strings,
 * bytes, nested messages, packed repeated integers). Fields are written in
 * the order the caller gives; nothing is buffered per field. */
#ifndef IGPROF_ANALYSE_PROTOBUF_H
#define IGPROF_ANALYSE_PROTOBUF_H

#include <stddef.h>
#include <stdint.h>

struct pb_buf { uint8_t *data; size_t len, cap; };

void pb_free(struct pb_buf *b);
/* A bare varint (for packed repeated fields). */
void pb_varint(struct pb_buf *b, uint64_t v);
/* Field `field` as a varint: uint64, or int64 as its two's complement
 * (ten bytes when negative, as protobuf's int64 is). Zero is written too:
 * callers leave out proto3 defaults themselves when they want. */
void pb_uint(struct pb_buf *b, uint32_t field, uint64_t v);
void pb_int(struct pb_buf *b, uint32_t field, int64_t v);
/* Field `field` as length-delimited bytes. */
void pb_bytes(struct pb_buf *b, uint32_t field, const void *data, size_t len);
void pb_string(struct pb_buf *b, uint32_t field, const char *s);
/* A nested message or packed repeated field: pb_begin writes the tag and
 * returns a mark; what is written until pb_end(mark) is its content, whose
 * length pb_end puts in front of it. Marks nest. */
size_t pb_begin(struct pb_buf *b, uint32_t field);
void pb_end(struct pb_buf *b, size_t mark);

#endif
