//! Durations as messages print them, coarse (`37m`).

use std::fmt;
use std::time::Duration;

/// A duration as messages print it: whole seconds below 2 minutes, whole minutes below 2
/// hours, whole hours below 2 days, then whole days (rounded down): `45s`, `37m`, `5h`, `3d`.
/// Two ages that print the same compare equal.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Coarse {
    value: u64,
    unit: char,
}

/// `d` as a [`Coarse`] duration.
pub fn coarse(d: Duration) -> Coarse {
    let s = d.as_secs();
    let (value, unit) = match s {
        0..120 => (s, 's'),
        120..7200 => (s / 60, 'm'),
        7200..172_800 => (s / 3600, 'h'),
        _ => (s / 86_400, 'd'),
    };
    Coarse { value, unit }
}

impl fmt::Display for Coarse {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}{}", self.value, self.unit)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn coarse_durations_round_down_to_their_unit() {
        for (secs, text) in
            [(0, "0s"), (119, "119s"), (120, "2m"), (7199, "119m"), (7200, "2h"), (172_800, "2d")]
        {
            assert_eq!(coarse(Duration::from_secs(secs)).to_string(), text);
        }
        assert_eq!(coarse(Duration::from_secs(125)), coarse(Duration::from_secs(179)));
        assert_ne!(coarse(Duration::from_secs(119)), coarse(Duration::from_secs(120)));
    }
}
