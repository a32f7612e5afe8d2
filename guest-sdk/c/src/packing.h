/*
 * Records in the contract's packed form (`packed-records`): one byte buffer and a few
 * lists, so a batch's records cross into the host in one call. The lists are what
 * crosses: the optional ones (topic indexes, partitions, header counts) stay empty
 * until a record sets them. Internal; it needs no
 * bindings, so guest-sdk/conformance runs it natively.
 */
#ifndef SLUICE_PACKING_H
#define SLUICE_PACKING_H

#include "lists.h"
#include "sluice.h"

typedef struct {
  bytes_t data, source_rows, key_lengths, value_lengths, topic_indexes, partitions;
  bytes_t header_counts, header_name_indexes, header_value_lengths;
  bytes_t topics, header_names; /* char * copies */
} sluice_packer;

/* Appends `record`, made from batch row `row`; its bytes and names are copied. */
void sluice_packer_add(sluice_packer *p, uint32_t row, const sluice_record *record);
/* Forgets every record, keeping the memory for the next ones. */
void sluice_packer_clear(sluice_packer *p);
/* Frees everything the packer holds. */
void sluice_packer_free(sluice_packer *p);

#endif
