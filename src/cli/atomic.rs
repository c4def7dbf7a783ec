//! Output files written atomically (temporary file + rename).

use std::io::Write;
use std::path::{Path, PathBuf};

use super::CliError;

/// An output file written under a temporary name and renamed into place on success, so an
/// interrupted run leaves the previous file intact.
pub(crate) struct AtomicFile {
    path: PathBuf,
    tmp: PathBuf,
    file: std::io::BufWriter<std::fs::File>,
}

impl AtomicFile {
    pub(crate) fn create(path: &Path) -> Result<Self, CliError> {
        let mut name = path
            .file_name()
            .map(|n| n.to_os_string())
            .unwrap_or_default();
        name.push(".tmp");
        let tmp = path.with_file_name(name);
        let file = std::fs::File::create(&tmp).map_err(|source| CliError::Io {
            path: tmp.clone(),
            source,
        })?;
        Ok(AtomicFile {
            path: path.to_path_buf(),
            tmp,
            file: std::io::BufWriter::new(file),
        })
    }

    pub(crate) fn write_line(&mut self, line: &str) -> Result<(), CliError> {
        writeln!(self.file, "{line}").map_err(|source| CliError::Io {
            path: self.tmp.clone(),
            source,
        })
    }

    pub(crate) fn commit(mut self) -> Result<(), CliError> {
        let io = |source| CliError::Io {
            path: self.tmp.clone(),
            source,
        };
        self.file.flush().map_err(io)?;
        std::fs::rename(&self.tmp, &self.path).map_err(|source| CliError::Io {
            path: self.path.clone(),
            source,
        })
    }
}
