/* The state helpers' backend in a module: the contract's state interface. */
#include <stdlib.h>
#include <string.h>

#include "state_backend.h"
#include "transform.h"

static transform_list_u8_t list_of(const uint8_t *data, size_t len) {
  transform_list_u8_t list = {(uint8_t *)data, len};
  return list;
}

bool state_backend_get(const uint8_t *key, size_t key_len, uint8_t **value, size_t *value_len) {
  transform_list_u8_t k = list_of(key, key_len), found;
  if (!sluice_transform_state_get(&k, &found)) return false;
  /* The bindings' buffer is malloc'd: it becomes the caller's. */
  *value = found.ptr;
  *value_len = found.len;
  return true;
}

void state_backend_get_many(const sluice_state_key *keys, size_t count, uint8_t **values,
                            size_t *value_lens) {
  transform_list_u8_t *asked = calloc(count ? count : 1, sizeof(transform_list_u8_t));
  if (!asked) abort();
  for (size_t i = 0; i < count; i++) asked[i] = list_of(keys[i].data, keys[i].len);
  transform_list_list_u8_t list = {asked, count};
  transform_list_option_list_u8_t found;
  sluice_transform_state_get_many(&list, &found);
  free(asked);
  for (size_t i = 0; i < count; i++) {
    bool some = i < found.len && found.ptr[i].is_some;
    values[i] = NULL;
    value_lens[i] = 0;
    if (!some) continue;
    if (found.ptr[i].val.len == 0) {
      /* An empty value is still a value: never NULL, which says absent. */
      free(found.ptr[i].val.ptr);
      values[i] = malloc(1);
      if (!values[i]) abort();
      continue;
    }
    /* The bindings' buffers are malloc'd: they become the caller's. */
    values[i] = found.ptr[i].val.ptr;
    value_lens[i] = found.ptr[i].val.len;
  }
  free(found.ptr);
}

void state_backend_put(const uint8_t *key, size_t key_len, const uint8_t *value, size_t value_len) {
  transform_list_u8_t k = list_of(key, key_len), v = list_of(value, value_len);
  sluice_transform_state_put(&k, &v);
}

void state_backend_delete(const uint8_t *key, size_t key_len) {
  transform_list_u8_t k = list_of(key, key_len);
  sluice_transform_state_delete(&k);
}

size_t state_backend_scan(const uint8_t *prefix, size_t prefix_len, const uint8_t *after,
                          size_t after_len, uint32_t limit, sluice_state_entry **entries) {
  transform_list_u8_t p = list_of(prefix, prefix_len), a = list_of(after, after_len);
  sluice_transform_state_list_entry_t found;
  sluice_transform_state_scan(&p, after ? &a : NULL, limit, &found);
  *entries = calloc(found.len ? found.len : 1, sizeof(sluice_state_entry));
  if (!*entries) abort();
  for (size_t i = 0; i < found.len; i++) {
    (*entries)[i].key = found.ptr[i].key.ptr;
    (*entries)[i].key_len = found.ptr[i].key.len;
    (*entries)[i].value = found.ptr[i].value.ptr;
    (*entries)[i].value_len = found.ptr[i].value.len;
  }
  /* The keys and values now belong to the entries; only the list itself is freed. */
  free(found.ptr);
  return found.len;
}
