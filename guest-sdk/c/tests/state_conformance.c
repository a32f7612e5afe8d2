/* Runs the state conformance steps test_state.py writes on stdin, one per line, and
 * prints what each gives. Words: `x<hex>` for bytes, `-` for none, integers in decimal.
 *
 *   case                      empties the state
 *   put K V | put_str K V | put_number K N | add K N | delete K
 *   get K | get_str K | get_number K | get_many K... | scan PREFIX AFTER LIMIT
 *   entries                   every stored entry, in key order
 *
 * Each line prints one line: `ok` or what the step gives. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sluice.h"

void state_memory_clear(void);

/* Decodes a word's hex into a NUL-terminated malloc'd buffer; NULL for `-`. */
static uint8_t *word(const char *w, size_t *len) {
  if (strcmp(w, "-") == 0) return NULL;
  size_t n = (strlen(w) - 1) / 2;
  uint8_t *out = malloc(n + 1);
  for (size_t i = 0; i < n; i++) sscanf(w + 1 + 2 * i, "%2hhx", &out[i]);
  out[n] = 0;
  *len = n;
  return out;
}

static void print_bytes(const uint8_t *data, size_t len) {
  printf("x");
  for (size_t i = 0; i < len; i++) printf("%02x", data[i]);
}

int main(void) {
  char line[65536];
  while (fgets(line, sizeof line, stdin)) {
    line[strcspn(line, "\n")] = 0;
    char *words[64];
    size_t count = 0;
    for (char *w = strtok(line, " "); w && count < 64; w = strtok(NULL, " ")) words[count++] = w;
    if (!count) continue;
    const char *op = words[0];
    size_t len = 0, len2 = 0;
    uint8_t *key = count > 1 ? word(words[1], &len) : NULL;
    if (strcmp(op, "case") == 0) {
      state_memory_clear();
      printf("ok");
    } else if (strcmp(op, "put") == 0) {
      uint8_t *value = word(words[2], &len2);
      sluice_state_put(key, len, value, len2);
      free(value);
      printf("ok");
    } else if (strcmp(op, "put_str") == 0) {
      uint8_t *value = word(words[2], &len2);
      sluice_state_put_str((char *)key, (char *)value);
      free(value);
      printf("ok");
    } else if (strcmp(op, "put_number") == 0) {
      sluice_state_put_int((char *)key, strtoll(words[2], NULL, 10));
      printf("ok");
    } else if (strcmp(op, "add") == 0) {
      printf("%" PRId64, sluice_state_add((char *)key, strtoll(words[2], NULL, 10)));
    } else if (strcmp(op, "delete") == 0) {
      sluice_state_delete(key, len);
      printf("ok");
    } else if (strcmp(op, "get") == 0) {
      uint8_t *value;
      if (sluice_state_get(key, len, &value, &len2)) {
        print_bytes(value, len2);
        free(value);
      } else {
        printf("-");
      }
    } else if (strcmp(op, "get_str") == 0) {
      char *text = sluice_state_get_str((char *)key);
      if (text) {
        print_bytes((uint8_t *)text, strlen(text));
        free(text);
      } else {
        printf("-");
      }
    } else if (strcmp(op, "get_number") == 0) {
      int64_t value;
      if (sluice_state_get_int((char *)key, &value))
        printf("%" PRId64, value);
      else
        printf("-");
    } else if (strcmp(op, "get_many") == 0) {
      size_t n = count - 1;
      sluice_state_key *keys = calloc(n ? n : 1, sizeof(sluice_state_key));
      uint8_t **values = calloc(n ? n : 1, sizeof(uint8_t *));
      size_t *lens = calloc(n ? n : 1, sizeof(size_t));
      for (size_t i = 0; i < n; i++) {
        keys[i].data = word(words[i + 1], &keys[i].len);
      }
      sluice_state_get_many(keys, n, values, lens);
      for (size_t i = 0; i < n; i++) {
        if (i > 0) printf(" ");
        if (values[i]) {
          print_bytes(values[i], lens[i]);
        } else {
          printf("-");
        }
        free(values[i]);
        free((void *)keys[i].data);
      }
      free(keys);
      free(values);
      free(lens);
    } else if (strcmp(op, "scan") == 0 || strcmp(op, "entries") == 0) {
      bool all = strcmp(op, "entries") == 0;
      uint8_t *after = all ? NULL : word(words[2], &len2);
      sluice_state_entry *entries;
      size_t n = all ? sluice_state_scan("", 0, NULL, 0, UINT32_MAX / 2, &entries)
                     : sluice_state_scan(key, len, after, len2, (uint32_t)strtoul(words[3], NULL, 10), &entries);
      for (size_t i = 0; i < n; i++) {
        if (i) printf(" ");
        print_bytes(entries[i].key, entries[i].key_len);
        printf(" ");
        print_bytes(entries[i].value, entries[i].value_len);
      }
      sluice_state_entries_free(entries, n);
      free(after);
    } else {
      fprintf(stderr, "unknown step %s\n", op);
      return 1;
    }
    printf("\n");
    free(key);
  }
  return 0;
}
