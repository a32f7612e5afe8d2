/*
 * {{name}}: a Sluice transform.
 *
 * Emits inserts and update post-images as JSON objects of the row, deletes as
 * tombstones, keyed by the column the `key` parameter names (keyless when it is not
 * set), with the change type in a `change_type` header. Update pre-images are
 * dropped. The host selects and encodes the records natively (sluice_encode); see
 * the SDK's README for reading rows yourself.
 */
#include "sluice.h"

static const char *key_column;

int sluice_init(const sluice_params *params) {
  key_column = sluice_param(params, "key", NULL);
  return SLUICE_OK;
}

int sluice_transform(sluice_batch *batch, sluice_output *out) {
  const sluice_change_type wanted[] = {SLUICE_INSERT, SLUICE_UPDATE_POSTIMAGE, SLUICE_DELETE};
  const sluice_field key = sluice_field_column(key_column ? key_column : "");
  const sluice_named_field headers[] = {{"change_type", sluice_field_change_type()}};
  sluice_encode_spec spec = {
      .rows = sluice_select_change_types(batch, wanted, 3, NULL),
      .key = key_column ? &key : NULL,
      .value = SLUICE_VALUE_JSON_ROW,
      .delete_as_tombstone = true,
      .headers = headers,
      .header_count = 1,
  };
  return sluice_encode(out, &spec);
}
