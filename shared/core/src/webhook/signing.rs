//! What a receiver checks: the Standard Webhooks body, the `whsec_` form of a secret, and the
//! `webhook-signature` header (`v1,<base64 HMAC-SHA256(secret, "{id}.{timestamp}.{body}")>`,
//! one per signing secret, separated by spaces, so a receiver still holding the secret before a
//! rotation accepts the delivery during the overlap).

use super::{SecretError, WebhookSecret};
use crate::feed::FeedEntry;
use crate::ids::TenantId;
use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use hmac::{Hmac, Mac};
use sha2::Sha256;

/// The prefix of a secret's text form.
const PREFIX: &str = "whsec_";

/// Reads a secret written `whsec_<base64>`; the key holds
/// [`WebhookSecret::MIN_BYTES`] to 64 bytes.
pub fn parse_secret(text: &str) -> Result<WebhookSecret, SecretError> {
    let key = text.strip_prefix(PREFIX).ok_or(SecretError::NoPrefix)?;
    let key = B64.decode(key).map_err(SecretError::NotBase64)?;
    WebhookSecret::from_bytes(key)
}

/// The `whsec_<base64>` form of `secret`: what the API shows its tenant, once.
pub fn format_secret(secret: &WebhookSecret) -> String {
    format!("{PREFIX}{}", B64.encode(secret.bytes()))
}

/// One signature, `v1,<base64>`, over `{id}.{timestamp}.{body}` with `secret`.
pub fn sign(secret: &WebhookSecret, id: &str, timestamp: i64, body: &[u8]) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(secret.bytes()).expect("HMAC takes keys of any length");
    mac.update(format!("{id}.{timestamp}.").as_bytes());
    mac.update(body);
    format!("v1,{}", B64.encode(mac.finalize().into_bytes()))
}

/// The `webhook-signature` header: one signature per secret, in order, separated by spaces.
pub fn signature_header(secrets: &[&WebhookSecret], id: &str, timestamp: i64, body: &[u8]) -> String {
    secrets.iter().map(|s| sign(s, id, timestamp, body)).collect::<Vec<_>>().join(" ")
}

/// The body of a delivery: `{"type": <kind>, "timestamp": <when the event occurred>, "data":
/// <the feed entry and its tenant_id>}`. It depends on the entry alone, so every attempt of a
/// delivery sends the same bytes (only `webhook-timestamp`, and with it the signature, change).
pub fn payload(tenant: &TenantId, entry: &FeedEntry) -> Vec<u8> {
    let mut data = serde_json::to_value(entry).expect("feed entries serialise");
    data["tenant_id"] = serde_json::to_value(tenant).expect("tenant ids serialise");
    let body = serde_json::json!({"type": entry.kind, "timestamp": entry.occurred_at, "data": data});
    serde_json::to_vec(&body).expect("JSON values serialise")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{CorrelationId, DesignId, EventKind, Verdict};
    use chrono::{TimeZone, Utc};

    const REFERENCE: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

    #[test]
    fn signatures_match_the_standard_webhooks_reference() {
        // Example from the Standard Webhooks specification's reference implementation tests.
        let secret = parse_secret(REFERENCE).unwrap();
        let body = br#"{"test": 2432232314}"#;
        assert_eq!(
            sign(&secret, "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, body),
            "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
        );
    }

    #[test]
    fn two_secrets_give_two_signatures_separated_by_a_space_each_verifiable_alone() {
        let current = WebhookSecret::from_bytes(vec![7; 32]).unwrap();
        let previous = parse_secret(REFERENCE).unwrap();
        let body = br#"{"test": 2432232314}"#;
        let header = signature_header(&[&current, &previous], "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, body);
        let parts: Vec<&str> = header.split(' ').collect();
        assert_eq!(parts.len(), 2, "{header}");
        assert_eq!(parts[0], sign(&current, "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, body));
        assert_eq!(parts[1], "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=");
        assert_ne!(parts[0], parts[1]);
        assert_eq!(signature_header(&[&current], "id", 1, b"x"), sign(&current, "id", 1, b"x"), "one secret, no space");
    }

    #[test]
    fn a_secret_reads_back_what_it_writes_and_refuses_other_text() {
        let secret = parse_secret(REFERENCE).unwrap();
        assert_eq!(format_secret(&secret), REFERENCE);
        let fresh = WebhookSecret::from_bytes((0..48).collect()).unwrap();
        assert_eq!(parse_secret(&format_secret(&fresh)).unwrap(), fresh);
        for bad in ["MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "whsec_c2hvcnQ=", "whsec_not base64!", "whsec_"] {
            assert!(parse_secret(bad).is_err(), "{bad}");
        }
        assert_eq!(parse_secret("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"), Err(SecretError::NoPrefix));
        assert_eq!(parse_secret("whsec_c2hvcnQ="), Err(SecretError::Length { bytes: 5 }));
        let not_base64 = parse_secret("whsec_not base64!").unwrap_err();
        assert!(matches!(not_base64, SecretError::NotBase64(_)), "{not_base64:?}");
        assert!(std::error::Error::source(&not_base64).is_some(), "the decoding error is kept underneath");
        assert!(!format!("{secret:?}").contains("MfKQ"), "Debug never prints the key");
    }

    #[test]
    fn the_body_carries_the_kind_the_event_time_and_the_entry_with_its_tenant() {
        let tenant = TenantId::parse("acme").unwrap();
        let entry = FeedEntry {
            seq: 42,
            design_id: DesignId::generate(),
            kind: EventKind::ResultsReady,
            revision: 3,
            event_id: uuid::Uuid::now_v7(),
            correlation_id: CorrelationId::parse("corr-1").unwrap(),
            occurred_at: Utc.with_ymd_and_hms(2026, 1, 2, 3, 4, 5).unwrap(),
            verdict: Some(Verdict::Pass),
            elapsed_ms: None,
            batch: None,
        };
        let body: serde_json::Value = serde_json::from_slice(&payload(&tenant, &entry)).unwrap();
        assert_eq!(body["type"], "results.ready");
        assert_eq!(body["timestamp"], "2026-01-02T03:04:05Z");
        assert_eq!(body["data"]["tenant_id"], "acme");
        assert_eq!(body["data"]["seq"], 42);
        assert_eq!(body["data"]["design_id"], entry.design_id.to_string());
        let mut back = body["data"].clone();
        back.as_object_mut().unwrap().remove("tenant_id");
        assert_eq!(serde_json::from_value::<FeedEntry>(back).unwrap(), entry, "the data is the feed entry");
        assert_eq!(payload(&tenant, &entry), payload(&tenant, &entry), "every attempt sends the same bytes");
    }
}
