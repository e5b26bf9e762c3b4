//! Parse errors.

use crate::code::ResponseCode;

/// Why a command was refused. The receiver turns it into
/// [`crate::Input::Bad`] (or `No` for [`ParseError::TooBig`]); `text` is the
/// human-readable part of the response.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    /// A syntax error with a precise message ("Missing argument",
    /// "Unknown command FOO", "Invalid sequence set", ...).
    #[error("{0}")]
    Syntax(String),
    /// A limit was exceeded (too many items, nesting too deep); answered
    /// `BAD [LIMIT]` (RFC 5530 §3).
    #[error("{0}")]
    Limit(String),
    /// A literal is larger than allowed; answered `NO [TOOBIG]`
    /// (RFC 7889 §4, RFC 4469 §5).
    #[error("{0}")]
    TooBig(String),
}

impl ParseError {
    /// A syntax error.
    pub(crate) fn syntax(text: impl Into<String>) -> ParseError {
        ParseError::Syntax(text.into())
    }

    /// The response code that goes with the error, if any.
    pub fn code(&self) -> Option<ResponseCode> {
        match self {
            ParseError::Syntax(_) => None,
            ParseError::Limit(_) => Some(ResponseCode::Limit),
            ParseError::TooBig(_) => Some(ResponseCode::TooBig),
        }
    }

    /// The response text.
    pub fn text(&self) -> &str {
        match self {
            ParseError::Syntax(t) | ParseError::Limit(t) | ParseError::TooBig(t) => t,
        }
    }
}
