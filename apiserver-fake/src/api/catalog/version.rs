//! [`KubeVersion`]: the Kubernetes minor a fake server impersonates.

use std::fmt;
use std::str::FromStr;

use super::CatalogError;

/// A Kubernetes `major.minor` release whose built-in API tables this crate carries (1.28 to 1.36).
///
/// Patch levels are accepted when parsing and dropped: API sets only change between minors.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct KubeVersion {
    /// Major version (always 1).
    pub major: u32,
    /// Minor version, 28..=36.
    pub minor: u32,
}

impl KubeVersion {
    /// The oldest minor with a built-in table.
    pub const OLDEST: KubeVersion = KubeVersion { major: 1, minor: 28 };
    /// The newest minor with a built-in table.
    pub const NEWEST: KubeVersion = KubeVersion { major: 1, minor: 36 };

    /// Builds a version, checking that a table exists for it.
    pub fn new(major: u32, minor: u32) -> Result<Self, CatalogError> {
        let version = KubeVersion { major, minor };
        if version < Self::OLDEST || version > Self::NEWEST {
            return Err(CatalogError::UnsupportedVersion {
                version: version.to_string(),
            });
        }
        Ok(version)
    }

    /// Every supported minor, oldest first.
    pub fn all() -> impl Iterator<Item = KubeVersion> {
        (Self::OLDEST.minor..=Self::NEWEST.minor).map(|minor| KubeVersion { major: 1, minor })
    }
}

impl fmt::Display for KubeVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.major, self.minor)
    }
}

impl FromStr for KubeVersion {
    type Err = CatalogError;

    /// Accepts `1.36`, `v1.36` and `1.36.2` (the patch is ignored).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let invalid = || CatalogError::InvalidVersion { input: s.to_string() };
        let trimmed = s.trim();
        let digits = trimmed.strip_prefix('v').unwrap_or(trimmed);
        let mut parts = digits.split('.');
        let mut number = || -> Result<u32, CatalogError> {
            let part = parts.next().ok_or_else(invalid)?;
            if part.is_empty() || !part.bytes().all(|b| b.is_ascii_digit()) {
                return Err(invalid());
            }
            part.parse().map_err(|_| invalid())
        };
        let major = number()?;
        let minor = number()?;
        match parts.next() {
            None => {}
            Some(patch) if !patch.is_empty() && patch.bytes().all(|b| b.is_ascii_digit()) => {}
            Some(_) => return Err(invalid()),
        }
        if parts.next().is_some() {
            return Err(invalid());
        }
        KubeVersion::new(major, minor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_release_spellings() {
        for input in ["1.36", "v1.36", "1.36.2", " v1.36.0 "] {
            assert_eq!(
                input.parse::<KubeVersion>().unwrap(),
                KubeVersion { major: 1, minor: 36 },
                "{input}"
            );
        }
        assert_eq!("1.28".parse::<KubeVersion>().unwrap().to_string(), "1.28");
    }

    #[test]
    fn rejects_malformed_and_unsupported_versions() {
        for input in ["", "1", "1.", "v", "1.x", "1.36.2.1", "1.36-rc", "1.-3", "x1.36"] {
            assert!(
                matches!(
                    input.parse::<KubeVersion>(),
                    Err(CatalogError::InvalidVersion { .. })
                ),
                "{input}"
            );
        }
        for input in ["1.27", "1.37", "2.0"] {
            let err = input.parse::<KubeVersion>().unwrap_err();
            assert!(matches!(err, CatalogError::UnsupportedVersion { .. }), "{input}");
            assert!(err.to_string().contains("1.28"), "{err}");
        }
    }

    #[test]
    fn all_lists_nine_minors_in_order() {
        let all: Vec<String> = KubeVersion::all().map(|v| v.to_string()).collect();
        assert_eq!(all.first().map(String::as_str), Some("1.28"));
        assert_eq!(all.last().map(String::as_str), Some("1.36"));
        assert_eq!(all.len(), 9);
    }
}
