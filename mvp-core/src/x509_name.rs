//! The one thing this crate reads from a certificate's subject: its common name.
//!
//! `rustls-webpki` (already compiled by rustls) parses the certificate and hands out the subject's
//! DER bytes; this module walks the X.501 `Name` in it. The walk only slices with `split_first` and
//! `split_at_checked`, so malformed or truncated input yields `None`, never a panic or an
//! out-of-bounds read.

/// The contents of the DER `OBJECT IDENTIFIER` 2.5.4.3 (id-at-commonName).
const COMMON_NAME_OID: &[u8] = &[0x55, 0x04, 0x03];

/// DER universal tags of the string types Go's `crypto/x509` decodes in a name.
mod tag {
    pub(super) const OBJECT_IDENTIFIER: u8 = 0x06;
    pub(super) const SEQUENCE: u8 = 0x30;
    pub(super) const SET: u8 = 0x31;
    pub(super) const UTF8_STRING: u8 = 0x0c;
    pub(super) const NUMERIC_STRING: u8 = 0x12;
    pub(super) const PRINTABLE_STRING: u8 = 0x13;
    pub(super) const T61_STRING: u8 = 0x14;
    pub(super) const IA5_STRING: u8 = 0x16;
    pub(super) const BMP_STRING: u8 = 0x1e;
}

/// Splits one DER element off the front of `input`: `(tag, contents, rest)`.
///
/// Only single-byte tags and definite lengths of at most four length bytes are accepted, which is
/// all a certificate name needs.
fn element(input: &[u8]) -> Option<(u8, &[u8], &[u8])> {
    let (&tag, rest) = input.split_first()?;
    if tag & 0x1f == 0x1f {
        return None; // high-tag-number form
    }
    let (&first, rest) = rest.split_first()?;
    let (len, rest) = if first < 0x80 {
        (usize::from(first), rest)
    } else {
        let count = usize::from(first & 0x7f);
        if count == 0 || count > 4 {
            return None; // indefinite length (not DER), or longer than any certificate
        }
        let (bytes, rest) = rest.split_at_checked(count)?;
        let len = bytes.iter().try_fold(0usize, |len, &b| {
            len.checked_mul(256)?.checked_add(usize::from(b))
        })?;
        (len, rest)
    };
    let (contents, rest) = rest.split_at_checked(len)?;
    Some((tag, contents, rest))
}

/// The elements of `input`, which must be a whole number of elements; `None` on malformed input.
fn elements(mut input: &[u8]) -> Option<Vec<(u8, &[u8])>> {
    let mut out = Vec::new();
    while !input.is_empty() {
        let (tag, contents, rest) = element(input)?;
        out.push((tag, contents));
        input = rest;
    }
    Some(out)
}

/// The text of a directory string, for the string types Go decodes (`parseASN1String`); `None` for
/// other types or invalid contents.
fn string_value(tag: u8, contents: &[u8]) -> Option<String> {
    match tag {
        tag::UTF8_STRING
        | tag::NUMERIC_STRING
        | tag::PRINTABLE_STRING
        | tag::T61_STRING
        | tag::IA5_STRING => std::str::from_utf8(contents).ok().map(str::to_owned),
        tag::BMP_STRING => {
            let (units, odd) = contents.as_chunks::<2>();
            if !odd.is_empty() {
                return None;
            }
            char::decode_utf16(units.iter().map(|&u| u16::from_be_bytes(u)))
                .collect::<Result<String, _>>()
                .ok()
        }
        _ => None,
    }
}

/// The common name in `subject`, the contents of a certificate's subject `Name` (the
/// `RDNSequence` without its outer `SEQUENCE` header, as `webpki::Cert::subject` returns it).
///
/// Like Go's `pkix.Name`, the last CN attribute wins; CN attributes of a string type Go does not
/// decode are skipped; no CN at all is the empty string. `None` when `subject` is malformed.
pub(crate) fn common_name(subject: &[u8]) -> Option<String> {
    let mut common_name = String::new();
    for (tag, rdn) in elements(subject)? {
        if tag != tag::SET {
            return None;
        }
        for (tag, attribute) in elements(rdn)? {
            if tag != tag::SEQUENCE {
                return None;
            }
            let (oid_tag, oid, rest) = element(attribute)?;
            let (value_tag, value, rest) = element(rest)?;
            if oid_tag != tag::OBJECT_IDENTIFIER || !rest.is_empty() {
                return None;
            }
            if oid == COMMON_NAME_OID
                && let Some(text) = string_value(value_tag, value)
            {
                common_name = text;
            }
        }
    }
    Some(common_name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// One DER element with a short- or long-form length.
    fn der(tag: u8, contents: &[u8]) -> Vec<u8> {
        let mut out = vec![tag];
        match contents.len() {
            n @ 0..0x80 => out.push(n as u8),
            n @ 0x80..0x100 => out.extend([0x81, n as u8]),
            n => out.extend([0x82, (n >> 8) as u8, n as u8]),
        }
        out.extend_from_slice(contents);
        out
    }

    /// An attribute (OID contents `oid`, value of string type `tag`) as one relative name.
    fn rdn(oid: &[u8], tag: u8, value: &[u8]) -> Vec<u8> {
        let mut attribute = der(0x06, oid);
        attribute.extend(der(tag, value));
        der(tag::SET, &der(tag::SEQUENCE, &attribute))
    }

    const CN: &[u8] = &[0x55, 0x04, 0x03];
    const O: &[u8] = &[0x55, 0x04, 0x0a];

    #[test]
    fn reads_the_common_name_among_other_attributes() {
        let subject = [
            rdn(O, tag::PRINTABLE_STRING, b"system:masters"),
            rdn(CN, tag::UTF8_STRING, b"front-proxy-client"),
        ]
        .concat();
        assert_eq!(common_name(&subject).as_deref(), Some("front-proxy-client"));
    }

    #[test]
    fn the_last_common_name_wins_as_in_go() {
        let subject = [
            rdn(CN, tag::UTF8_STRING, b"first"),
            rdn(CN, tag::PRINTABLE_STRING, b"second"),
        ]
        .concat();
        assert_eq!(common_name(&subject).as_deref(), Some("second"));
    }

    #[test]
    fn a_multi_valued_relative_name_is_walked_whole() {
        let mut attributes = der(
            tag::SEQUENCE,
            &[der(0x06, O), der(tag::UTF8_STRING, b"org")].concat(),
        );
        attributes.extend(der(
            tag::SEQUENCE,
            &[der(0x06, CN), der(tag::IA5_STRING, b"multi")].concat(),
        ));
        let subject = der(tag::SET, &attributes);
        assert_eq!(common_name(&subject).as_deref(), Some("multi"));
    }

    #[test]
    fn no_common_name_is_the_empty_string() {
        assert_eq!(common_name(&[]).as_deref(), Some(""));
        let subject = rdn(O, tag::UTF8_STRING, b"only-an-org");
        assert_eq!(common_name(&subject).as_deref(), Some(""));
    }

    #[test]
    fn an_oid_that_merely_starts_like_cn_is_not_cn() {
        let subject = rdn(&[0x55, 0x04, 0x03, 0x01], tag::UTF8_STRING, b"not-cn");
        assert_eq!(common_name(&subject).as_deref(), Some(""));
    }

    #[test]
    fn bmp_strings_are_decoded_and_undecodable_values_skipped() {
        let bmp: Vec<u8> = "proxy\u{e9}".encode_utf16().flat_map(u16::to_be_bytes).collect();
        assert_eq!(
            common_name(&rdn(CN, tag::BMP_STRING, &bmp)).as_deref(),
            Some("proxy\u{e9}")
        );
        // An odd-length BMPString, invalid UTF-8 and an OCTET STRING are skipped, not fatal.
        for (tag, value) in [
            (tag::BMP_STRING, &b"abc"[..]),
            (tag::UTF8_STRING, &[0xff][..]),
            (0x04, b"raw"),
        ] {
            let subject = [rdn(CN, tag::UTF8_STRING, b"kept"), rdn(CN, tag, value)].concat();
            assert_eq!(common_name(&subject).as_deref(), Some("kept"), "tag {tag:#x}");
        }
    }

    #[test]
    fn long_form_lengths_are_read() {
        let long = "x".repeat(300);
        let subject = rdn(CN, tag::UTF8_STRING, long.as_bytes());
        assert_eq!(subject[1], 0x82, "the test should exercise a two-byte length");
        assert_eq!(common_name(&subject), Some(long));
    }

    #[test]
    fn every_truncation_of_a_valid_name_is_rejected() {
        let subject = [
            rdn(O, tag::UTF8_STRING, b"system:masters"),
            rdn(CN, tag::UTF8_STRING, &[b'y'; 200]),
        ]
        .concat();
        assert!(common_name(&subject).is_some());
        for len in 1..subject.len() {
            // A cut at an element boundary is a shorter valid name; any other cut is malformed.
            if len == rdn(O, tag::UTF8_STRING, b"system:masters").len() {
                continue;
            }
            assert_eq!(common_name(&subject[..len]), None, "prefix of {len} bytes");
        }
    }

    #[test]
    fn malformed_structure_is_rejected() {
        let attribute = [der(0x06, CN), der(tag::UTF8_STRING, b"a")].concat();
        let cases: [Vec<u8>; 6] = [
            der(tag::SEQUENCE, &der(tag::SEQUENCE, &attribute)), // RDN not a SET
            der(tag::SET, &der(tag::SET, &attribute)),           // attribute not a SEQUENCE
            der(tag::SET, &der(tag::SEQUENCE, &der(0x06, CN))),  // no value
            der(
                tag::SET,
                &der(tag::SEQUENCE, &[attribute.clone(), der(0x05, &[])].concat()),
            ), // extra
            vec![tag::SET, 0x80, 0x00, 0x00],                    // indefinite length
            vec![tag::SET, 0x85, 0x01, 0x00, 0x00, 0x00, 0x00],  // five length bytes
        ];
        for (i, case) in cases.iter().enumerate() {
            assert_eq!(common_name(case), None, "case {i}");
        }
        assert_eq!(common_name(&[0x1f, 0x01, 0x00]), None, "high-tag-number form");
    }

    proptest! {
        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..256)) {
            let _ = common_name(&bytes);
        }

        #[test]
        fn mutated_names_never_panic(index in 0usize..64, byte in any::<u8>()) {
            let mut subject = [rdn(O, tag::UTF8_STRING, b"group"), rdn(CN, tag::UTF8_STRING, b"name")].concat();
            let i = index % subject.len();
            subject[i] = byte;
            let _ = common_name(&subject);
        }
    }
}
