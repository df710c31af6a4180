//! The system prompt as layers, innermost first: the runtime's safety principles, Layer 1
//! identity (`SOUL.md` or `IDENTITY.md`, never pruned), Layer 2 narrative (`AGENTS.toml`,
//! `USER.md`, `TOOLS.md`, `BOOT.md`, `MEMORY.md`, today's daily log), then the recall and focus
//! layers as they are added.
//!
//! Each file is looked up in the given directories in order (the caller's current directory,
//! the run's workspace, `$RYVOS_HOME`); the first match wins, so a project's `SOUL.md` overrides
//! the global one. A missing file is skipped silently; one that cannot be read, or is larger
//! than [`MAX_FILE_BYTES`], is left out with a warning.

use std::io::ErrorKind;
use std::path::{Path, PathBuf};

/// The largest context file put into the prompt.
pub(crate) const MAX_FILE_BYTES: u64 = 64 * 1024;

/// Layer 1: the first of these found is the agent's identity.
const IDENTITY: &[&str] = &["SOUL.md", "IDENTITY.md"];
/// Layer 2, in prompt order.
const NARRATIVE: &[&str] = &["AGENTS.toml", "USER.md", "TOOLS.md", "BOOT.md", "MEMORY.md"];

/// A prompt and what went wrong building it.
#[derive(Debug, Default)]
pub(crate) struct Assembled {
    pub prompt: String,
    /// Files left out, and why.
    pub warnings: Vec<String>,
}

/// Builds the system prompt: `principles`, then the layers found in `dirs`, then today's daily
/// log (`daily_log`, if it exists).
pub(crate) fn assemble(principles: &str, dirs: &[PathBuf], daily_log: &Path) -> Assembled {
    let mut out = Assembled {
        prompt: principles.to_owned(),
        warnings: Vec::new(),
    };
    let identity = IDENTITY.iter().find_map(|name| {
        let found = find(dirs, name)?;
        read(&found, &mut out.warnings).map(|text| (found, text))
    });
    if let Some((path, text)) = identity {
        section(&mut out.prompt, "Identity", &path, &text);
    }
    for name in NARRATIVE {
        if let Some(path) = find(dirs, name) {
            if let Some(text) = read(&path, &mut out.warnings) {
                section(&mut out.prompt, "Context", &path, &text);
            }
        }
    }
    if daily_log.exists() {
        if let Some(text) = read(daily_log, &mut out.warnings) {
            section(&mut out.prompt, "Today's log", daily_log, &text);
        }
    }
    out
}

/// The first directory holding `name`.
fn find(dirs: &[PathBuf], name: &str) -> Option<PathBuf> {
    dirs.iter().map(|d| d.join(name)).find(|p| p.exists())
}

/// The file's text, or `None` with a warning when it cannot be used.
fn read(path: &Path, warnings: &mut Vec<String>) -> Option<String> {
    let size = match std::fs::metadata(path) {
        Ok(meta) => meta.len(),
        Err(e) if e.kind() == ErrorKind::NotFound => return None,
        Err(e) => {
            warnings.push(format!(
                "{} was left out of the prompt: {e}",
                path.display()
            ));
            return None;
        }
    };
    if size > MAX_FILE_BYTES {
        warnings.push(format!(
            "{} was left out of the prompt: it is {size} bytes, over the {MAX_FILE_BYTES} a \
             context file may have; shorten it",
            path.display()
        ));
        return None;
    }
    match std::fs::read_to_string(path) {
        Ok(text) => Some(text),
        Err(e) => {
            warnings.push(format!(
                "{} was left out of the prompt: {e}",
                path.display()
            ));
            None
        }
    }
}

fn section(prompt: &mut String, layer: &str, path: &Path, text: &str) {
    let name = path.file_name().map_or_else(
        || path.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    );
    prompt.push_str(&format!("\n\n## {layer}: {name}\n\n{}", text.trim()));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layers_come_in_order_and_the_first_directory_wins() {
        let (near, far) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        std::fs::write(near.path().join("SOUL.md"), "near soul").unwrap();
        std::fs::write(far.path().join("SOUL.md"), "far soul").unwrap();
        std::fs::write(far.path().join("IDENTITY.md"), "far identity").unwrap();
        std::fs::write(far.path().join("MEMORY.md"), "remembered").unwrap();
        std::fs::write(near.path().join("USER.md"), "the user").unwrap();
        std::fs::create_dir(near.path().join("TOOLS.md")).unwrap();
        let log = far.path().join("today.md");
        std::fs::write(&log, "did things").unwrap();
        let dirs = [near.path().to_path_buf(), far.path().to_path_buf()];
        let built = assemble("PRINCIPLES", &dirs, &log);
        let p = &built.prompt;
        let at = |s: &str| p.find(s).unwrap_or_else(|| panic!("{s} in {p}"));
        assert!(at("PRINCIPLES") < at("near soul"));
        assert!(at("near soul") < at("the user") && at("the user") < at("remembered"));
        assert!(at("remembered") < at("did things"));
        assert!(!p.contains("far soul") && !p.contains("far identity"));
        assert_eq!(
            built.warnings.len(),
            1,
            "a directory named TOOLS.md cannot be read"
        );
    }
}
