/*
 * gold-deals in C: CRM deal changes from the bronze table to the gold topic, as the
 * `deal_gold1` Delta Live Tables query shapes them. Makes the same records, byte for
 * byte, as the Rust `gold-deals`.
 *
 * The module only describes the records (sluice_encode); the host selects and
 * encodes them natively.
 *
 * Parameter `change_types` (default `insert,update_postimage,delete`): the change
 * types to emit. Parameter `change_type_header`: when set, every record carries the
 * row's change type in a header of that name.
 */
#include <string.h>

#include "sluice.h"

static sluice_change_type emit[4];
static size_t emit_count;
static const char *change_type_header;

int sluice_init(const sluice_params *params) {
  change_type_header = sluice_param(params, "change_type_header", NULL);
  const char *names = sluice_param(params, "change_types", "insert,update_postimage,delete");
  emit_count = 0;
  for (const char *name = names;;) {
    size_t len = strcspn(name, ",");
    if (emit_count == 4 || !sluice_change_type_parse(name, len, &emit[emit_count])) {
      return sluice_fail_init(
          "Parameter change_types has an unknown change type `%.*s`; use insert, "
          "update_preimage, update_postimage or delete.",
          (int)len, name);
    }
    emit_count++;
    if (name[len] == 0) break;
    name += len + 1;
  }
  return SLUICE_OK;
}

int sluice_transform(sluice_batch *batch, sluice_output *out) {
  /* Spark's substring(x, 11, 24): the hex inside ObjectId('...'). */
  const sluice_named_field gold[] = {
      {"documentId", sluice_field_column("documentId")},
      {"eventTimestamp", sluice_field_column("eventTimestamp")},
      {"owner_id", sluice_field_substring("fullDocument.owner_id", 11, 24)},
      {"owner_type", sluice_field_column("fullDocument.owner_type")},
      {"account_id", sluice_field_substring("fullDocument.account_id", 11, 24)},
      {"manager_account_id", sluice_field_substring("fullDocument.manager_account_id", 11, 24)},
      {"hubspot_deal_id", sluice_field_column("fullDocument.hubspot_deal_id")},
      {"stage", sluice_field_column("fullDocument.stage")},
      {"status", sluice_field_column("fullDocument.status")},
      {"title", sluice_field_column("fullDocument.title")},
  };
  const sluice_field key = sluice_field_column("documentId");
  const sluice_named_field headers[] = {{change_type_header, sluice_field_change_type()}};
  sluice_encode_spec spec = {
      .rows = sluice_select_change_types(batch, emit, emit_count, NULL),
      .key = &key,
      .value = SLUICE_VALUE_JSON,
      .fields = gold,
      .field_count = sizeof gold / sizeof gold[0],
      .delete_as_tombstone = true,
      .headers = headers,
      .header_count = change_type_header ? 1 : 0,
  };
  return sluice_encode(out, &spec);
}
