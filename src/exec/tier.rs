//! The execution tiers (docs/engine.md, "Tiers"): a type of the engine, re-exported by the library API.

use std::fmt;

/// An execution tier (docs/engine.md, "Tiers").
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub enum Tier {
    /// The best tier available; `Monitor::tier` says which is running. A
    /// plain monitor whose spec has a whole-row program starts on the
    /// canonical tier and moves up (quickened, then native-whole) once its
    /// run is hot, built on a background thread (`MonitorBuilder::tier_up_after`).
    #[default]
    Auto,
    /// The canonical arena interpreter, the reference.
    Canonical,
    /// Fused regions run by the quickened register interpreter over the
    /// scalar IR; everything else (and every declined row) canonically.
    Quickened,
    /// As `Quickened`, with every region compiled by Cranelift (a region the
    /// JIT declines stays quickened).
    NativeRegions,
    /// The whole per-row schedule, temporal state included, as one native
    /// function; available when every stream is scalar (else native regions).
    NativeWhole,
}

impl Tier {
    /// Every tier, `Auto` first.
    pub const ALL: [Tier; 5] = [
        Tier::Auto,
        Tier::Canonical,
        Tier::Quickened,
        Tier::NativeRegions,
        Tier::NativeWhole,
    ];

    /// The tier's name on the command line (`native-whole`, …).
    pub fn name(self) -> &'static str {
        match self {
            Tier::Auto => "auto",
            Tier::Canonical => "canonical",
            Tier::Quickened => "quickened",
            Tier::NativeRegions => "native-regions",
            Tier::NativeWhole => "native-whole",
        }
    }

    /// The tier named `name` (as `name` prints it).
    pub fn from_name(name: &str) -> Option<Tier> {
        Tier::ALL.into_iter().find(|t| t.name() == name)
    }
}

impl fmt::Display for Tier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}
