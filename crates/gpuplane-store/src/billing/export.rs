//! Usage exports.
