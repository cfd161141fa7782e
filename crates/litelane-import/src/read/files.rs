//! The files of an import: paths and glob patterns (expanded here, sorted,
//! so no shell is needed).

use std::collections::HashSet;
use std::path::Path;

use crate::error::Error;

/// True when `p` holds a glob metacharacter.
fn is_pattern(p: &str) -> bool {
    p.contains(['*', '?', '['])
}

/// The files of `patterns`, in order: an existing path as it is, a glob
/// pattern as the files it matches, sorted by name (an error when it
/// matches none). A file named twice is imported once.
pub fn expand(patterns: &[String]) -> Result<Vec<String>, Error> {
    let mut out = Vec::new();
    let mut seen = HashSet::new();
    for p in patterns {
        let found: Vec<String> = if p == "-" || !is_pattern(p) || Path::new(p).exists() {
            vec![p.clone()]
        } else {
            let paths =
                glob::glob(p).map_err(|e| Error::Input(format!("bad glob pattern {p:?}: {e}")))?;
            let mut v = Vec::new();
            for entry in paths {
                let path = entry
                    .map_err(|e| Error::io(format!("expanding {p:?}"), std::io::Error::from(e)))?;
                if path.is_file() {
                    v.push(path.display().to_string());
                }
            }
            if v.is_empty() {
                return Err(Error::Input(format!("no file matches {p:?}")));
            }
            v.sort();
            v
        };
        for f in found {
            let id = std::fs::canonicalize(&f)
                .map(|c| c.display().to_string())
                .unwrap_or_else(|_| f.clone());
            if seen.insert(id) {
                out.push(f);
            }
        }
    }
    Ok(out)
}

/// The files of a run over several files (`None`: one file, imported as
/// before). A glob pattern counts as several, even when it matches one.
pub fn several(source: &str, more: &[String]) -> Result<Option<Vec<String>>, Error> {
    let patterns: Vec<String> = std::iter::once(source.to_string())
        .chain(more.iter().cloned())
        .collect();
    let globbed = patterns
        .iter()
        .any(|p| p != "-" && is_pattern(p) && !Path::new(p).exists());
    if more.is_empty() && !globbed {
        return Ok(None);
    }
    let files = expand(&patterns)?;
    if files.iter().any(|f| f == "-") {
        return Err(Error::Input(
            "stdin (-) cannot be one of several files; import it on its own".into(),
        ));
    }
    Ok(Some(files))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_expand_sorted_once_each_and_fail_when_empty() {
        let d = tempfile::tempdir().unwrap();
        for n in ["b.csv", "a.csv", "c.txt", "a[1].csv"] {
            std::fs::write(d.path().join(n), "x\n1\n").unwrap();
        }
        let p = |s: &str| d.path().join(s).display().to_string();
        let got = expand(&[p("*.csv"), p("a.csv")]).unwrap();
        assert_eq!(got, vec![p("a.csv"), p("a[1].csv"), p("b.csv")]);
        // An existing name with metacharacters is that file, not a pattern.
        assert_eq!(expand(&[p("a[1].csv")]).unwrap(), vec![p("a[1].csv")]);
        let e = expand(&[p("*.tsv")]).unwrap_err().to_string();
        assert!(e.contains("no file matches"), "{e}");
        // A missing plain path is passed on (opening it names it).
        assert_eq!(expand(&[p("nope.csv")]).unwrap(), vec![p("nope.csv")]);
    }
}
