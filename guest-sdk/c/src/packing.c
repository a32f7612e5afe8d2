#include "packing.h"

#include <stdlib.h>
#include <string.h>

/* The index of `name` in `names`, added when new. */
static uint32_t intern(bytes_t *names, const char *name) {
  size_t count = COUNT(*names, char *);
  for (size_t i = 0; i < count; i++) {
    if (strcmp(AT(*names, char *)[i], name) == 0) return (uint32_t)i;
  }
  PUSH(names, char *, sluice_copy_text((const uint8_t *)name, strlen(name)));
  return (uint32_t)count;
}

/* Pads an optional list with `fill` up to `n` entries: it stays empty until a record
 * needs it, then holds an entry for every record before that one too. */
static void backfill(bytes_t *list, size_t n, int32_t fill) {
  while (COUNT(*list, int32_t) < n) PUSH(list, int32_t, fill);
}

void sluice_packer_add(sluice_packer *p, uint32_t row, const sluice_record *record) {
  size_t before = COUNT(p->source_rows, uint32_t);
  PUSH(&p->source_rows, uint32_t, row);
  int32_t key_len = record->key ? record->key_len : -1;
  int32_t value_len = record->value ? record->value_len : -1;
  PUSH(&p->key_lengths, int32_t, key_len);
  if (key_len > 0) sluice_list_push(&p->data, record->key, (size_t)key_len);
  PUSH(&p->value_lengths, int32_t, value_len);
  if (value_len > 0) sluice_list_push(&p->data, record->value, (size_t)value_len);
  if (record->topic || p->topic_indexes.len) {
    backfill(&p->topic_indexes, before, 0);
    PUSH(&p->topic_indexes, uint32_t, record->topic ? intern(&p->topics, record->topic) + 1 : 0);
  }
  if (record->has_partition || p->partitions.len) {
    backfill(&p->partitions, before, -1);
    PUSH(&p->partitions, int32_t, record->has_partition ? record->partition : -1);
  }
  if (record->header_count || p->header_counts.len) {
    backfill(&p->header_counts, before, 0);
    PUSH(&p->header_counts, uint32_t, (uint32_t)record->header_count);
  }
  for (size_t i = 0; i < record->header_count; i++) {
    const sluice_header *h = &record->headers[i];
    PUSH(&p->header_name_indexes, uint32_t, intern(&p->header_names, h->name));
    PUSH(&p->header_value_lengths, uint32_t, (uint32_t)h->len);
    if (h->len) sluice_list_push(&p->data, h->value, h->len);
  }
}

static void clear_names(bytes_t *names) {
  for (size_t i = 0; i < COUNT(*names, char *); i++) free(AT(*names, char *)[i]);
  names->len = 0;
}

void sluice_packer_clear(sluice_packer *p) {
  bytes_t *lists[] = {&p->data, &p->source_rows, &p->key_lengths, &p->value_lengths,
                      &p->topic_indexes, &p->partitions, &p->header_counts,
                      &p->header_name_indexes, &p->header_value_lengths};
  for (size_t i = 0; i < sizeof lists / sizeof lists[0]; i++) lists[i]->len = 0;
  clear_names(&p->topics);
  clear_names(&p->header_names);
}

void sluice_packer_free(sluice_packer *p) {
  sluice_packer_clear(p);
  bytes_t *lists[] = {&p->data, &p->source_rows, &p->key_lengths, &p->value_lengths,
                      &p->topic_indexes, &p->partitions, &p->header_counts,
                      &p->header_name_indexes, &p->header_value_lengths,
                      &p->topics, &p->header_names};
  for (size_t i = 0; i < sizeof lists / sizeof lists[0]; i++) free(lists[i]->data);
  memset(p, 0, sizeof *p);
}
