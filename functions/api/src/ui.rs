//! The web UI: plain HTML, CSS and JavaScript modules from `functions/api/ui/`, embedded in the
//! binary and served at `/` (the page) and `/ui/{file}` (everything it loads). The page talks to
//! the API of the same origin with the bearer token the user pastes or mints
//! ([`crate::dev_tokens`]); nothing is fetched from anywhere else.
//!
//! The page and every file carry a strict Content-Security-Policy (scripts, styles and
//! connections from this origin only, no inline script or style, no framing, no forms posted
//! anywhere), and `Cache-Control: no-cache` with a strong `ETag`: a browser revalidates each time
//! (the assets change with the binary, and their names do not) and gets a bodiless 304 when
//! nothing changed.

use crate::problem::Problem;
use axum::extract::Path;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use std::sync::LazyLock;

/// The policy every UI answer carries: nothing but this origin, and only what the page uses.
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
     img-src 'self'; connect-src 'self'; form-action 'none'; frame-ancestors 'none'; base-uri 'none'";

/// One embedded file.
struct Asset {
    name: &'static str,
    content_type: &'static str,
    bytes: &'static [u8],
}

macro_rules! asset {
    ($name:literal, $type:literal) => {
        Asset { name: $name, content_type: $type, bytes: include_bytes!(concat!("../ui/", $name)) }
    };
}

/// What `/ui/{file}` serves; `index.html` is also the page at `/`.
const ASSETS: &[Asset] = &[
    asset!("index.html", "text/html; charset=utf-8"),
    asset!("app.css", "text/css; charset=utf-8"),
    asset!("app.js", "text/javascript; charset=utf-8"),
    asset!("api.js", "text/javascript; charset=utf-8"),
    asset!("dom.js", "text/javascript; charset=utf-8"),
    asset!("designs.js", "text/javascript; charset=utf-8"),
    asset!("batches.js", "text/javascript; charset=utf-8"),
    asset!("schedules.js", "text/javascript; charset=utf-8"),
    asset!("report.js", "text/javascript; charset=utf-8"),
    asset!("checks.js", "text/javascript; charset=utf-8"),
    asset!("vcd.js", "text/javascript; charset=utf-8"),
    asset!("wave.js", "text/javascript; charset=utf-8"),
    asset!("live.js", "text/javascript; charset=utf-8"),
    asset!("webhooks.js", "text/javascript; charset=utf-8"),
    asset!("icon.svg", "image/svg+xml"),
];

/// Each asset's strong entity tag: the start of its SHA-256, computed once.
static ETAGS: LazyLock<Vec<HeaderValue>> = LazyLock::new(|| {
    use sha2::{Digest, Sha256};
    ASSETS
        .iter()
        .map(|a| {
            let digest = Sha256::digest(a.bytes);
            let hex: String = digest[..12].iter().map(|b| format!("{b:02x}")).collect();
            HeaderValue::from_str(&format!("\"{hex}\"")).expect("hex is a valid header value")
        })
        .collect()
});

/// `GET /`: the page.
pub async fn index(headers: HeaderMap) -> Response {
    serve(0, &headers)
}

/// `GET /ui/{file}`: one of the page's files; 404 for any other name, one that does not decode
/// included.
pub async fn asset(
    file: Result<Path<String>, axum::extract::rejection::PathRejection>,
    headers: HeaderMap,
) -> Result<Response, Problem> {
    let file = file.map(|Path(f)| f).unwrap_or_default();
    let at = ASSETS
        .iter()
        .position(|a| !file.is_empty() && a.name == file)
        .ok_or_else(|| Problem::new(StatusCode::NOT_FOUND, "not-found", "Not found", "no such file of the web UI"))?;
    Ok(serve(at, &headers))
}

fn serve(at: usize, request: &HeaderMap) -> Response {
    let asset = &ASSETS[at];
    let etag = &ETAGS[at];
    let fresh = request
        .get(header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.split(',').any(|t| t.trim().trim_start_matches("W/") == etag.to_str().unwrap_or("")));
    let mut resp = if fresh {
        StatusCode::NOT_MODIFIED.into_response()
    } else {
        ([(header::CONTENT_TYPE, asset.content_type)], asset.bytes).into_response()
    };
    let h = resp.headers_mut();
    h.insert(header::ETAG, etag.clone());
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    h.insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(CONTENT_SECURITY_POLICY));
    h.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    h.insert(header::REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    resp
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_file_the_page_names_is_embedded_and_nothing_it_loads_comes_from_elsewhere() {
        let page = std::str::from_utf8(ASSETS[0].bytes).unwrap();
        for attr in ["src=\"", "href=\""] {
            for (at, _) in page.match_indices(attr) {
                let url = &page[at + attr.len()..];
                let url = &url[..url.find('"').unwrap()];
                if url.starts_with('#') {
                    continue;
                }
                let name = url.strip_prefix("/ui/").unwrap_or_else(|| panic!("{url} is not one of the UI's files"));
                assert!(ASSETS.iter().any(|a| a.name == name), "{name} is named by the page but not embedded");
            }
        }
        for a in ASSETS.iter().filter(|a| a.name.ends_with(".js")) {
            let text = std::str::from_utf8(a.bytes).unwrap();
            for (at, _) in text.match_indices("from \"") {
                let spec = &text[at + 6..];
                let spec = &spec[..spec.find('"').unwrap()];
                let name = spec.strip_prefix("./").unwrap_or_else(|| panic!("{}: imports {spec}", a.name));
                assert!(ASSETS.iter().any(|b| b.name == name), "{} imports {name}, which is not embedded", a.name);
            }
        }
    }

    #[test]
    fn the_page_has_no_inline_script_or_style_that_the_policy_would_block() {
        let page = std::str::from_utf8(ASSETS[0].bytes).unwrap();
        assert!(!page.contains("<style"), "inline <style>");
        assert!(!page.contains(" style=\""), "inline style attribute");
        let handler = page.match_indices(" on").any(|(at, _)| {
            let rest = &page[at + 3..];
            let letters = rest.bytes().take_while(u8::is_ascii_lowercase).count();
            letters > 0 && rest[letters..].starts_with('=')
        });
        assert!(!handler, "inline event handler attribute");
        for (at, _) in page.match_indices("<script") {
            let tag = &page[at..at + page[at..].find('>').unwrap()];
            assert!(tag.contains("src=\""), "inline <script>: {tag}");
        }
    }

    #[tokio::test]
    async fn an_asset_answers_with_its_type_and_policy_and_304_when_the_browser_has_it() {
        let resp = asset(Ok(Path("app.js".into())), HeaderMap::new()).await.unwrap();
        assert_eq!(resp.status(), StatusCode::OK);
        assert_eq!(resp.headers()[header::CONTENT_TYPE], "text/javascript; charset=utf-8");
        assert_eq!(resp.headers()[header::CONTENT_SECURITY_POLICY], CONTENT_SECURITY_POLICY);
        assert_eq!(resp.headers()[header::CACHE_CONTROL], "no-cache");
        let etag = resp.headers()[header::ETAG].clone();
        let mut again = HeaderMap::new();
        again.insert(header::IF_NONE_MATCH, etag);
        let resp = asset(Ok(Path("app.js".into())), again).await.unwrap();
        assert_eq!(resp.status(), StatusCode::NOT_MODIFIED);
        let mut stale = HeaderMap::new();
        stale.insert(header::IF_NONE_MATCH, HeaderValue::from_static("\"0000\""));
        assert_eq!(asset(Ok(Path("app.js".into())), stale).await.unwrap().status(), StatusCode::OK);
    }

    #[tokio::test]
    async fn a_name_that_is_not_an_asset_is_404_even_one_that_climbs_out() {
        for name in ["nope.js", "../Cargo.toml", "", "index.html/"] {
            let err = asset(Ok(Path(name.into())), HeaderMap::new()).await.unwrap_err();
            assert_eq!(err.status, StatusCode::NOT_FOUND, "{name}");
        }
    }
}
