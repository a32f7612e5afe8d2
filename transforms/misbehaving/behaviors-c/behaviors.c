/*
 * A C module that breaks the host's limits on purpose, through the SDK, for the limit
 * tests. Parameter `behavior`: `loop` (never returns), `hog` (grows memory without
 * end), `where` (has the host select the rows whose `documentId` is the parameter
 * `id` and encode them as JSON) or `rows` (has the host encode every row, whole, in the
 * pipeline's encoding); anything else emits each row keyed by `documentId`, its change
 * type as value.
 */
#include <stdlib.h>
#include <string.h>

#include "sluice.h"

static const char *behavior;
static const char *id;
/* Blocks the hog keeps, chained so the compiler cannot drop the allocations. */
static void *volatile hoard;

int sluice_init(const sluice_params *params) {
  behavior = sluice_param(params, "behavior", "");
  id = sluice_param(params, "id", "");
  return SLUICE_OK;
}

int sluice_transform(sluice_batch *batch, sluice_output *out) {
  if (strcmp(behavior, "loop") == 0) {
    volatile uint64_t n = 0;
    for (;;) n++;
  }
  if (strcmp(behavior, "hog") == 0) {
    for (;;) {
      void **block = malloc(1 << 20);
      if (!block) return sluice_fail_batch("malloc failed");
      memset(block, 1, 1 << 20);
      *block = hoard;
      hoard = block;
    }
  }
  if (strcmp(behavior, "where") == 0) {
    sluice_rows_t rows;
    if (sluice_select_where(batch, "documentId", SLUICE_EQUAL, sluice_field_text(id), NULL, &rows) != SLUICE_OK) {
      return SLUICE_ERROR;
    }
    const sluice_field key = sluice_field_column("documentId");
    sluice_encode_spec spec = {.rows = rows, .key = &key};
    return sluice_encode(out, &spec);
  }
  if (strcmp(behavior, "rows") == 0) {
    static const sluice_change_type all[] = {SLUICE_INSERT, SLUICE_UPDATE_PREIMAGE, SLUICE_UPDATE_POSTIMAGE,
                                             SLUICE_DELETE};
    sluice_encode_spec spec = {.rows = sluice_select_change_types(batch, all, 4, NULL)};
    return sluice_encode(out, &spec);
  }
  static const char *names[] = {"insert", "update_preimage", "update_postimage", "delete"};
  const sluice_column *ids = sluice_column_named(batch, "documentId");
  if (!ids) return SLUICE_ERROR;
  for (uint32_t row = 0; row < sluice_rows(batch); row++) {
    const char *id;
    size_t len;
    if (!sluice_get_bytes(ids, row, &id, &len)) return sluice_fail_row(row, "The deal has no documentId.");
    const char *change = names[sluice_row_change_type(batch, row)];
    sluice_emit_kv(out, row, id, (int32_t)len, change, (int32_t)strlen(change));
  }
  return SLUICE_OK;
}
