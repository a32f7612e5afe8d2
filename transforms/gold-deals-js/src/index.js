// gold-deals in JavaScript: CRM deal changes from the bronze table to the gold topic,
// as the `deal_gold1` Delta Live Tables query shapes them. Makes the same records,
// byte for byte, as the Rust `gold-deals`.
//
// The module only describes the records (`out.encode`); the host selects and encodes
// them natively, so no value passes through JavaScript.
//
// Parameter `change_types` (default `insert,update_postimage,delete`): the change
// types to emit. Parameter `change_type_header`: when set, every record carries the
// row's change type in a header of that name.

import { CHANGE_TYPE, ChangeType, column, exportTransform, json, substring } from '@sluice/transform';

/** Spark's substring(name, 11, 24): the hex inside ObjectId('...'). */
const objectId = (name) => substring(name, 11, 24);

const GOLD = json({
  documentId: column('documentId'),
  eventTimestamp: column('eventTimestamp'),
  owner_id: objectId('fullDocument.owner_id'),
  owner_type: column('fullDocument.owner_type'),
  account_id: objectId('fullDocument.account_id'),
  manager_account_id: objectId('fullDocument.manager_account_id'),
  hubspot_deal_id: column('fullDocument.hubspot_deal_id'),
  stage: column('fullDocument.stage'),
  status: column('fullDocument.status'),
  title: column('fullDocument.title'),
});

class GoldDeals {
  init(params) {
    this.emit = params
      .get('change_types', 'insert,update_postimage,delete')
      .split(',')
      .map(ChangeType.parse);
    const header = params.get('change_type_header');
    this.headers = header ? { [header]: CHANGE_TYPE } : {};
  }

  transform(batch, out) {
    out.encode({
      rows: batch.selectChangeTypes(this.emit),
      key: column('documentId'),
      value: GOLD,
      deleteAsTombstone: true,
      headers: this.headers,
    });
  }
}

export const transformer = exportTransform(GoldDeals);
