//! Eight bytes at a time: tests on a `u64` read from a byte slice, for the loops that skip the
//! plain stretches of a string before looking at single bytes (JSON and log escaping). Each
//! test may say yes when no byte matches (the caller then looks byte by byte, losing only
//! time) and never says no when one does.

/// Eight copies of a byte.
const fn splat(b: u8) -> u64 {
    u64::from_ne_bytes([b; 8])
}

const LOW_BITS: u64 = splat(0x01);
const HIGH_BITS: u64 = splat(0x80);

/// The 8 bytes of `bytes` from `at` as a word, when there are 8.
pub fn word_at(bytes: &[u8], at: usize) -> Option<u64> {
    let chunk: [u8; 8] = bytes.get(at..at.checked_add(8)?)?.try_into().ok()?;
    Some(u64::from_ne_bytes(chunk))
}

/// A byte of `word` is below `n` (`n` at most 0x80).
pub fn has_below(word: u64, n: u8) -> bool {
    word.wrapping_sub(splat(n)) & !word & HIGH_BITS != 0
}

/// A byte of `word` is `b`.
pub fn has_byte(word: u64, b: u8) -> bool {
    let x = word ^ splat(b);
    x.wrapping_sub(LOW_BITS) & !x & HIGH_BITS != 0
}

/// A byte of `word` is not ASCII.
pub fn has_high(word: u64) -> bool {
    word & HIGH_BITS != 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_test_finds_its_byte_at_every_position_and_is_exact_on_single_bytes() {
        for at in 0..8 {
            for b in 0..=255u8 {
                let mut bytes = *b"AAAAAAAA";
                bytes[at] = b;
                let w = word_at(&bytes, 0).expect("8 bytes");
                assert_eq!(has_below(w, 0x20), b < 0x20, "{b:#x} at {at}");
                assert_eq!(has_byte(w, b'\\'), b == b'\\', "{b:#x} at {at}");
                assert_eq!(has_byte(w, 0x7f), b == 0x7f, "{b:#x} at {at}");
                assert_eq!(has_high(w), b >= 0x80, "{b:#x} at {at}");
            }
        }
        assert_eq!(word_at(b"1234567", 0), None);
        assert_eq!(word_at(b"123456789", 2), None);
        assert_eq!(word_at(b"123456789", 1), Some(u64::from_ne_bytes(*b"23456789")));
    }
}
