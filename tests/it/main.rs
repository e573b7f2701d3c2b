//! The integration-test binary.

mod props;
