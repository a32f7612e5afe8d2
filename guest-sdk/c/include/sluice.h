/*
 * The C SDK for Sluice transforms.
 *
 * A transform defines two functions, which the SDK calls:
 *
 *     int sluice_init(const sluice_params *params);
 *     int sluice_transform(sluice_batch *batch, sluice_output *out);
 *
 * Both return SLUICE_OK, or the result of sluice_fail_init, sluice_fail_row or
 * sluice_fail_batch. `sluice build` compiles the project's .c files with this SDK and
 * the contract's generated bindings, which the SDK hides.
 *
 * Memory: everything the SDK hands out (columns, strings, row selections) stays valid
 * until sluice_transform returns, and is freed by the SDK; keys, values and names
 * passed in are copied or used before the call returns.
 */
#ifndef SLUICE_H
#define SLUICE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/** Success. */
#define SLUICE_OK 0
/** Failure; the message was set by a sluice_fail_* call. */
#define SLUICE_ERROR 1

/** What happened to a row, as Delta's `_change_type` says. */
typedef enum {
  SLUICE_INSERT = 0,
  SLUICE_UPDATE_PREIMAGE = 1,
  SLUICE_UPDATE_POSTIMAGE = 2,
  SLUICE_DELETE = 3,
} sluice_change_type;

/** Parses a change type as Delta spells it (`update_postimage`); false if unknown. */
bool sluice_change_type_parse(const char *name, size_t len, sluice_change_type *out);

/* ---- Parameters ------------------------------------------------------------ */

/** The pipeline's `[transform.params]`. */
typedef struct sluice_params sluice_params;

/** A parameter's value (NUL-terminated), or `fallback` when it is not set. */
const char *sluice_param(const sluice_params *params, const char *name, const char *fallback);

/* ---- Batches, rows and columns ----------------------------------------------- */

/** One batch of change rows, in commit order. */
typedef struct sluice_batch sluice_batch;

/** A column's type, as the contract gives it. */
typedef enum {
  SLUICE_BOOLEAN = 0,
  SLUICE_INT32 = 1,
  SLUICE_INT64 = 2,
  SLUICE_FLOAT32 = 3,
  SLUICE_FLOAT64 = 4,
  SLUICE_UTF8 = 5,
  SLUICE_BINARY = 6,
  SLUICE_DATE = 7,          /* days since 1970-01-01 */
  SLUICE_TIMESTAMP = 8,     /* microseconds since 1970-01-01T00:00:00Z */
  SLUICE_TIMESTAMP_NTZ = 9, /* microseconds, no time zone */
  SLUICE_DECIMAL = 10,      /* exact text, such as 12.50 */
  SLUICE_TEXT = 11,         /* other types, rendered as text by the host */
} sluice_kind;

/** One data column of a batch: struct fields are columns named by dotted path. */
typedef struct sluice_column sluice_column;

/** Number of rows. Row indexes passed to the functions below must be less than this;
 * they are not checked. */
uint32_t sluice_rows(sluice_batch *batch);
/** The row's change type. */
sluice_change_type sluice_row_change_type(sluice_batch *batch, uint32_t row);
/** The Delta version that made the row's change. */
int64_t sluice_row_commit_version(sluice_batch *batch, uint32_t row);
/** When the row's change was committed: microseconds since the epoch (UTC). */
int64_t sluice_row_commit_timestamp(sluice_batch *batch, uint32_t row);

/** The column called `name`, or NULL (with a batch error ready to return) when the
 * table has none or the columns cannot be read: `if (!col) return SLUICE_ERROR;`. */
const sluice_column *sluice_column_named(sluice_batch *batch, const char *name);
/** How many data columns the batch has; 0 with a batch error ready to return when they
 * cannot be read (a table always has a data column). */
size_t sluice_column_count(sluice_batch *batch);
/** The i-th data column, or NULL when `index` is out of range or the columns cannot be
 * read. */
const sluice_column *sluice_column_at(sluice_batch *batch, size_t index);
/** A column's name (NUL-terminated) and type. */
const char *sluice_column_name(const sluice_column *column);
sluice_kind sluice_column_kind(const sluice_column *column);

/** Whether the row's value is null. */
bool sluice_is_null(const sluice_column *column, uint32_t row);
/** The value of a UTF8, DECIMAL, TEXT or BINARY column: false when null or another type. */
bool sluice_get_bytes(const sluice_column *column, uint32_t row, const char **data, size_t *len);
/** The value of an integer, DATE or TIMESTAMP column: false when null or another type. */
bool sluice_get_int(const sluice_column *column, uint32_t row, int64_t *value);
/** The value of a FLOAT32 or FLOAT64 column: false when null or another type. */
bool sluice_get_double(const sluice_column *column, uint32_t row, double *value);
/** The value of a BOOLEAN column: false when null or another type. */
bool sluice_get_bool(const sluice_column *column, uint32_t row, bool *value);

/* ---- Output ----------------------------------------------------------------- */

/** Where a transform puts its records, in order. */
typedef struct sluice_output sluice_output;

/** A Kafka record header. */
typedef struct {
  const char *name;
  const void *value;
  size_t len;
} sluice_header;

/** A record to emit. Zero-initialised fields take the defaults: `key` NULL is no key,
 * `value` NULL a tombstone, `topic` NULL the pipeline's topic, `has_partition` false
 * Kafka's partitioner. */
typedef struct {
  const void *key;
  int32_t key_len;
  const void *value;
  int32_t value_len;
  const char *topic;
  bool has_partition;
  int32_t partition;
  const sluice_header *headers;
  size_t header_count;
} sluice_record;

/** Emits `record`, made from batch row `row` (its bytes are copied). */
void sluice_emit(sluice_output *out, uint32_t row, const sluice_record *record);
/** Emits a record with only a key and a value (NULL for no key, or a tombstone). */
void sluice_emit_kv(sluice_output *out, uint32_t row, const void *key, int32_t key_len,
                    const void *value, int32_t value_len);
/** Marks a row as failed, with why; the transform carries on with the others. */
void sluice_reject(sluice_output *out, uint32_t row, const char *message);

/** The kind of a schema a module encodes its own keys or values with. */
typedef enum {
  SLUICE_SCHEMA_AVRO = 0,
  SLUICE_SCHEMA_JSON = 1,
  SLUICE_SCHEMA_PROTOBUF = 2,
} sluice_schema_kind;

/** A schema the module encoded keys or values with itself: Avro's JSON text, a JSON
 * Schema, or a `.proto` file. `name` (NULL for none) is the Protobuf message's full
 * name (the file's first when NULL), or for Avro and JSON Schema the record name for
 * record-name subjects when the schema names none. */
typedef struct {
  sluice_schema_kind kind;
  const char *text;
  const char *name;
} sluice_schema;

/** What sluice_emit_framed frames: NULL leaves keys or values as they are. */
typedef struct {
  const sluice_schema *key;
  const sluice_schema *value;
} sluice_framing;

/** Emits `record` (contract 1.1), whose key or value the module encoded with
 * `framing`'s schemas: the host registers them in the pipeline's schema registry,
 * checks the bytes decode with them and writes Confluent's wire format header before
 * them. `framing` is copied; a framing seen again (the same pointers) is recognised
 * without comparing texts, so point at a new text rather than rewriting one in place. */
void sluice_emit_framed(sluice_output *out, uint32_t row, const sluice_framing *framing,
                        const sluice_record *record);

/* ---- Host helpers: the host selects and encodes natively --------------------- */

/** Row indexes, valid until the transform returns. */
typedef struct {
  const uint32_t *rows;
  size_t len;
} sluice_rows_t;

/** Rows (of `within`, or of the batch when NULL) with one of these change types (at
 * most the four there are). */
sluice_rows_t sluice_select_change_types(sluice_batch *batch, const sluice_change_type *types,
                                         size_t count, const sluice_rows_t *within);

/** Where an encoded value comes from. Build one with the functions below. */
typedef struct {
  uint8_t kind;
  const char *column;
  uint32_t pos, len;
  uint8_t constant_kind;
  int64_t integer;
  double number;
} sluice_field;

/** A column's value, typed as in the table. */
sluice_field sluice_field_column(const char *column);
/** Spark's substring(column, pos, len): `len` characters from 1-based `pos`. */
sluice_field sluice_field_substring(const char *column, uint32_t pos, uint32_t len);
/** A constant string, integer, float, boolean or null. */
sluice_field sluice_field_text(const char *text);
sluice_field sluice_field_boolean(bool value);
sluice_field sluice_field_integer(int64_t value);
sluice_field sluice_field_float(double value);
sluice_field sluice_field_null(void);
/** The row's `_change_type`, `_commit_version` or `_commit_timestamp` (ISO-8601). */
sluice_field sluice_field_change_type(void);
sluice_field sluice_field_commit_version(void);
sluice_field sluice_field_commit_timestamp(void);

/** A named field of a JSON value or a header. */
typedef struct {
  const char *name;
  sluice_field value;
} sluice_named_field;

/** How encoded records get their values (zero, the default, is JSON_ROW). */
typedef enum {
  SLUICE_VALUE_JSON_ROW = 0, /* a JSON object of every data column, structs nested */
  SLUICE_VALUE_JSON = 1,     /* a JSON object of `fields`, nulls left out */
  SLUICE_VALUE_TOMBSTONE = 2,
} sluice_value_encoding;

/** Records the host makes, one per selected row, in row order. */
typedef struct {
  sluice_rows_t rows;
  const sluice_field *key; /* NULL: no key; else rendered as text */
  sluice_value_encoding value;
  const sluice_named_field *fields; /* for SLUICE_VALUE_JSON */
  size_t field_count;
  bool delete_as_tombstone;
  const char *topic; /* NULL: the pipeline's topic */
  const sluice_named_field *headers;
  size_t header_count;
} sluice_encode_spec;

/** Has the host make and emit the records. Returns SLUICE_OK, or SLUICE_ERROR with a
 * batch error ready to return (an unknown column, say). */
int sluice_encode(sluice_output *out, const sluice_encode_spec *spec);

/** How `sluice_select_where` compares a column's value with a constant. */
typedef enum {
  SLUICE_EQUAL = 0,
  SLUICE_NOT_EQUAL = 1,
  SLUICE_LESS = 2,
  SLUICE_LESS_OR_EQUAL = 3,
  SLUICE_GREATER = 4,
  SLUICE_GREATER_OR_EQUAL = 5,
  SLUICE_IS_NULL = 6,     /* the constant is ignored */
  SLUICE_IS_NOT_NULL = 7, /* the constant is ignored */
} sluice_comparison;

/** Rows (of `within`, or of the batch when NULL) where `column op constant` holds; the
 * constant is a sluice_field_text/integer/float/boolean/null. Returns SLUICE_OK, or
 * SLUICE_ERROR with a batch error ready to return (an unknown column, a constant of
 * the wrong type). */
int sluice_select_where(sluice_batch *batch, const char *column, sluice_comparison op,
                        sluice_field constant, const sluice_rows_t *within, sluice_rows_t *rows);

/* ---- Errors and logging ------------------------------------------------------ */

/* Keyed state (contract 1.2; the pipeline needs a [state] section): values by key,
 * kept across batches and committed exactly once with the batch's records. Keys and
 * values are bytes; text and integers are stored as UTF-8 text, as every SDK stores
 * them, so `sluice state` shows them and a module in another language reads them.
 * Values and entries returned are malloc'd: free them with free() and
 * sluice_state_entries_free. */
typedef struct {
  uint8_t *key;
  size_t key_len;
  uint8_t *value;
  size_t value_len;
} sluice_state_entry;

/* The value under key; false when there is none. */
bool sluice_state_get(const void *key, size_t key_len, uint8_t **value, size_t *value_len);
/* A key of sluice_state_get_many. */
typedef struct {
  const void *data;
  size_t len;
} sluice_state_key;
/* The values under count keys in one call to the host (cheaper than count gets):
 * values[i] is NULL, value_lens[i] 0, where keys[i] holds nothing. Free each value. */
void sluice_state_get_many(const sluice_state_key *keys, size_t count, uint8_t **values,
                           size_t *value_lens);
void sluice_state_put(const void *key, size_t key_len, const void *value, size_t value_len);
/* Removes key; removing an absent key does nothing. */
void sluice_state_delete(const void *key, size_t key_len);
/* Up to limit entries whose keys start with prefix, in byte order of their keys, after
 * `after` (NULL: from the first). Returns how many; fewer than limit means no more. */
size_t sluice_state_scan(const void *prefix, size_t prefix_len, const void *after, size_t after_len,
                         uint32_t limit, sluice_state_entry **entries);
void sluice_state_entries_free(sluice_state_entry *entries, size_t count);
/* The text under a text key (NUL-terminated, malloc'd); NULL when absent or not UTF-8. */
char *sluice_state_get_str(const char *key);
void sluice_state_put_str(const char *key, const char *value);
void sluice_state_delete_key(const char *key);
/* The integer under key (decimal text); false when absent or not one. */
bool sluice_state_get_int(const char *key, int64_t *value);
void sluice_state_put_int(const char *key, int64_t value);
/* Adds delta to the counter under key (absent counts as 0); returns the new value. A
 * counter that reaches 0 is removed. */
int64_t sluice_state_add(const char *key, int64_t delta);

/** Fails `sluice_init` with a message (printf-style); returns SLUICE_ERROR. */
int sluice_fail_init(const char *format, ...) __attribute__((format(printf, 1, 2)));
/** Fails one row (the batch's records are discarded); returns SLUICE_ERROR. */
int sluice_fail_row(uint32_t row, const char *format, ...) __attribute__((format(printf, 2, 3)));
/** Fails the whole batch; returns SLUICE_ERROR. */
int sluice_fail_batch(const char *format, ...) __attribute__((format(printf, 1, 2)));

/** Log levels for sluice_log. */
typedef enum { SLUICE_DEBUG = 1, SLUICE_INFO = 2, SLUICE_WARN = 3, SLUICE_LOG_ERROR = 4 } sluice_level;
/** Writes to the pipeline's log, attributed to the module (printf-style). */
void sluice_log(sluice_level level, const char *format, ...) __attribute__((format(printf, 2, 3)));

/* ---- What the transform defines ---------------------------------------------- */

/** Called once per instance with the pipeline's parameters. */
int sluice_init(const sluice_params *params);
/** Called once per batch. */
int sluice_transform(sluice_batch *batch, sluice_output *out);

#ifdef __cplusplus
}
#endif

#endif /* SLUICE_H */
