//! [`Secret`]: an API key that never prints.

use std::fmt;

/// A credential (the model server's API key). `Debug` and `Display` print `***`; the only way to
/// the text is [`expose`](Secret::expose), called where the `Authorization` header is built
/// (and marked sensitive there), and where an error text from the server is scrubbed of it.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    pub fn new(value: impl Into<String>) -> Self {
        Self(value.into())
    }

    /// The secret's text. Call it only to send it, or to scrub it from text.
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// `text` with every occurrence of the secret replaced by `***` (a server may echo the key it
    /// refused, as OpenAI's 401 does).
    pub fn scrub(&self, text: &str) -> String {
        if self.0.is_empty() {
            text.to_owned()
        } else {
            text.replace(&self.0, "***")
        }
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("***")
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("***")
    }
}

impl From<String> for Secret {
    fn from(value: String) -> Self {
        Self(value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_secret_prints_as_stars_in_debug_and_display() {
        let key = Secret::new("sk-live-1234");
        assert_eq!(format!("{key:?}"), "***");
        assert_eq!(format!("{key}"), "***");
        assert_eq!(format!("{:?}", Some(key.clone())), "Some(***)");
        assert_eq!(key.expose(), "sk-live-1234");
    }

    #[test]
    fn scrub_replaces_every_occurrence_of_the_secret() {
        let key = Secret::new("sk-live-1234");
        assert_eq!(key.scrub("bad key sk-live-1234 (sk-live-1234)"), "bad key *** (***)");
        assert_eq!(Secret::new("").scrub("nothing to hide"), "nothing to hide");
    }
}
