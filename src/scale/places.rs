//! The places of a worker's keys in a checkpoint (`KeyedMonitor::note_place`: each key's first
//! row's position in the feed's order, or its last row's under a bound on live keys): a sweep's
//! ticks are put in the single-process order of keys by them, so a resumed worker needs them
//! for the keys it restores.

use crate::keyed::KeyedMonitor;
use crate::value::{Key, Value};
use std::io;
use std::path::{Path, PathBuf};

/// The file of worker `worker`'s places in a barrier's directory.
pub(crate) fn file(dir: &Path, worker: u32) -> PathBuf {
    dir.join(format!("worker-{worker}.places"))
}

/// Writes the places of `monitor`'s keys, where it keeps them (a run with sweeps), into a
/// barrier's directory, atomically: one JSON
/// array of `[key, place]` pairs, each key in the wire form of values. The caller writes it
/// before the worker's file, so that a barrier whose worker files are all in has every
/// worker's places.
pub(crate) fn write(dir: &Path, worker: u32, monitor: &KeyedMonitor) -> io::Result<()> {
    let Some(places) = monitor.places() else {
        return Ok(());
    };
    std::fs::create_dir_all(dir)?;
    let pairs: Vec<(&Value, u64)> = places.map(|(k, p)| (k.value(), p)).collect();
    crate::pipeline::checkpoint::write_atomically_with(&file(dir, worker), |out| {
        serde_json::to_writer(&mut *out, &pairs).map_err(io::Error::other)
    })
}

/// Reads worker `worker`'s places from a barrier's directory; a file that is missing or not
/// such an array is refused with its path.
pub(crate) fn read(dir: &Path, worker: u32) -> Result<Vec<(Key, u64)>, String> {
    let path = file(dir, worker);
    let refused = |why: String| format!("cannot resume from `{}`: {why}", path.display());
    let text = std::fs::read(&path).map_err(|e| refused(e.to_string()))?;
    let pairs: Vec<(Value, u64)> = serde_json::from_slice(&text)
        .map_err(|e| refused(format!("not the places of a worker's keys ({e})")))?;
    Ok(pairs.into_iter().map(|(v, p)| (Key::from(v), p)).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_damaged_places_file_is_refused_with_its_path() {
        let dir = std::env::temp_dir().join(format!("vigil-places-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(file(&dir, 3), "[[\"a\", 1], [\"b\"").unwrap();
        let e = read(&dir, 3).unwrap_err();
        assert!(
            e.contains("worker-3.places") && e.contains("not the places"),
            "{e}"
        );
        let e = read(&dir, 4).unwrap_err();
        assert!(e.contains("worker-4.places"), "{e}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
