//! One sweep per directory: `OUT/.sweep.lock`, held (an exclusive `flock`) for as long as a
//! sweep writes into `OUT`. The kernel releases it when the process ends, however it ends, so
//! a killed sweep never leaves a stale lock; the file names the holder for the error message.

use crate::SweepError;
use std::fs::File;
use std::io::{Read, Seek, Write};
use std::path::Path;

/// The lock file's name in the sweep directory.
pub const FILE: &str = ".sweep.lock";

/// Held while alive.
#[derive(Debug)]
pub struct DirLock {
    _file: File,
}

/// Takes `dir`'s lock, or says which process holds it.
pub fn acquire(dir: &Path) -> Result<DirLock, SweepError> {
    let path = dir.join(FILE);
    let io = |what, source| SweepError::Io {
        what,
        path: path.clone(),
        source,
    };
    let mut file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&path)
        .map_err(|e| io("cannot open", e))?;
    match rustix::fs::flock(&file, rustix::fs::FlockOperation::NonBlockingLockExclusive) {
        Ok(()) => {}
        Err(rustix::io::Errno::WOULDBLOCK) => {
            let mut holder = String::new();
            let _ = file.read_to_string(&mut holder);
            return Err(SweepError::Config(format!(
                "{} is in use by another tokentap sweep ({}); wait for it to end or stop it, or give another --out",
                dir.display(),
                holder.trim().trim_end_matches('.')
            )));
        }
        Err(e) => return Err(io("cannot lock", e.into())),
    }
    let me = format!(
        "pid {}, since {}",
        std::process::id(),
        humantime::format_rfc3339_seconds(std::time::SystemTime::now())
    );
    file.set_len(0).map_err(|e| io("cannot write", e))?;
    file.rewind().map_err(|e| io("cannot write", e))?;
    file.write_all(me.as_bytes())
        .and_then(|()| file.flush())
        .map_err(|e| io("cannot write", e))?;
    Ok(DirLock { _file: file })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_holder_is_refused_and_named_until_the_first_lets_go() {
        let dir = tempfile::tempdir().unwrap();
        let first = acquire(dir.path()).unwrap();
        let e = acquire(dir.path()).unwrap_err().to_string();
        assert!(e.contains("in use by another tokentap sweep"), "{e}");
        assert!(e.contains(&format!("pid {}", std::process::id())), "{e}");
        drop(first);
        acquire(dir.path()).expect("released with its holder");
    }
}
