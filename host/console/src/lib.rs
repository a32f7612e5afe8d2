//! The web console: a single-page app built from `web/` with Vite into `dist/` (kept in
//! the repository, so building needs no Node), embedded in the binary so `sluice serve`
//! needs no second server or files beside it. The service serves these files under
//! `/console/`; everything the app shows comes from the admin API.

include!(concat!(env!("OUT_DIR"), "/files.rs"));

/// One file of the console.
#[derive(Clone, Copy, Debug)]
pub struct Asset {
    /// Its bytes.
    pub bytes: &'static [u8],
    /// Its `Content-Type`.
    pub content_type: &'static str,
    /// Whether its name carries a hash of its content (Vite's `assets/`), so it may be
    /// cached for good.
    pub immutable: bool,
}

/// The file at `path` under `/console/` (`""` is `index.html`).
pub fn asset(path: &str) -> Option<Asset> {
    let path = if path.is_empty() { "index.html" } else { path };
    let (_, bytes) = FILES.iter().find(|(name, _)| *name == path)?;
    Some(Asset {
        bytes,
        content_type: content_type(path),
        immutable: path.starts_with("assets/"),
    })
}

fn content_type(path: &str) -> &'static str {
    match path.rsplit_once('.').map(|(_, extension)| extension) {
        Some("html") => "text/html; charset=utf-8",
        Some("js") => "text/javascript; charset=utf-8",
        Some("css") => "text/css; charset=utf-8",
        Some("svg") => "image/svg+xml",
        Some("png") => "image/png",
        Some("ico") => "image/x-icon",
        Some("json") => "application/json",
        Some("woff2") => "font/woff2",
        _ => "application/octet-stream",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_index_loads_its_scripts_from_files() {
        let index = asset("").expect("the console has an index");
        assert_eq!(index.content_type, "text/html; charset=utf-8");
        assert!(!index.immutable);
        let html = std::str::from_utf8(index.bytes).unwrap();
        let script = html
            .split("src=\"/console/")
            .nth(1)
            .and_then(|rest| rest.split('"').next())
            .expect("the index names a script under /console/");
        let script = asset(script).expect("the script it names is embedded");
        assert!(script.immutable);
        assert_eq!(script.content_type, "text/javascript; charset=utf-8");
        // No inline scripts: the console is served under a policy that allows only
        // scripts from files.
        assert!(!html.contains("<script>"), "{html}");
    }

    #[test]
    fn unknown_paths_have_no_asset() {
        assert!(asset("nothing.js").is_none());
        assert!(asset("../Cargo.toml").is_none());
    }
}
