//! Model names → files on disk.
//!
//! `--model` is, in order: a local path (a `.gguf` file, or a folder with `config.json` +
//! safetensors + `tokenizer.json`, or a folder with one `.gguf`); a name in the manifest
//! (`models/manifest.toml`: where the files live or come from, chat style, stop tokens); or a
//! Hugging Face repo id (`owner/name`), fetched with `hf-hub` into its usual cache
//! (`HF_HOME`, `HF_ENDPOINT` honoured). A manifest entry whose local file is missing is fetched
//! from its hub repo when it names one; otherwise the error says how to get it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::model::{ModelError, ModelFiles};

/// The manifest shipped with the source, used when `models/manifest.toml` is not on disk.
const BUILTIN_MANIFEST: &str = include_str!("../../../models/manifest.toml");

/// One known model.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ManifestEntry {
    /// What it is.
    pub description: String,
    /// The weight file or folder, relative to the manifest's folder.
    pub path: Option<String>,
    /// The Hugging Face repo it comes from.
    pub repo: Option<String>,
    /// The repo revision.
    pub revision: Option<String>,
    /// The file in the repo (GGUF repos); none for safetensors checkpoints.
    pub file: Option<String>,
    /// How to fetch it when the hub is unreachable.
    pub fetch: Option<String>,
    /// Tool-call style (`--style`).
    pub style: String,
    /// Stop token texts beyond the tokenizer's end-of-sequence token.
    #[serde(default)]
    pub stop: Vec<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ManifestFile {
    default: String,
    models: BTreeMap<String, ManifestEntry>,
}

/// The known models.
#[derive(Debug, Clone)]
pub struct Manifest {
    /// The entry used when `--model` is not given.
    pub default: String,
    /// Entries by name.
    pub models: BTreeMap<String, ManifestEntry>,
    /// Folder that entry paths are relative to.
    pub dir: PathBuf,
}

impl Manifest {
    /// Reads `path`, or `models/manifest.toml` when it exists, or the built-in copy (paths then
    /// relative to `models/`).
    pub fn load(path: Option<&Path>) -> Result<Manifest, ModelError> {
        let default = Path::new("models/manifest.toml");
        let (text, origin, dir) = match path.or(default.exists().then_some(default)) {
            Some(p) => (
                std::fs::read_to_string(p).map_err(|source| ModelError::Io {
                    path: p.to_path_buf(),
                    source,
                })?,
                p.display().to_string(),
                p.parent().unwrap_or(Path::new(".")).to_path_buf(),
            ),
            None => (
                BUILTIN_MANIFEST.to_string(),
                "built-in manifest".to_string(),
                PathBuf::from("models"),
            ),
        };
        let file: ManifestFile = toml::from_str(&text)
            .map_err(|e| ModelError::Resolve(format!("{origin}: {}", e.to_string().trim())))?;
        if !file.models.contains_key(&file.default) {
            return Err(ModelError::Resolve(format!(
                "{origin}: default model {:?} is not one of the [models] entries",
                file.default
            )));
        }
        Ok(Manifest {
            default: file.default,
            models: file.models,
            dir,
        })
    }
}

/// What `--model` resolved to.
#[derive(Debug, Clone)]
pub struct Resolved {
    /// The files.
    pub files: ModelFiles,
    /// The manifest entry, when it came from one.
    pub entry: Option<ManifestEntry>,
}

/// Which model to load.
#[derive(Debug, Clone, Default)]
pub struct ModelSpec {
    /// Path, manifest name or repo id; `None` for the manifest's default.
    pub name: Option<String>,
    /// Hub revision.
    pub revision: Option<String>,
    /// File in a hub repo (a GGUF file).
    pub file: Option<String>,
}

/// Resolves `spec` to files, fetching from the hub when needed (`progress`: show download bars).
pub fn resolve(
    spec: &ModelSpec,
    manifest: &Manifest,
    progress: bool,
) -> Result<Resolved, ModelError> {
    let name = spec
        .name
        .clone()
        .unwrap_or_else(|| manifest.default.clone());
    let path = Path::new(&name);
    if path.exists() {
        return Ok(Resolved {
            files: local_files(path)?,
            entry: None,
        });
    }
    if let Some(entry) = manifest.models.get(&name) {
        if let Some(p) = &entry.path {
            let p = manifest.dir.join(p);
            if !p.exists() {
                run_fetch(&name, entry, manifest)?;
            }
            if p.exists() {
                return Ok(Resolved {
                    files: local_files(&p)?,
                    entry: Some(entry.clone()),
                });
            }
        }
        let Some(repo) = &entry.repo else {
            return Err(ModelError::Resolve(format!(
                "model {name:?}: {} is missing{}",
                entry.path.as_deref().unwrap_or("its file"),
                entry
                    .fetch
                    .as_ref()
                    .map(|f| format!("; fetch it with `{f}`"))
                    .unwrap_or_default()
            )));
        };
        let hub = ModelSpec {
            name: Some(repo.clone()),
            revision: spec.revision.clone().or(entry.revision.clone()),
            file: spec.file.clone().or(entry.file.clone()),
        };
        let files = fetch(&hub, progress).map_err(|e| match &entry.fetch {
            Some(f) => ModelError::Resolve(format!("{e}; without the hub, fetch it with `{f}`")),
            None => e,
        })?;
        return Ok(Resolved {
            files,
            entry: Some(entry.clone()),
        });
    }
    let looks_like_repo =
        name.split('/').count() == 2 && !name.starts_with('.') && !name.ends_with(".gguf");
    if !looks_like_repo {
        let known: Vec<&str> = manifest.models.keys().map(String::as_str).collect();
        return Err(ModelError::Resolve(format!(
            "model {name:?} is not a file, not a manifest entry ({}) and not a Hugging Face repo id (owner/name)",
            known.join(", ")
        )));
    }
    Ok(Resolved {
        files: fetch(
            &ModelSpec {
                name: Some(name),
                ..spec.clone()
            },
            progress,
        )?,
        entry: None,
    })
}

/// Runs an entry's `fetch` command when its program is there (a path relative to the folder above
/// the manifest's: `scripts/...` in a checkout), with the terminal's output, so that a model the
/// hub cannot serve here is fetched the way the command says. Nothing happens when the program is
/// not there (an installed binary's built-in manifest); a command that fails is an error.
fn run_fetch(name: &str, entry: &ManifestEntry, manifest: &Manifest) -> Result<(), ModelError> {
    let Some(cmd) = &entry.fetch else {
        return Ok(());
    };
    let root = match manifest.dir.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let program = cmd.split_whitespace().next().unwrap_or_default();
    if program.is_empty() || !root.join(program).is_file() {
        return Ok(());
    }
    eprintln!(
        "model {name:?}: {} is missing; fetching it with `{cmd}`",
        entry.path.as_deref().unwrap_or("its file")
    );
    let status = std::process::Command::new("sh")
        .arg("-c")
        .arg(cmd)
        .current_dir(&root)
        .stdin(std::process::Stdio::null())
        .status()
        .map_err(|e| ModelError::Resolve(format!("model {name:?}: cannot run `{cmd}`: {e}")))?;
    if !status.success() {
        return Err(ModelError::Resolve(format!(
            "model {name:?}: `{cmd}` failed ({status})"
        )));
    }
    Ok(())
}

/// Files of a local `.gguf` or checkpoint folder.
pub fn local_files(path: &Path) -> Result<ModelFiles, ModelError> {
    let beside = |dir: &Path, name: &str| Some(dir.join(name)).filter(|p| p.is_file());
    if path.is_file() {
        let dir = path.parent().unwrap_or(Path::new("."));
        return Ok(ModelFiles::Gguf {
            model: path.to_path_buf(),
            tokenizer: beside(dir, "tokenizer.json"),
            tokenizer_config: beside(dir, "tokenizer_config.json"),
        });
    }
    let io = |source| ModelError::Io {
        path: path.to_path_buf(),
        source,
    };
    let mut entries: Vec<PathBuf> = std::fs::read_dir(path)
        .map_err(io)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .collect();
    entries.sort();
    let with_ext = |ext: &str| -> Vec<PathBuf> {
        entries
            .iter()
            .filter(|p| p.extension().is_some_and(|e| e == ext))
            .cloned()
            .collect()
    };
    let config = path.join("config.json");
    if config.is_file() {
        let weights = with_ext("safetensors");
        if weights.is_empty() {
            return Err(ModelError::Resolve(format!(
                "{}: has config.json but no .safetensors weights",
                path.display()
            )));
        }
        let tokenizer = beside(path, "tokenizer.json").ok_or_else(|| {
            ModelError::Resolve(format!("{}: tokenizer.json is missing", path.display()))
        })?;
        return Ok(ModelFiles::Safetensors {
            config,
            weights,
            tokenizer,
            tokenizer_config: beside(path, "tokenizer_config.json"),
        });
    }
    match &with_ext("gguf")[..] {
        [one] => local_files(one),
        [] => Err(ModelError::Resolve(format!(
            "{}: neither a .gguf file nor a folder with config.json and safetensors weights",
            path.display()
        ))),
        many => Err(ModelError::Resolve(format!(
            "{}: holds {} .gguf files; name one",
            path.display(),
            many.len()
        ))),
    }
}

/// Downloads a repo's model files with hf-hub (cached; nothing is fetched twice).
pub fn fetch(spec: &ModelSpec, progress: bool) -> Result<ModelFiles, ModelError> {
    use hf_hub::api::sync::ApiBuilder;
    use hf_hub::{Repo, RepoType};
    let repo_id = spec.name.clone().unwrap_or_default();
    let revision = spec.revision.clone().unwrap_or_else(|| "main".into());
    if std::env::var_os("HF_HOME").is_none() && std::env::var_os("HOME").is_none() {
        return Err(ModelError::Resolve(
            "cannot place the Hugging Face cache: set HF_HOME or HOME".into(),
        ));
    }
    let api = ApiBuilder::from_env()
        .with_progress(progress)
        .build()
        .map_err(|e| ModelError::Resolve(format!("hugging face hub: {e}")))?;
    let repo = api.repo(Repo::with_revision(
        repo_id.clone(),
        RepoType::Model,
        revision.clone(),
    ));
    let get = |file: &str| {
        repo.get(file).map_err(|e| {
            ModelError::Resolve(format!("{repo_id}@{revision}: cannot fetch {file}: {e}"))
        })
    };
    if let Some(file) = &spec.file {
        let path = get(file)?;
        if file.ends_with(".gguf") {
            return Ok(ModelFiles::Gguf {
                model: path,
                tokenizer: None,
                tokenizer_config: None,
            });
        }
        return Err(ModelError::Resolve(format!(
            "{repo_id}: --model-file {file:?} is not a .gguf file (safetensors checkpoints are fetched whole; leave --model-file out)"
        )));
    }
    let config = get("config.json").map_err(|e| {
        ModelError::Resolve(format!(
            "{e} (a GGUF repo? name the file with --model-file)"
        ))
    })?;
    let tokenizer = get("tokenizer.json")?;
    let tokenizer_config = get("tokenizer_config.json").ok();
    let weights = match get("model.safetensors.index.json") {
        Ok(index) => {
            let v = super::model::read_json(&index)?;
            let mut shards: Vec<String> = v["weight_map"]
                .as_object()
                .ok_or_else(|| ModelError::File {
                    path: index.clone(),
                    message: "`weight_map` is missing or not an object".into(),
                })?
                .values()
                .filter_map(|s| s.as_str().map(str::to_string))
                .collect();
            shards.sort();
            shards.dedup();
            shards
                .iter()
                .map(|s| get(s))
                .collect::<Result<Vec<_>, _>>()?
        }
        Err(_) => vec![get("model.safetensors")?],
    };
    Ok(ModelFiles::Safetensors {
        config,
        weights,
        tokenizer,
        tokenizer_config,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtin_manifest_parses_and_names_its_default() {
        let file: ManifestFile = toml::from_str(BUILTIN_MANIFEST).unwrap();
        let default = &file.models[&file.default];
        assert!(structgen_engine::frontend::tools::style(&default.style).is_some());
        for (name, e) in &file.models {
            assert!(e.path.is_some() || e.repo.is_some(), "{name}");
            assert!(
                structgen_engine::frontend::tools::style(&e.style).is_some(),
                "{name}: style {}",
                e.style
            );
        }
    }

    #[test]
    fn a_missing_file_is_fetched_with_the_entry_command() {
        let root = std::env::temp_dir().join(format!("structgen-fetch-{}", std::process::id()));
        let models = root.join("models");
        std::fs::create_dir_all(&models).unwrap();
        std::fs::create_dir_all(root.join("bin")).unwrap();
        let script = root.join("bin/get.sh");
        std::fs::write(&script, "#!/bin/sh\nprintf GGUF > models/$1.gguf\n").unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
        let manifest = |fetch: &str| {
            let text = format!(
                "default = \"m\"\n[models.m]\ndescription = \"d\"\npath = \"m.gguf\"\nfetch = \"{fetch}\"\nstyle = \"qwen\"\n"
            );
            std::fs::write(models.join("manifest.toml"), text).unwrap();
            Manifest::load(Some(&models.join("manifest.toml"))).unwrap()
        };
        let spec = ModelSpec::default();
        let e = resolve(&spec, &manifest("bin/get.sh other; exit 3"), false).unwrap_err();
        assert!(e.to_string().contains("failed"), "{e}");
        let got = resolve(&spec, &manifest("bin/get.sh m"), false).unwrap();
        match got.files {
            ModelFiles::Gguf { model, .. } => assert_eq!(model, models.join("m.gguf")),
            other => panic!("{other:?}"),
        }
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn unknown_names_list_the_manifest() {
        let m = Manifest::load(None).unwrap();
        let e = resolve(
            &ModelSpec {
                name: Some("no-such-model".into()),
                ..Default::default()
            },
            &m,
            false,
        )
        .unwrap_err();
        assert!(e.to_string().contains("smollm2-135m"), "{e}");
    }
}
