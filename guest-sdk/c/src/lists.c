#include "lists.h"

#include <stdlib.h>
#include <string.h>

void *sluice_list_push(bytes_t *v, const void *item, size_t size) {
  if (v->len + size > v->cap) {
    size_t cap = v->cap ? v->cap * 2 : 256;
    while (cap < v->len + size) cap *= 2;
    v->data = realloc(v->data, cap);
    if (!v->data) abort();
    v->cap = cap;
  }
  void *at = v->data + v->len;
  if (item) memcpy(at, item, size);
  v->len += size;
  return at;
}

char *sluice_copy_text(const uint8_t *ptr, size_t len) {
  char *out = malloc(len + 1);
  if (!out) abort();
  memcpy(out, ptr, len);
  out[len] = 0;
  return out;
}
