//! The web console: a small single-page app embedded in the binary (`assets`), signed in through an HttpOnly
//! session cookie (`session`), calling the same `/v1` API with the same authorization as every other client.

pub mod assets;
pub mod session;
