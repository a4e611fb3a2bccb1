//! Which characters text on the wire may hold, for both sides: the service refuses a text field holding a
//! forbidden character (422), so the agent replaces them in what it reports (a job's output may hold any bytes).

use std::borrow::Cow;

/// Characters no text field of the API accepts: C0 controls other than tab, line feed and carriage return
/// (NUL in particular, which PostgreSQL cannot store in `text`), DEL and the C1 controls.
pub fn is_forbidden_char(c: char) -> bool {
    c.is_control() && !matches!(c, '\t' | '\n' | '\r')
}

/// `text` with each forbidden character replaced by U+FFFD, so the service accepts it.
pub fn replace_forbidden(text: &str) -> Cow<'_, str> {
    if text.chars().any(is_forbidden_char) {
        Cow::Owned(text.chars().map(|c| if is_forbidden_char(c) { '\u{FFFD}' } else { c }).collect())
    } else {
        Cow::Borrowed(text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn controls_are_replaced_and_whitespace_kept() {
        assert_eq!(replace_forbidden("a\0b\u{7f}c\u{85}\td\r"), "a\u{FFFD}b\u{FFFD}c\u{FFFD}\td\r");
        assert!(matches!(replace_forbidden("plain text"), Cow::Borrowed(_)));
    }
}
