//! Stamps the extension with a digest of the Rust sources it was built from
//! (`_simcore.SOURCE_DIGEST`): cachescope/engine.py compares it with the checkout's simcore/src at
//! start, so an engine older than its source is an error, never silently different code.
//! The digest: MD5 over the files under src/ in sorted relative-path order, each as
//! `path NUL content NUL` (cachescope/engine.py computes the same).

use md5::{Digest, Md5};
use std::path::{Path, PathBuf};

fn files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("simcore/src") {
        let path = entry.expect("simcore/src entry").path();
        if path.is_dir() {
            files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

fn main() {
    let src = Path::new("src");
    println!("cargo:rerun-if-changed=src");
    let mut paths = Vec::new();
    files(src, &mut paths);
    let mut named: Vec<(String, PathBuf)> = paths
        .into_iter()
        .map(|p| {
            let rel = p.strip_prefix(src).unwrap().components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned()).collect::<Vec<_>>().join("/");
            (rel, p)
        })
        .collect();
    named.sort();
    let mut md5 = Md5::new();
    for (rel, path) in named {
        md5.update(rel.as_bytes());
        md5.update([0u8]);
        md5.update(std::fs::read(&path).expect("simcore/src file"));
        md5.update([0u8]);
    }
    let digest: String = md5.finalize().iter().map(|b| format!("{b:02x}")).collect();
    println!("cargo:rustc-env=SIMCORE_SOURCE_DIGEST={digest}");
}
