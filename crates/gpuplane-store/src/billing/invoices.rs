//! Invoices.
