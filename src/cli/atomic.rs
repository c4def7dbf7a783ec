//! Output files written atomically (temporary file + rename).

use std::io::Write;
use std::path::{Path, PathBuf};

use super::CliError;

/// An output file written under a temporary name and renamed into place on success, so an
/// interrupted run leaves the previous file intact; dropped without [`AtomicFile::commit`] (an
/// error on the way), the temporary file is removed.
pub(crate) struct AtomicFile {
    path: PathBuf,
    tmp: PathBuf,
    file: Option<std::io::BufWriter<std::fs::File>>,
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
            file: Some(std::io::BufWriter::new(file)),
        })
    }

    pub(crate) fn write_line(&mut self, line: &str) -> Result<(), CliError> {
        let io = |source| CliError::Io {
            path: self.tmp.clone(),
            source,
        };
        match &mut self.file {
            Some(f) => writeln!(f, "{line}").map_err(io),
            None => Ok(()),
        }
    }

    pub(crate) fn commit(mut self) -> Result<(), CliError> {
        let io = |path: &Path, source| CliError::Io {
            path: path.to_path_buf(),
            source,
        };
        let flushed = match self.file.take() {
            Some(mut f) => f.flush().map_err(|e| io(&self.tmp, e)),
            None => Ok(()),
        };
        let result = flushed
            .and_then(|()| std::fs::rename(&self.tmp, &self.path).map_err(|e| io(&self.path, e)));
        if result.is_err() {
            let _ = std::fs::remove_file(&self.tmp);
        }
        result
    }
}

impl Drop for AtomicFile {
    fn drop(&mut self) {
        if self.file.is_some() {
            self.file = None;
            let _ = std::fs::remove_file(&self.tmp);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_previous_file_survives_an_unfinished_write() {
        let dir = std::env::temp_dir().join(format!("structgen-atomic-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("out.json");
        std::fs::write(&path, "old\n").unwrap();
        let mut f = AtomicFile::create(&path).unwrap();
        f.write_line("new").unwrap();
        drop(f);
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "old\n");
        assert!(
            !dir.join("out.json.tmp").exists(),
            "temporary file left behind"
        );
        let mut f = AtomicFile::create(&path).unwrap();
        f.write_line("new").unwrap();
        f.commit().unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "new\n");
        assert!(!dir.join("out.json.tmp").exists());
        std::fs::remove_dir_all(&dir).ok();
    }
}
