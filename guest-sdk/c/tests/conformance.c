/*
 * The C SDK's packer against guest-sdk/conformance/packing.json, natively: run by
 * run_conformance.py, which feeds each case's records on stdin, one per line:
 *
 *   case
 *   record ROW KEY VALUE TOPIC PARTITION HEADERS [NAME VALUE]...
 *   end
 *
 * where KEY, VALUE, TOPIC and header names and values are `x` and their bytes in hex,
 * or `-` for none, and PARTITION is a number or `-`. It prints each case's packed lists as one JSON line.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "packing.h"

/* Bytes of an `x`-prefixed hex word, or NULL for `-`; `len` gets their count. */
static char *unhex(const char *word, size_t *len) {
  if (strcmp(word, "-") == 0) return NULL;
  word++;
  *len = strlen(word) / 2;
  char *bytes = malloc(*len + 1);
  for (size_t i = 0; i < *len; i++) sscanf(word + 2 * i, "%2hhx", (unsigned char *)&bytes[i]);
  bytes[*len] = 0;
  return bytes;
}

static char *next_word(void) {
  static char word[1 << 16];
  return scanf("%65535s", word) == 1 ? word : NULL;
}

static void print_u32s(const char *name, const bytes_t *list) {
  printf(", \"%s\": [", name);
  for (size_t i = 0; i < COUNT(*list, uint32_t); i++) printf(i ? ", %u" : "%u", AT(*list, uint32_t)[i]);
  printf("]");
}

static void print_s32s(const char *name, const bytes_t *list) {
  printf(", \"%s\": [", name);
  for (size_t i = 0; i < COUNT(*list, int32_t); i++) printf(i ? ", %d" : "%d", AT(*list, int32_t)[i]);
  printf("]");
}

/* Names are hex on the way out too, so no JSON escaping is needed here. */
static void print_names(const char *name, const bytes_t *names) {
  printf(", \"%s\": [", name);
  for (size_t i = 0; i < COUNT(*names, char *); i++) {
    printf(i ? ", \"" : "\"");
    for (const char *c = AT(*names, char *)[i]; *c; c++) printf("%02x", (unsigned char)*c);
    printf("\"");
  }
  printf("]");
}

static void print_packed(const sluice_packer *p) {
  printf("{\"data\": \"");
  for (size_t i = 0; i < p->data.len; i++) printf("%02x", p->data.data[i]);
  printf("\"");
  print_u32s("source_rows", &p->source_rows);
  print_s32s("key_lengths", &p->key_lengths);
  print_s32s("value_lengths", &p->value_lengths);
  print_names("topics", &p->topics);
  print_u32s("topic_indexes", &p->topic_indexes);
  print_s32s("partitions", &p->partitions);
  print_names("header_names", &p->header_names);
  print_u32s("header_counts", &p->header_counts);
  print_u32s("header_name_indexes", &p->header_name_indexes);
  print_u32s("header_value_lengths", &p->header_value_lengths);
  printf("}\n");
}

int main(void) {
  sluice_packer packer = {0};
  for (char *word; (word = next_word());) {
    if (strcmp(word, "case") == 0) {
      sluice_packer_clear(&packer);
    } else if (strcmp(word, "end") == 0) {
      print_packed(&packer);
    } else if (strcmp(word, "record") == 0) {
      sluice_record record = {0};
      size_t len = 0;
      uint32_t row = (uint32_t)strtoul(next_word(), NULL, 10);
      record.key = unhex(next_word(), &len);
      record.key_len = (int32_t)len;
      record.value = unhex(next_word(), &len);
      record.value_len = (int32_t)len;
      record.topic = unhex(next_word(), &len);
      char *partition = next_word();
      record.has_partition = strcmp(partition, "-") != 0;
      record.partition = record.has_partition ? (int32_t)strtol(partition, NULL, 10) : 0;
      record.header_count = strtoul(next_word(), NULL, 10);
      sluice_header *headers = calloc(record.header_count + 1, sizeof *headers);
      for (size_t i = 0; i < record.header_count; i++) {
        headers[i].name = unhex(next_word(), &len);
        headers[i].value = unhex(next_word(), &headers[i].len);
      }
      record.headers = headers;
      sluice_packer_add(&packer, row, &record);
      for (size_t i = 0; i < record.header_count; i++) {
        free((char *)headers[i].name);
        free((char *)headers[i].value);
      }
      free(headers);
      free((char *)record.key);
      free((char *)record.value);
      free((char *)record.topic);
    } else {
      fprintf(stderr, "unexpected word `%s` on stdin\n", word);
      return 2;
    }
  }
  sluice_packer_free(&packer);
  return 0;
}
