//! The integration-test binary: conformance cases under every tier, CLI behaviour, diagnostics.

mod cli;
mod conformance;
mod diagnostics;
mod support;
