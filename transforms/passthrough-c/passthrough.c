/*
 * Pass-through in C: every change row as a JSON object of its data columns (struct
 * fields under dotted names; dates in days and timestamps in microseconds since the
 * epoch) and its change columns, keyless. Reads rows one by one, so it shows the
 * SDK's row API.
 *
 * Parameter `deletes_topic`: when set, delete rows go to that topic instead of the
 * pipeline's. Parameter `json_schema`: when set (a JSON Schema's text), the values are
 * framed with it: the host registers it and writes Confluent's wire format.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sluice.h"

static const char *deletes_topic;
static sluice_schema value_schema = {.kind = SLUICE_SCHEMA_JSON};
static sluice_framing framing = {.value = &value_schema};

int sluice_init(const sluice_params *params) {
  deletes_topic = sluice_param(params, "deletes_topic", NULL);
  value_schema.text = sluice_param(params, "json_schema", NULL);
  return SLUICE_OK;
}

/* A growing JSON text. */
typedef struct {
  char *text;
  size_t len, cap;
} json_t;

static void put(json_t *j, const char *s, size_t n) {
  if (j->len + n + 1 > j->cap) {
    j->cap = (j->len + n + 1) * 2;
    j->text = realloc(j->text, j->cap);
    if (!j->text) abort();
  }
  memcpy(j->text + j->len, s, n);
  j->len += n;
}

static void put_string(json_t *j, const char *s, size_t n) {
  static const char hex[] = "0123456789abcdef";
  put(j, "\"", 1);
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)s[i];
    if (c == '"' || c == '\\') {
      char escaped[2] = {'\\', (char)c};
      put(j, escaped, 2);
    } else if (c < 0x20) {
      char escaped[6] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 15]};
      put(j, escaped, 6);
    } else {
      put(j, (const char *)&c, 1);
    }
  }
  put(j, "\"", 1);
}

static void put_number(json_t *j, const char *format, ...) __attribute__((format(printf, 2, 3)));
#include <stdarg.h>
static void put_number(json_t *j, const char *format, ...) {
  char buffer[64];
  va_list args;
  va_start(args, format);
  int n = vsnprintf(buffer, sizeof buffer, format, args);
  va_end(args);
  put(j, buffer, (size_t)n);
}

static const char *CHANGE_NAMES[] = {"insert", "update_preimage", "update_postimage", "delete"};

int sluice_transform(sluice_batch *batch, sluice_output *out) {
  json_t json = {0};
  size_t columns = sluice_column_count(batch);
  if (columns == 0) return SLUICE_ERROR;
  for (uint32_t row = 0; row < sluice_rows(batch); row++) {
    json.len = 0;
    put(&json, "{", 1);
    for (size_t c = 0; c < columns; c++) {
      const sluice_column *column = sluice_column_at(batch, c);
      if (sluice_is_null(column, row)) continue;
      const char *name = sluice_column_name(column);
      put_string(&json, name, strlen(name));
      put(&json, ":", 1);
      const char *bytes;
      size_t len;
      int64_t integer;
      double number;
      bool flag;
      if (sluice_get_bytes(column, row, &bytes, &len)) {
        put_string(&json, bytes, len);
      } else if (sluice_get_int(column, row, &integer)) {
        put_number(&json, "%" PRId64, integer);
      } else if (sluice_get_double(column, row, &number)) {
        put_number(&json, "%.17g", number);
      } else if (sluice_get_bool(column, row, &flag)) {
        put(&json, flag ? "true" : "false", flag ? 4 : 5);
      }
      put(&json, ",", 1);
    }
    sluice_change_type change = sluice_row_change_type(batch, row);
    put(&json, "\"_change_type\":", 15);
    put_string(&json, CHANGE_NAMES[change], strlen(CHANGE_NAMES[change]));
    put_number(&json, ",\"_commit_version\":%" PRId64, sluice_row_commit_version(batch, row));
    put_number(&json, ",\"_commit_timestamp\":%" PRId64 "}", sluice_row_commit_timestamp(batch, row));
    sluice_record record = {
        .key = NULL,
        .key_len = -1,
        .value = json.text,
        .value_len = (int32_t)json.len,
        .topic = change == SLUICE_DELETE ? deletes_topic : NULL,
    };
    if (value_schema.text) {
      sluice_emit_framed(out, row, &framing, &record);
    } else {
      sluice_emit(out, row, &record);
    }
  }
  free(json.text);
  return SLUICE_OK;
}
