/*
 * The C SDK over the contract's generated bindings (transform.h, made by
 * `sluice build`): the exports call the transform's sluice_init and
 * sluice_transform; batches, columns, output and helpers wrap the host's imports.
 */
#include "sluice.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lists.h"
#include "packing.h"
#include "transform.h"

static transform_string_t wit_string(const char *text) {
  transform_string_t s = {(uint8_t *)text, strlen(text)};
  return s;
}

/* ---- Errors ---------------------------------------------------------------- */

static char *error_message;
static int64_t error_row = -1;

static int fail(int64_t row, const char *format, va_list args) {
  free(error_message);
  va_list again;
  va_copy(again, args);
  int len = vsnprintf(NULL, 0, format, args);
  error_message = malloc(len + 1);
  if (!error_message) abort();
  vsnprintf(error_message, len + 1, format, again);
  va_end(again);
  error_row = row;
  return SLUICE_ERROR;
}

int sluice_fail_init(const char *format, ...) {
  va_list args;
  va_start(args, format);
  int result = fail(-1, format, args);
  va_end(args);
  return result;
}

int sluice_fail_row(uint32_t row, const char *format, ...) {
  va_list args;
  va_start(args, format);
  int result = fail(row, format, args);
  va_end(args);
  return result;
}

int sluice_fail_batch(const char *format, ...) {
  va_list args;
  va_start(args, format);
  int result = fail(-1, format, args);
  va_end(args);
  return result;
}

/* Forgets a message left from an earlier call. */
static void clear_error(void) {
  free(error_message);
  error_message = NULL;
  error_row = -1;
}

/* Moves the pending message into a contract string the host frees. */
static transform_string_t take_error(const char *otherwise) {
  transform_string_t s;
  if (error_message) {
    s.ptr = (uint8_t *)error_message;
    s.len = strlen(error_message);
    error_message = NULL;
  } else {
    transform_string_dup(&s, otherwise);
  }
  return s;
}

void sluice_log(sluice_level level, const char *format, ...) {
  va_list args, again;
  va_start(args, format);
  va_copy(again, args);
  int len = vsnprintf(NULL, 0, format, args);
  char *text = malloc(len + 1);
  if (!text) abort();
  vsnprintf(text, len + 1, format, again);
  va_end(again);
  va_end(args);
  transform_string_t message = {(uint8_t *)text, (size_t)len};
  sluice_transform_host_log((sluice_transform_host_log_level_t)level, &message);
  free(text);
}

bool sluice_change_type_parse(const char *name, size_t len, sluice_change_type *out) {
  static const char *names[] = {"insert", "update_preimage", "update_postimage", "delete"};
  while (len && isspace((unsigned char)*name)) name++, len--;
  while (len && isspace((unsigned char)name[len - 1])) len--;
  for (int i = 0; i < 4; i++) {
    if (strlen(names[i]) == len && memcmp(names[i], name, len) == 0) {
      *out = (sluice_change_type)i;
      return true;
    }
  }
  return false;
}

/* ---- Parameters ------------------------------------------------------------ */

struct sluice_params {
  size_t count;
  char **names;
  char **values;
};

const char *sluice_param(const sluice_params *params, const char *name, const char *fallback) {
  for (size_t i = 0; i < params->count; i++) {
    if (strcmp(params->names[i], name) == 0) return params->values[i];
  }
  return fallback;
}

bool exports_sluice_transform_transformer_init(transform_list_tuple2_string_string_t *list,
                                               transform_string_t *err) {
  static sluice_params params;
  clear_error();
  params.count = list->len;
  params.names = calloc(list->len + 1, sizeof(char *));
  params.values = calloc(list->len + 1, sizeof(char *));
  for (size_t i = 0; i < list->len; i++) {
    params.names[i] = sluice_copy_text(list->ptr[i].f0.ptr, list->ptr[i].f0.len);
    params.values[i] = sluice_copy_text(list->ptr[i].f1.ptr, list->ptr[i].f1.len);
  }
  transform_list_tuple2_string_string_free(list);
  if (sluice_init(&params) == SLUICE_OK) return true;
  *err = take_error("sluice_init failed without saying why.");
  return false;
}

/* ---- Batches and columns ----------------------------------------------------- */

struct sluice_column {
  sluice_transform_types_column_t *raw;
  char *name;
  /* The one-column list it came in, when fetched by name; empty otherwise. */
  sluice_transform_host_list_column_t owned;
};

struct sluice_batch {
  sluice_transform_host_borrow_batch_t handle;
  uint32_t rows;
  bool have_types, have_versions, have_timestamps, have_columns;
  sluice_transform_host_list_change_type_t types;
  transform_list_s64_t versions, timestamps;
  sluice_transform_host_list_column_t columns;
  struct sluice_column *wrapped;
  bytes_t named; /* struct sluice_column *, fetched one by one by name */
  bytes_t selections; /* transform_list_u32_t, freed with the batch */
};

uint32_t sluice_rows(sluice_batch *batch) { return batch->rows; }

sluice_change_type sluice_row_change_type(sluice_batch *batch, uint32_t row) {
  if (!batch->have_types) {
    sluice_transform_host_method_batch_change_types(batch->handle, &batch->types);
    batch->have_types = true;
  }
  return (sluice_change_type)batch->types.ptr[row];
}

int64_t sluice_row_commit_version(sluice_batch *batch, uint32_t row) {
  if (!batch->have_versions) {
    sluice_transform_host_method_batch_commit_versions(batch->handle, &batch->versions);
    batch->have_versions = true;
  }
  return batch->versions.ptr[row];
}

int64_t sluice_row_commit_timestamp(sluice_batch *batch, uint32_t row) {
  if (!batch->have_timestamps) {
    sluice_transform_host_method_batch_commit_timestamps(batch->handle, &batch->timestamps);
    batch->have_timestamps = true;
  }
  return batch->timestamps.ptr[row];
}

/* Asks the host for the named columns (all when `names` is empty); on failure sets
 * the host's reason as the batch error. */
static bool fetch_columns(sluice_batch *batch, transform_list_string_t *names,
                          sluice_transform_host_list_column_t *columns) {
  transform_string_t err;
  if (sluice_transform_host_method_batch_columns(batch->handle, names, columns, &err)) return true;
  sluice_fail_batch("%.*s", (int)err.len, (const char *)err.ptr);
  transform_string_free(&err);
  return false;
}

/* Fetches every data column once, on first use. */
static bool load_columns(sluice_batch *batch) {
  if (batch->have_columns) return true;
  transform_list_string_t none = {NULL, 0};
  if (!fetch_columns(batch, &none, &batch->columns)) return false;
  batch->wrapped = calloc(batch->columns.len + 1, sizeof(struct sluice_column));
  for (size_t i = 0; i < batch->columns.len; i++) {
    batch->wrapped[i].raw = &batch->columns.ptr[i];
    batch->wrapped[i].name = sluice_copy_text(batch->columns.ptr[i].name.ptr, batch->columns.ptr[i].name.len);
  }
  batch->have_columns = true;
  return true;
}

size_t sluice_column_count(sluice_batch *batch) {
  return load_columns(batch) ? batch->columns.len : 0;
}

const sluice_column *sluice_column_at(sluice_batch *batch, size_t index) {
  if (!load_columns(batch) || index >= batch->columns.len) return NULL;
  return &batch->wrapped[index];
}

/* Only the columns a transform names are fetched, so reading three columns of a
 * wide table does not convert the others. */
const sluice_column *sluice_column_named(sluice_batch *batch, const char *name) {
  for (size_t i = 0; i < COUNT(batch->named, struct sluice_column *); i++) {
    struct sluice_column *column = AT(batch->named, struct sluice_column *)[i];
    if (strcmp(column->name, name) == 0) return column;
  }
  for (size_t i = 0; batch->have_columns && i < batch->columns.len; i++) {
    if (strcmp(batch->wrapped[i].name, name) == 0) return &batch->wrapped[i];
  }
  transform_string_t wanted = wit_string(name);
  transform_list_string_t names = {&wanted, 1};
  struct sluice_column *column = calloc(1, sizeof *column);
  if (!column) abort();
  if (!fetch_columns(batch, &names, &column->owned)) {
    free(column);
    return NULL;
  }
  column->raw = &column->owned.ptr[0];
  column->name = sluice_copy_text((const uint8_t *)name, strlen(name));
  PUSH(&batch->named, struct sluice_column *, column);
  return column;
}

const char *sluice_column_name(const sluice_column *column) { return column->name; }

sluice_kind sluice_column_kind(const sluice_column *column) {
  return (sluice_kind)column->raw->values.tag;
}

#define VALUES(column, field) (column)->raw->values.val.field

bool sluice_is_null(const sluice_column *column, uint32_t row) {
  switch (sluice_column_kind(column)) {
    case SLUICE_BOOLEAN: return !VALUES(column, boolean).ptr[row].is_some;
    case SLUICE_INT32: return !VALUES(column, int32).ptr[row].is_some;
    case SLUICE_DATE: return !VALUES(column, date).ptr[row].is_some;
    case SLUICE_INT64: return !VALUES(column, int64).ptr[row].is_some;
    case SLUICE_TIMESTAMP: return !VALUES(column, timestamp).ptr[row].is_some;
    case SLUICE_TIMESTAMP_NTZ: return !VALUES(column, timestamp_ntz).ptr[row].is_some;
    case SLUICE_FLOAT32: return !VALUES(column, float32).ptr[row].is_some;
    case SLUICE_FLOAT64: return !VALUES(column, float64).ptr[row].is_some;
    case SLUICE_UTF8: return !VALUES(column, utf8).ptr[row].is_some;
    case SLUICE_DECIMAL: return !VALUES(column, decimal).ptr[row].is_some;
    case SLUICE_TEXT: return !VALUES(column, text).ptr[row].is_some;
    case SLUICE_BINARY: return !VALUES(column, binary).ptr[row].is_some;
  }
  return true;
}

bool sluice_get_bytes(const sluice_column *column, uint32_t row, const char **data, size_t *len) {
  transform_option_string_t *text = NULL;
  switch (sluice_column_kind(column)) {
    case SLUICE_UTF8: text = &VALUES(column, utf8).ptr[row]; break;
    case SLUICE_DECIMAL: text = &VALUES(column, decimal).ptr[row]; break;
    case SLUICE_TEXT: text = &VALUES(column, text).ptr[row]; break;
    case SLUICE_BINARY: {
      transform_option_list_u8_t *bytes = &VALUES(column, binary).ptr[row];
      if (!bytes->is_some) return false;
      *data = (const char *)bytes->val.ptr;
      *len = bytes->val.len;
      return true;
    }
    default: return false;
  }
  if (!text->is_some) return false;
  *data = (const char *)text->val.ptr;
  *len = text->val.len;
  return true;
}

bool sluice_get_int(const sluice_column *column, uint32_t row, int64_t *value) {
  transform_option_s32_t *small = NULL;
  transform_option_s64_t *large = NULL;
  switch (sluice_column_kind(column)) {
    case SLUICE_INT32: small = &VALUES(column, int32).ptr[row]; break;
    case SLUICE_DATE: small = &VALUES(column, date).ptr[row]; break;
    case SLUICE_INT64: large = &VALUES(column, int64).ptr[row]; break;
    case SLUICE_TIMESTAMP: large = &VALUES(column, timestamp).ptr[row]; break;
    case SLUICE_TIMESTAMP_NTZ: large = &VALUES(column, timestamp_ntz).ptr[row]; break;
    default: return false;
  }
  if (small) {
    if (!small->is_some) return false;
    *value = small->val;
  } else {
    if (!large->is_some) return false;
    *value = large->val;
  }
  return true;
}

bool sluice_get_double(const sluice_column *column, uint32_t row, double *value) {
  if (sluice_column_kind(column) == SLUICE_FLOAT32) {
    transform_option_f32_t *v = &VALUES(column, float32).ptr[row];
    if (!v->is_some) return false;
    *value = v->val;
    return true;
  }
  if (sluice_column_kind(column) == SLUICE_FLOAT64) {
    transform_option_f64_t *v = &VALUES(column, float64).ptr[row];
    if (!v->is_some) return false;
    *value = v->val;
    return true;
  }
  return false;
}

bool sluice_get_bool(const sluice_column *column, uint32_t row, bool *value) {
  if (sluice_column_kind(column) != SLUICE_BOOLEAN) return false;
  transform_option_bool_t *v = &VALUES(column, boolean).ptr[row];
  if (!v->is_some) return false;
  *value = v->val;
  return true;
}

static void free_batch(sluice_batch *batch) {
  if (batch->have_types) sluice_transform_host_list_change_type_free(&batch->types);
  if (batch->have_versions) transform_list_s64_free(&batch->versions);
  if (batch->have_timestamps) transform_list_s64_free(&batch->timestamps);
  if (batch->have_columns) {
    for (size_t i = 0; i < batch->columns.len; i++) free(batch->wrapped[i].name);
    free(batch->wrapped);
    sluice_transform_host_list_column_free(&batch->columns);
  }
  for (size_t i = 0; i < COUNT(batch->named, struct sluice_column *); i++) {
    struct sluice_column *column = AT(batch->named, struct sluice_column *)[i];
    free(column->name);
    sluice_transform_host_list_column_free(&column->owned);
    free(column);
  }
  free(batch->named.data);
  for (size_t i = 0; i < COUNT(batch->selections, transform_list_u32_t); i++) {
    transform_list_u32_free(&AT(batch->selections, transform_list_u32_t)[i]);
  }
  free(batch->selections.data);
}

/* ---- Output ----------------------------------------------------------------- */

struct sluice_output {
  sluice_transform_host_borrow_batch_t handle;
  sluice_packer packer;
  /* The framing of the packed records (copies): records cross in runs of one. */
  bool framed, has_key_schema, has_value_schema;
  sluice_schema key_schema, value_schema;
  /* The caller's framing, so the same one is recognised without comparing texts. */
  sluice_framing given;
  sluice_schema given_key, given_value;
};

static void free_schema(sluice_schema *schema) {
  free((char *)schema->text);
  free((char *)schema->name);
  memset(schema, 0, sizeof *schema);
}

/* Forgets the current run's framing. */
static void unframe(sluice_output *out) {
  free_schema(&out->key_schema);
  free_schema(&out->value_schema);
  out->framed = out->has_key_schema = out->has_value_schema = false;
}

static bool same_text(const char *a, const char *b) {
  return a == b || (a && b && strcmp(a, b) == 0);
}

static bool same_schema(bool has, const sluice_schema *kept, const sluice_schema *given) {
  if (!given) return !has;
  return has && kept->kind == given->kind && same_text(kept->text, given->text) &&
         same_text(kept->name, given->name);
}

static bool same_pointers(const sluice_schema *kept_given, const sluice_schema *given) {
  if (!given) return false;
  return kept_given->kind == given->kind && kept_given->text == given->text &&
         kept_given->name == given->name;
}

static void keep_schema(sluice_schema *kept, const sluice_schema *given) {
  kept->kind = given->kind;
  /* A NULL text is sent empty: the host refuses it as a schema that does not parse. */
  const char *text = given->text ? given->text : "";
  kept->text = sluice_copy_text((const uint8_t *)text, strlen(text));
  kept->name = given->name ? sluice_copy_text((const uint8_t *)given->name, strlen(given->name)) : NULL;
}

static sluice_transform_types_option_own_schema_t wit_schema(bool has, const sluice_schema *schema) {
  sluice_transform_types_option_own_schema_t option;
  memset(&option, 0, sizeof option);
  if (!has) return option;
  option.is_some = true;
  option.val.kind = (sluice_transform_types_schema_kind_t)schema->kind;
  option.val.text = wit_string(schema->text);
  if (schema->name) {
    option.val.name.is_some = true;
    option.val.name.val = wit_string(schema->name);
  }
  return option;
}

static void flush(sluice_output *out);

void sluice_emit(sluice_output *out, uint32_t row, const sluice_record *record) {
  if (out->framed) {
    flush(out);
    unframe(out);
  }
  sluice_packer_add(&out->packer, row, record);
}

void sluice_emit_framed(sluice_output *out, uint32_t row, const sluice_framing *framing,
                        const sluice_record *record) {
  /* The caller's own framing (pointers and texts unchanged) first: no text compared. */
  bool same =
      out->framed &&
      ((framing->key == out->given.key && framing->value == out->given.value &&
        (!framing->key || same_pointers(&out->given_key, framing->key)) &&
        (!framing->value || same_pointers(&out->given_value, framing->value))) ||
       (same_schema(out->has_key_schema, &out->key_schema, framing->key) &&
        same_schema(out->has_value_schema, &out->value_schema, framing->value)));
  out->given = *framing;
  if (framing->key) out->given_key = *framing->key;
  if (framing->value) out->given_value = *framing->value;
  if (!same) {
    flush(out);
    unframe(out);
    out->framed = true;
    out->has_key_schema = framing->key != NULL;
    out->has_value_schema = framing->value != NULL;
    if (framing->key) keep_schema(&out->key_schema, framing->key);
    if (framing->value) keep_schema(&out->value_schema, framing->value);
  }
  sluice_packer_add(&out->packer, row, record);
}

void sluice_emit_kv(sluice_output *out, uint32_t row, const void *key, int32_t key_len,
                    const void *value, int32_t value_len) {
  sluice_record record = {.key = key, .key_len = key_len, .value = value, .value_len = value_len};
  sluice_emit(out, row, &record);
}

static transform_list_u32_t u32s(bytes_t *v) {
  transform_list_u32_t list = {(uint32_t *)v->data, COUNT(*v, uint32_t)};
  return list;
}

static transform_list_s32_t s32s(bytes_t *v) {
  transform_list_s32_t list = {(int32_t *)v->data, COUNT(*v, int32_t)};
  return list;
}

static transform_list_string_t strings(bytes_t *names) {
  size_t count = COUNT(*names, char *);
  transform_list_string_t list = {calloc(count + 1, sizeof(transform_string_t)), count};
  for (size_t i = 0; i < count; i++) list.ptr[i] = wit_string(AT(*names, char *)[i]);
  return list;
}

/* Sends the records emitted so far to the host, in one call. */
static void flush(sluice_output *out) {
  sluice_packer *p = &out->packer;
  if (p->source_rows.len == 0) return;
  sluice_transform_host_packed_records_t packed = {
      .data = {p->data.data, p->data.len},
      .source_rows = u32s(&p->source_rows),
      .key_lengths = s32s(&p->key_lengths),
      .value_lengths = s32s(&p->value_lengths),
      .topics = strings(&p->topics),
      .topic_indexes = u32s(&p->topic_indexes),
      .partitions = s32s(&p->partitions),
      .header_names = strings(&p->header_names),
      .header_counts = u32s(&p->header_counts),
      .header_name_indexes = u32s(&p->header_name_indexes),
      .header_value_lengths = u32s(&p->header_value_lengths),
  };
  if (out->framed) {
    sluice_transform_host_framing_t framing = {
        .key = wit_schema(out->has_key_schema, &out->key_schema),
        .value = wit_schema(out->has_value_schema, &out->value_schema),
    };
    sluice_transform_host_method_batch_emit_framed(out->handle, &packed, &framing);
  } else {
    sluice_transform_host_method_batch_emit_packed(out->handle, &packed);
  }
  free(packed.topics.ptr);
  free(packed.header_names.ptr);
  sluice_packer_clear(p);
}

void sluice_reject(sluice_output *out, uint32_t row, const char *message) {
  flush(out);
  transform_string_t text = wit_string(message);
  sluice_transform_host_method_batch_reject(out->handle, row, &text);
}

static void free_output(sluice_output *out) {
  unframe(out);
  sluice_packer_free(&out->packer);
}

/* ---- Host helpers ----------------------------------------------------------- */

sluice_rows_t sluice_select_change_types(sluice_batch *batch, const sluice_change_type *types,
                                         size_t count, const sluice_rows_t *within) {
  sluice_transform_host_change_type_t wit_types[4];
  sluice_transform_host_list_change_type_t list = {wit_types, 0};
  for (size_t i = 0; i < count && i < 4; i++) wit_types[list.len++] = (uint8_t)types[i];
  transform_list_u32_t within_list = {within ? (uint32_t *)within->rows : NULL, within ? within->len : 0};
  transform_list_u32_t selected;
  sluice_transform_host_method_batch_select_change_types(batch->handle, &list,
                                                         within ? &within_list : NULL, &selected);
  PUSH(&batch->selections, transform_list_u32_t, selected);
  sluice_rows_t rows = {selected.ptr, selected.len};
  return rows;
}

enum { FIELD_COLUMN, FIELD_SUBSTRING, FIELD_CONSTANT, FIELD_CHANGE_TYPE, FIELD_COMMIT_VERSION, FIELD_COMMIT_TIMESTAMP };
enum { CONSTANT_NULL, CONSTANT_BOOLEAN, CONSTANT_INTEGER, CONSTANT_FLOAT, CONSTANT_TEXT };

sluice_field sluice_field_column(const char *column) {
  sluice_field f = {.kind = FIELD_COLUMN, .column = column};
  return f;
}
sluice_field sluice_field_substring(const char *column, uint32_t pos, uint32_t len) {
  sluice_field f = {.kind = FIELD_SUBSTRING, .column = column, .pos = pos, .len = len};
  return f;
}
sluice_field sluice_field_text(const char *text) {
  sluice_field f = {.kind = FIELD_CONSTANT, .constant_kind = CONSTANT_TEXT, .column = text};
  return f;
}
sluice_field sluice_field_boolean(bool value) {
  sluice_field f = {.kind = FIELD_CONSTANT, .constant_kind = CONSTANT_BOOLEAN, .integer = value};
  return f;
}
sluice_field sluice_field_integer(int64_t value) {
  sluice_field f = {.kind = FIELD_CONSTANT, .constant_kind = CONSTANT_INTEGER, .integer = value};
  return f;
}
sluice_field sluice_field_float(double value) {
  sluice_field f = {.kind = FIELD_CONSTANT, .constant_kind = CONSTANT_FLOAT, .number = value};
  return f;
}
sluice_field sluice_field_null(void) {
  sluice_field f = {.kind = FIELD_CONSTANT, .constant_kind = CONSTANT_NULL};
  return f;
}
sluice_field sluice_field_change_type(void) {
  sluice_field f = {.kind = FIELD_CHANGE_TYPE};
  return f;
}
sluice_field sluice_field_commit_version(void) {
  sluice_field f = {.kind = FIELD_COMMIT_VERSION};
  return f;
}
sluice_field sluice_field_commit_timestamp(void) {
  sluice_field f = {.kind = FIELD_COMMIT_TIMESTAMP};
  return f;
}

/* The contract's form of a field; strings point into the caller's memory. */
static sluice_transform_types_field_value_t wit_field(const sluice_field *f) {
  sluice_transform_types_field_value_t out;
  memset(&out, 0, sizeof out);
  out.tag = f->kind;
  switch (f->kind) {
    case FIELD_COLUMN: out.val.column = wit_string(f->column); break;
    case FIELD_SUBSTRING:
      out.val.substring.column = wit_string(f->column);
      out.val.substring.pos = f->pos;
      out.val.substring.len = f->len;
      break;
    case FIELD_CONSTANT:
      out.val.constant.tag = f->constant_kind;
      if (f->constant_kind == CONSTANT_BOOLEAN) out.val.constant.val.boolean = f->integer != 0;
      if (f->constant_kind == CONSTANT_INTEGER) out.val.constant.val.integer = f->integer;
      if (f->constant_kind == CONSTANT_FLOAT) out.val.constant.val.float_ = f->number;
      if (f->constant_kind == CONSTANT_TEXT) out.val.constant.val.text = wit_string(f->column);
      break;
  }
  return out;
}

int sluice_encode(sluice_output *out, const sluice_encode_spec *spec) {
  sluice_transform_types_json_field_t *fields = calloc(spec->field_count + 1, sizeof *fields);
  for (size_t i = 0; i < spec->field_count; i++) {
    fields[i].name = wit_string(spec->fields[i].name);
    fields[i].value = wit_field(&spec->fields[i].value);
  }
  sluice_transform_types_tuple2_string_field_value_t *headers =
      calloc(spec->header_count + 1, sizeof *headers);
  for (size_t i = 0; i < spec->header_count; i++) {
    headers[i].f0 = wit_string(spec->headers[i].name);
    headers[i].f1 = wit_field(&spec->headers[i].value);
  }
  sluice_transform_host_encode_spec_t wit;
  memset(&wit, 0, sizeof wit);
  wit.rows.ptr = (uint32_t *)spec->rows.rows;
  wit.rows.len = spec->rows.len;
  if (spec->key) {
    wit.key.is_some = true;
    wit.key.val = wit_field(spec->key);
  }
  switch (spec->value) {
    case SLUICE_VALUE_JSON: wit.value.tag = SLUICE_TRANSFORM_TYPES_VALUE_ENCODING_JSON; break;
    case SLUICE_VALUE_JSON_ROW: wit.value.tag = SLUICE_TRANSFORM_TYPES_VALUE_ENCODING_JSON_ROW; break;
    case SLUICE_VALUE_TOMBSTONE: wit.value.tag = SLUICE_TRANSFORM_TYPES_VALUE_ENCODING_TOMBSTONE; break;
  }
  if (spec->value == SLUICE_VALUE_JSON) {
    wit.value.val.json.ptr = fields;
    wit.value.val.json.len = spec->field_count;
  }
  wit.delete_as_tombstone = spec->delete_as_tombstone;
  if (spec->topic) {
    wit.topic.is_some = true;
    wit.topic.val = wit_string(spec->topic);
  }
  wit.headers.ptr = headers;
  wit.headers.len = spec->header_count;

  flush(out);
  uint32_t made;
  transform_string_t err;
  bool ok = sluice_transform_host_method_batch_emit_encoded(out->handle, &wit, &made, &err);
  free(fields);
  free(headers);
  if (ok) return SLUICE_OK;
  sluice_fail_batch("%.*s", (int)err.len, (const char *)err.ptr);
  transform_string_free(&err);
  return SLUICE_ERROR;
}

int sluice_select_where(sluice_batch *batch, const char *column, sluice_comparison op,
                        sluice_field constant, const sluice_rows_t *within, sluice_rows_t *rows) {
  if (constant.kind != FIELD_CONSTANT) {
    return sluice_fail_batch("sluice_select_where compares with a constant: use sluice_field_text, "
                             "_integer, _float, _boolean or _null.");
  }
  sluice_transform_host_predicate_t predicate;
  memset(&predicate, 0, sizeof predicate);
  predicate.column = wit_string(column);
  predicate.op = (sluice_transform_types_comparison_t)op;
  predicate.value = wit_field(&constant).val.constant;
  transform_list_u32_t within_list = {within ? (uint32_t *)within->rows : NULL, within ? within->len : 0};
  transform_list_u32_t selected;
  transform_string_t err;
  if (!sluice_transform_host_method_batch_select_where(batch->handle, &predicate,
                                                       within ? &within_list : NULL, &selected, &err)) {
    sluice_fail_batch("%.*s", (int)err.len, (const char *)err.ptr);
    transform_string_free(&err);
    return SLUICE_ERROR;
  }
  PUSH(&batch->selections, transform_list_u32_t, selected);
  rows->rows = selected.ptr;
  rows->len = selected.len;
  return SLUICE_OK;
}

/* ---- The transform export ----------------------------------------------------- */

bool exports_sluice_transform_transformer_transform(
    exports_sluice_transform_transformer_borrow_batch_t handle,
    exports_sluice_transform_transformer_transform_error_t *err) {
  sluice_batch batch;
  memset(&batch, 0, sizeof batch);
  batch.handle = handle;
  batch.rows = sluice_transform_host_method_batch_num_rows(handle);
  sluice_output out;
  memset(&out, 0, sizeof out);
  out.handle = handle;

  clear_error();
  int result = sluice_transform(&batch, &out);
  if (result == SLUICE_OK) flush(&out);
  free_output(&out);
  free_batch(&batch);
  if (result == SLUICE_OK) return true;
  if (error_row >= 0) {
    err->tag = SLUICE_TRANSFORM_TYPES_TRANSFORM_ERROR_ROW;
    err->val.row.row = (uint32_t)error_row;
    err->val.row.message = take_error("The row failed without saying why.");
  } else {
    err->tag = SLUICE_TRANSFORM_TYPES_TRANSFORM_ERROR_BATCH;
    err->val.batch = take_error("sluice_transform failed without saying why.");
  }
  return false;
}
