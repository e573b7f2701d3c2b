//! The integration-test binary.
