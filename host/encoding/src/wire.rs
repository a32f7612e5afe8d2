//! Avro's binary primitives. Confluent's Protobuf framing writes its message indexes
//! as Avro longs too, so they sit in a leaf that the Avro writers and it share.

/// Avro's `long`: zig-zag, then 7 bits a byte, low bits first.
pub(crate) fn write_long(out: &mut Vec<u8>, value: i64) {
    let mut n = ((value << 1) ^ (value >> 63)) as u64;
    while n >= 0x80 {
        out.push((n as u8) | 0x80);
        n >>= 7;
    }
    out.push(n as u8);
}

/// Avro's `bytes` and `string`: the length, then the bytes.
pub(crate) fn write_bytes(out: &mut Vec<u8>, bytes: &[u8]) {
    write_long(out, bytes.len() as i64);
    out.extend_from_slice(bytes);
}
