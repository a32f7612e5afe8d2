/* Where the state helpers (state.c) keep the pipeline's keyed state: the host's state
 * interface in a module (state_host.c), a table in memory in the SDK's native tests.
 * Returned buffers are malloc'd and the caller's to free. */
#ifndef SLUICE_STATE_BACKEND_H
#define SLUICE_STATE_BACKEND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sluice.h"

bool state_backend_get(const uint8_t *key, size_t key_len, uint8_t **value, size_t *value_len);
void state_backend_get_many(const sluice_state_key *keys, size_t count, uint8_t **values,
                            size_t *value_lens);
void state_backend_put(const uint8_t *key, size_t key_len, const uint8_t *value, size_t value_len);
void state_backend_delete(const uint8_t *key, size_t key_len);
size_t state_backend_scan(const uint8_t *prefix, size_t prefix_len, const uint8_t *after,
                          size_t after_len, uint32_t limit, sluice_state_entry **entries);

#endif
