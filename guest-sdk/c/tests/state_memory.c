/* The state helpers' backend in the SDK's native tests: a sorted table in memory. */
#include <stdlib.h>
#include <string.h>

#include "state_backend.h"

typedef struct {
  uint8_t *data;
  size_t len;
} bytes;

static struct {
  bytes *keys, *values;
  size_t count, capacity;
} table;

static bytes copy(const uint8_t *data, size_t len) {
  bytes b = {malloc(len ? len : 1), len};
  if (!b.data) abort();
  memcpy(b.data, data, len);
  return b;
}

static int compare(const uint8_t *a, size_t a_len, const uint8_t *b, size_t b_len) {
  int order = memcmp(a, b, a_len < b_len ? a_len : b_len);
  return order ? order : (a_len > b_len) - (a_len < b_len);
}

/* Where key is, or would be inserted; *found says whether it is there. */
static size_t position(const uint8_t *key, size_t len, bool *found) {
  size_t i = 0;
  while (i < table.count && compare(table.keys[i].data, table.keys[i].len, key, len) < 0) i++;
  *found = i < table.count && compare(table.keys[i].data, table.keys[i].len, key, len) == 0;
  return i;
}

void state_memory_clear(void) {
  for (size_t i = 0; i < table.count; i++) {
    free(table.keys[i].data);
    free(table.values[i].data);
  }
  table.count = 0;
}

bool state_backend_get(const uint8_t *key, size_t key_len, uint8_t **value, size_t *value_len) {
  bool found;
  size_t i = position(key, key_len, &found);
  if (!found) return false;
  bytes b = copy(table.values[i].data, table.values[i].len);
  *value = b.data;
  *value_len = b.len;
  return true;
}

void state_backend_get_many(const sluice_state_key *keys, size_t count, uint8_t **values,
                            size_t *value_lens) {
  for (size_t i = 0; i < count; i++) {
    if (!state_backend_get(keys[i].data, keys[i].len, &values[i], &value_lens[i])) {
      values[i] = NULL;
      value_lens[i] = 0;
    }
  }
}

void state_backend_put(const uint8_t *key, size_t key_len, const uint8_t *value, size_t value_len) {
  bool found;
  size_t i = position(key, key_len, &found);
  if (found) {
    free(table.values[i].data);
    table.values[i] = copy(value, value_len);
    return;
  }
  if (table.count == table.capacity) {
    table.capacity = table.capacity ? 2 * table.capacity : 16;
    table.keys = realloc(table.keys, table.capacity * sizeof(bytes));
    table.values = realloc(table.values, table.capacity * sizeof(bytes));
    if (!table.keys || !table.values) abort();
  }
  memmove(table.keys + i + 1, table.keys + i, (table.count - i) * sizeof(bytes));
  memmove(table.values + i + 1, table.values + i, (table.count - i) * sizeof(bytes));
  table.keys[i] = copy(key, key_len);
  table.values[i] = copy(value, value_len);
  table.count++;
}

void state_backend_delete(const uint8_t *key, size_t key_len) {
  bool found;
  size_t i = position(key, key_len, &found);
  if (!found) return;
  free(table.keys[i].data);
  free(table.values[i].data);
  memmove(table.keys + i, table.keys + i + 1, (table.count - i - 1) * sizeof(bytes));
  memmove(table.values + i, table.values + i + 1, (table.count - i - 1) * sizeof(bytes));
  table.count--;
}

size_t state_backend_scan(const uint8_t *prefix, size_t prefix_len, const uint8_t *after,
                          size_t after_len, uint32_t limit, sluice_state_entry **entries) {
  size_t room = limit < table.count ? limit : table.count;
  *entries = calloc(room ? room : 1, sizeof(sluice_state_entry));
  if (!*entries) abort();
  size_t n = 0;
  for (size_t i = 0; i < table.count && n < limit; i++) {
    bytes k = table.keys[i];
    if (k.len < prefix_len || memcmp(k.data, prefix, prefix_len) != 0) continue;
    if (after && compare(k.data, k.len, after, after_len) <= 0) continue;
    bytes key = copy(k.data, k.len), value = copy(table.values[i].data, table.values[i].len);
    (*entries)[n++] = (sluice_state_entry){key.data, key.len, value.data, value.len};
  }
  return n;
}
