//! Placeholder, replaced by the engine bindings.
