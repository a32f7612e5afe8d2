/*
 * account-pipeline in C: open deals per account, kept in the pipeline's state and
 * emitted whenever a count changes. It makes the same records and keeps the same
 * state, byte for byte, as the Rust `account-pipeline`, so either can take over from
 * the other.
 *
 * State: `deal/<documentId>` holds the group of each open deal, `open/<group>` the
 * count per group. A record keyed by the group carries `{"account": ..., "open_deals":
 * n}`, or is a tombstone when the group has no open deal left.
 *
 * Parameters: `group_by`, the column deals are counted by (default
 * `fullDocument.account_id`); `open_status`, the `fullDocument.status` of an open deal
 * (default `open`).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sluice.h"

static const char *group_by;
static const char *open_status;

int sluice_init(const sluice_params *params) {
  group_by = strdup(sluice_param(params, "group_by", "fullDocument.account_id"));
  open_status = strdup(sluice_param(params, "open_status", "open"));
  return SLUICE_OK;
}

/* A column's text at row as a NUL-terminated malloc'd string; NULL when null. */
static char *text_at(const sluice_column *column, uint32_t row) {
  const char *data;
  size_t len;
  if (!sluice_get_bytes(column, row, &data, &len)) return NULL;
  char *text = malloc(len + 1);
  if (!text) abort();
  memcpy(text, data, len);
  text[len] = 0;
  return text;
}

static char *joined(const char *prefix, const char *text) {
  char *out = malloc(strlen(prefix) + strlen(text) + 1);
  if (!out) abort();
  strcpy(out, prefix);
  strcat(out, text);
  return out;
}

/* Groups whose count changed, with the last row that changed each, in the order they
 * were first changed; `slots` indexes them by hash (open addressing, at most half
 * full) so a batch touching many groups stays linear. */
typedef struct {
  char **groups;
  uint32_t *rows;
  size_t count, capacity;
  size_t *slots; /* index + 1 into groups; 0 is empty */
  size_t slot_count;
} changes;

static uint64_t hash_of(const char *text) {
  uint64_t hash = 1469598103934665603u;
  for (const unsigned char *c = (const unsigned char *)text; *c; c++) hash = (hash ^ *c) * 1099511628211u;
  return hash;
}

/* The slot of group: where it is, or the empty one where it would go. */
static size_t *slot_of(const changes *changed, const char *group) {
  size_t mask = changed->slot_count - 1, i = (size_t)hash_of(group) & mask;
  while (changed->slots[i] && strcmp(changed->groups[changed->slots[i] - 1], group) != 0) i = (i + 1) & mask;
  return &changed->slots[i];
}

static void grow_slots(changes *changed) {
  free(changed->slots);
  changed->slot_count = changed->slot_count ? 2 * changed->slot_count : 16;
  changed->slots = calloc(changed->slot_count, sizeof(size_t));
  if (!changed->slots) abort();
  for (size_t i = 0; i < changed->count; i++) *slot_of(changed, changed->groups[i]) = i + 1;
}

static void touch(changes *changed, const char *group, uint32_t row) {
  if (2 * (changed->count + 1) > changed->slot_count) grow_slots(changed);
  size_t *slot = slot_of(changed, group);
  if (*slot) {
    changed->rows[*slot - 1] = row;
    return;
  }
  if (changed->count == changed->capacity) {
    changed->capacity = changed->capacity ? 2 * changed->capacity : 8;
    changed->groups = realloc(changed->groups, changed->capacity * sizeof(char *));
    changed->rows = realloc(changed->rows, changed->capacity * sizeof(uint32_t));
    if (!changed->groups || !changed->rows) abort();
  }
  changed->groups[changed->count] = strdup(group);
  changed->rows[changed->count++] = row;
  *slot = changed->count;
}

/* `text` as a JSON string, escaped as the Rust example escapes it, appended to out. */
static size_t json_string(char *out, const char *text) {
  size_t n = 0;
  out[n++] = '"';
  for (const unsigned char *c = (const unsigned char *)text; *c; c++) {
    if (*c == '"' || *c == '\\') {
      out[n++] = '\\';
      out[n++] = (char)*c;
    } else if (*c < 0x20) {
      n += (size_t)sprintf(out + n, "\\u%04x", *c);
    } else {
      out[n++] = (char)*c;
    }
  }
  out[n++] = '"';
  out[n] = 0;
  return n;
}

int sluice_transform(sluice_batch *batch, sluice_output *out) {
  const sluice_column *ids = sluice_column_named(batch, "documentId");
  const sluice_column *groups = sluice_column_named(batch, group_by);
  const sluice_column *statuses = sluice_column_named(batch, "fullDocument.status");
  if (!ids || !groups || !statuses) return sluice_fail_batch("The batch lacks documentId, %s or fullDocument.status.", group_by);
  changes changed = {0};
  for (uint32_t row = 0; row < sluice_rows(batch); row++) {
    char *id = text_at(ids, row);
    if (!id) return sluice_fail_row(row, "The row has no documentId.");
    sluice_change_type change = sluice_row_change_type(batch, row);
    if (change == SLUICE_UPDATE_PREIMAGE) {
      free(id);
      continue;
    }
    char *now_open = NULL;
    if (change != SLUICE_DELETE) {
      char *status = text_at(statuses, row);
      if (status && strcmp(status, open_status) == 0) {
        now_open = text_at(groups, row);
        if (!now_open) now_open = strdup("");
      }
      free(status);
    }
    char *key = joined("deal/", id);
    char *was_open = sluice_state_get_str(key);
    bool same = (!was_open && !now_open) || (was_open && now_open && strcmp(was_open, now_open) == 0);
    if (!same) {
      if (was_open) {
        char *count_key = joined("open/", was_open);
        sluice_state_add(count_key, -1);
        free(count_key);
        touch(&changed, was_open, row);
      }
      if (now_open) {
        sluice_state_put_str(key, now_open);
        char *count_key = joined("open/", now_open);
        sluice_state_add(count_key, 1);
        free(count_key);
        touch(&changed, now_open, row);
      } else {
        sluice_state_delete_key(key);
      }
    }
    free(key);
    free(was_open);
    free(now_open);
    free(id);
  }
  for (size_t i = 0; i < changed.count; i++) {
    const char *group = changed.groups[i];
    char *count_key = joined("open/", group);
    int64_t count = 0;
    sluice_state_get_int(count_key, &count);
    free(count_key);
    if (count == 0) {
      sluice_emit_kv(out, changed.rows[i], group, (int32_t)strlen(group), NULL, 0);
    } else {
      char *value = malloc(6 * strlen(group) + 64);
      if (!value) abort();
      size_t n = (size_t)sprintf(value, "{\"account\":");
      n += json_string(value + n, group);
      n += (size_t)sprintf(value + n, ",\"open_deals\":%" PRId64 "}", count);
      sluice_emit_kv(out, changed.rows[i], group, (int32_t)strlen(group), value, (int32_t)n);
      free(value);
    }
    free(changed.groups[i]);
  }
  free(changed.groups);
  free(changed.rows);
  free(changed.slots);
  return SLUICE_OK;
}
