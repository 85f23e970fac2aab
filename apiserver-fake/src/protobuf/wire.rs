//! Protobuf wire format: walking the `(field number, value)` pairs of one encoded message.
//!
//! Varints and keys are read with `prost::encoding`; this module adds bounds-checked slicing of
//! length-delimited values and rejects the (proto2 group) wire types Kubernetes never uses.

use prost::encoding::{WireType, decode_key, decode_varint};

/// One field value as it appears on the wire.
#[derive(Debug, Clone, Copy)]
pub(super) enum WireValue<'a> {
    /// Wire type 0.
    Varint(u64),
    /// Wire type 1.
    Fixed64(u64),
    /// Wire type 5 (no Kubernetes field has it, so its value is never needed).
    Fixed32,
    /// Wire type 2: strings, bytes, messages, map entries, packed scalars.
    Bytes(&'a [u8]),
}

impl WireValue<'_> {
    /// The wire type number, for error messages.
    pub(super) fn wire_type(&self) -> u8 {
        match self {
            WireValue::Varint(_) => 0,
            WireValue::Fixed64(_) => 1,
            WireValue::Bytes(_) => 2,
            WireValue::Fixed32 => 5,
        }
    }
}

/// Iterates over the fields of one encoded message; stops after the first error.
pub(super) struct Fields<'a> {
    buf: &'a [u8],
    failed: bool,
}

/// Splits an encoded message into its fields.
pub(super) fn fields(buf: &[u8]) -> Fields<'_> {
    Fields { buf, failed: false }
}

impl<'a> Fields<'a> {
    fn read(&mut self) -> Result<(u32, WireValue<'a>), String> {
        let (number, wire_type) = decode_key(&mut self.buf).map_err(|e| e.to_string())?;
        let value = match wire_type {
            WireType::Varint => WireValue::Varint(decode_varint(&mut self.buf).map_err(|e| e.to_string())?),
            WireType::SixtyFourBit => {
                let (head, rest) = self.buf.split_first_chunk::<8>().ok_or("unexpected EOF")?;
                self.buf = rest;
                WireValue::Fixed64(u64::from_le_bytes(*head))
            }
            WireType::ThirtyTwoBit => {
                let (_, rest) = self.buf.split_first_chunk::<4>().ok_or("unexpected EOF")?;
                self.buf = rest;
                WireValue::Fixed32
            }
            WireType::LengthDelimited => {
                let len = decode_varint(&mut self.buf).map_err(|e| e.to_string())?;
                let len = usize::try_from(len)
                    .ok()
                    .filter(|len| *len <= self.buf.len())
                    .ok_or("unexpected EOF")?;
                let (value, rest) = self.buf.split_at(len);
                self.buf = rest;
                WireValue::Bytes(value)
            }
            WireType::StartGroup | WireType::EndGroup => {
                return Err(format!("unsupported wire type {} (groups)", wire_type as u8));
            }
        };
        Ok((number, value))
    }
}

impl<'a> Iterator for Fields<'a> {
    type Item = Result<(u32, WireValue<'a>), String>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed || self.buf.is_empty() {
            return None;
        }
        let item = self.read();
        self.failed = item.is_err();
        Some(item)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prost::encoding::{encode_key, encode_varint};

    #[test]
    fn reads_every_wire_type_prost_writes() {
        let mut buf = Vec::new();
        encode_key(1, WireType::Varint, &mut buf);
        encode_varint(300, &mut buf);
        encode_key(2, WireType::LengthDelimited, &mut buf);
        encode_varint(2, &mut buf);
        buf.extend_from_slice(b"hi");
        encode_key(3, WireType::SixtyFourBit, &mut buf);
        buf.extend_from_slice(&1.5f64.to_le_bytes());
        encode_key(4, WireType::ThirtyTwoBit, &mut buf);
        buf.extend_from_slice(&7u32.to_le_bytes());
        let got: Vec<_> = fields(&buf).collect::<Result<_, _>>().unwrap();
        assert!(matches!(got[0], (1, WireValue::Varint(300))));
        assert!(matches!(got[1], (2, WireValue::Bytes(b"hi"))));
        assert!(matches!(got[2], (3, WireValue::Fixed64(v)) if f64::from_bits(v) == 1.5));
        assert!(matches!(got[3], (4, WireValue::Fixed32)));
        assert_eq!(got.len(), 4);
    }

    #[test]
    fn truncation_and_groups_are_errors_not_panics() {
        let mut buf = Vec::new();
        encode_key(2, WireType::LengthDelimited, &mut buf);
        encode_varint(10, &mut buf);
        buf.extend_from_slice(b"short");
        assert!(fields(&buf).any(|f| f.is_err()));
        let mut group = Vec::new();
        encode_key(1, WireType::StartGroup, &mut group);
        assert!(fields(&group).next().unwrap().unwrap_err().contains("groups"));
        for len in 0..buf.len() {
            let _ = fields(&buf[..len]).count();
        }
    }
}
