/*
 * Growable byte arrays, the one container of the C SDK (internal; no bindings, so
 * the conformance harness builds it natively too).
 */
#ifndef SLUICE_LISTS_H
#define SLUICE_LISTS_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
  uint8_t *data;
  size_t len, cap;
} bytes_t;

/* Appends `size` bytes of `item` (uninitialised when NULL) and returns where they are. */
void *sluice_list_push(bytes_t *v, const void *item, size_t size);
/* A NUL-terminated copy of `len` bytes. */
char *sluice_copy_text(const uint8_t *ptr, size_t len);

#define PUSH(v, type, value)                   \
  do {                                         \
    type item_ = (value);                      \
    sluice_list_push((v), &item_, sizeof item_); \
  } while (0)
#define COUNT(v, type) ((v).len / sizeof(type))
#define AT(v, type) ((type *)(v).data)

#endif
