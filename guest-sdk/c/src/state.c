/* The pipeline's keyed state: text, integers and counters stored as UTF-8 text, as
 * every SDK stores them, over the backend (state_backend.h). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "state_backend.h"

/* Entries a scan asks for at a time in sluice_state_entries. */
#define STATE_PAGE 256

bool sluice_state_get(const void *key, size_t key_len, uint8_t **value, size_t *value_len) {
  return state_backend_get(key, key_len, value, value_len);
}

void sluice_state_get_many(const sluice_state_key *keys, size_t count, uint8_t **values,
                           size_t *value_lens) {
  state_backend_get_many(keys, count, values, value_lens);
}

void sluice_state_put(const void *key, size_t key_len, const void *value, size_t value_len) {
  state_backend_put(key, key_len, value, value_len);
}

void sluice_state_delete(const void *key, size_t key_len) { state_backend_delete(key, key_len); }

size_t sluice_state_scan(const void *prefix, size_t prefix_len, const void *after, size_t after_len,
                         uint32_t limit, sluice_state_entry **entries) {
  return state_backend_scan(prefix, prefix_len, after, after_len, limit, entries);
}

void sluice_state_entries_free(sluice_state_entry *entries, size_t count) {
  for (size_t i = 0; i < count; i++) {
    free(entries[i].key);
    free(entries[i].value);
  }
  free(entries);
}

/* Whether bytes are UTF-8: lead bytes followed by their continuation bytes. */
static bool utf8(const uint8_t *s, size_t len) {
  size_t i = 0;
  while (i < len) {
    uint8_t c = s[i];
    size_t more;
    if (c < 0x80)
      more = 0;
    else if (c >= 0xc2 && c <= 0xdf)
      more = 1;
    else if (c >= 0xe0 && c <= 0xef)
      more = 2;
    else if (c >= 0xf0 && c <= 0xf4)
      more = 3;
    else
      return false;
    if (len - i - 1 < more) return false;
    for (size_t j = 1; j <= more; j++)
      if ((s[i + j] & 0xc0) != 0x80) return false;
    i += more + 1;
  }
  return true;
}

char *sluice_state_get_str(const char *key) {
  uint8_t *value;
  size_t len;
  if (!state_backend_get((const uint8_t *)key, strlen(key), &value, &len)) return NULL;
  if (!utf8(value, len) || memchr(value, 0, len)) {
    free(value);
    return NULL;
  }
  char *text = malloc(len + 1);
  if (!text) abort();
  memcpy(text, value, len);
  text[len] = 0;
  free(value);
  return text;
}

void sluice_state_put_str(const char *key, const char *value) {
  state_backend_put((const uint8_t *)key, strlen(key), (const uint8_t *)value, strlen(value));
}

void sluice_state_delete_key(const char *key) { state_backend_delete((const uint8_t *)key, strlen(key)); }

bool sluice_state_get_int(const char *key, int64_t *value) {
  char *text = sluice_state_get_str(key);
  if (!text) return false;
  char *end;
  long long parsed = strtoll(text, &end, 10);
  bool ok = *text && !*end && (*text == '-' || *text == '+' || (*text >= '0' && *text <= '9'));
  free(text);
  if (ok) *value = parsed;
  return ok;
}

void sluice_state_put_int(const char *key, int64_t value) {
  char text[24];
  snprintf(text, sizeof text, "%" PRId64, value);
  sluice_state_put_str(key, text);
}

int64_t sluice_state_add(const char *key, int64_t delta) {
  int64_t value = 0;
  sluice_state_get_int(key, &value);
  value += delta;
  if (value == 0)
    sluice_state_delete_key(key);
  else
    sluice_state_put_int(key, value);
  return value;
}
