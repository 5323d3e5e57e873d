//! The webhook client against receivers on 127.0.0.1: what it sends, and what it refuses to do
//! (follow a redirect, reach a private address, read an endless answer, put a URL's secrets in
//! an error).

mod webhook_support;

use openqq_adapters::webhook::{sign, signature_header, GuardedResolver, Message, SendError, WebhookClient};
use openqq_core::WebhookSecret;
use std::time::Duration;
use webhook_support::{receiver, verify, Answer};

const WAIT: Duration = Duration::from_secs(10);

fn message(secrets: &[&WebhookSecret]) -> Message {
    let body = br#"{"type":"results.ready","timestamp":"2026-01-01T00:00:00Z","data":{}}"#.to_vec();
    let (id, timestamp) = ("msg_test_1".to_owned(), chrono::Utc::now().timestamp());
    Message { signature: signature_header(secrets, &id, timestamp, &body), id, timestamp, body }
}

fn secret(fill: u8) -> WebhookSecret {
    WebhookSecret::from_bytes(vec![fill; 32]).unwrap()
}

#[tokio::test]
async fn a_message_arrives_with_the_standard_webhooks_headers_and_verifies_with_each_secret() {
    let mut hooks = receiver(|_| Answer::Status(204)).await;
    let client = WebhookClient::new(true).unwrap();
    let (current, previous, stranger) = (secret(1), secret(2), secret(3));
    let sent = message(&[&current, &previous]);
    assert_eq!(client.send(&hooks.url, &sent, WAIT).await.unwrap(), 204);
    let got = hooks.next(WAIT).await.expect("the receiver got the message");
    assert_eq!(got.header("content-type"), "application/json");
    assert_eq!(got.header("webhook-id"), "msg_test_1");
    assert_eq!(got.header("webhook-timestamp"), sent.timestamp.to_string());
    assert_eq!(got.body, sent.body);
    verify(current.bytes(), &got).expect("the current secret verifies");
    verify(previous.bytes(), &got).expect("the previous secret verifies during its overlap");
    assert!(verify(stranger.bytes(), &got).is_err(), "another secret does not");
    assert_eq!(got.header("webhook-signature").split(' ').count(), 2);
    assert_eq!(
        got.header("webhook-signature").split(' ').next(),
        Some(&*sign(&current, "msg_test_1", sent.timestamp, &sent.body))
    );
}

#[tokio::test]
async fn a_redirect_is_the_answer_and_is_not_followed() {
    let mut elsewhere = receiver(|_| Answer::Status(200)).await;
    let to = elsewhere.url.clone();
    let mut hooks = receiver(move |_| Answer::Redirect(to.clone())).await;
    let client = WebhookClient::new(true).unwrap();
    assert_eq!(client.send(&hooks.url, &message(&[&secret(1)]), WAIT).await.unwrap(), 302);
    assert!(hooks.next(WAIT).await.is_some());
    assert!(elsewhere.next(Duration::from_millis(300)).await.is_none(), "the redirect's target got nothing");
    assert_eq!(elsewhere.taken(), 0);
}

#[tokio::test]
async fn a_literal_private_address_is_refused_before_anything_is_sent() {
    let hooks = receiver(|_| Answer::Status(200)).await;
    let client = WebhookClient::new(false).unwrap();
    for url in
        [hooks.url.clone(), hooks.url.replace("127.0.0.1", "[::ffff:127.0.0.1]"), "http://169.254.169.254/".into()]
    {
        let refused = client.send(&url, &message(&[&secret(1)]), WAIT).await;
        assert!(
            matches!(&refused, Err(SendError::Refused(e)) if e.contains("not a public address")),
            "{url}: {refused:?}"
        );
    }
    let local = hooks.url.replace("127.0.0.1", "localhost");
    assert!(matches!(client.send(&local, &message(&[&secret(1)]), WAIT).await, Err(SendError::Refused(_))));
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(hooks.taken(), 0, "nothing reached the receiver");
}

/// The resolver is what stands between a name and its addresses when the client connects: a
/// name that passed the URL check and resolves to loopback (DNS rebinding) is refused there.
#[tokio::test]
async fn the_guarded_resolver_refuses_the_connection_to_a_name_resolving_to_loopback() {
    let hooks = receiver(|_| Answer::Status(200)).await;
    let by_name = hooks.url.replace("127.0.0.1", "localhost");
    let guarded = |allow_private| {
        reqwest::Client::builder().dns_resolver(GuardedResolver { allow_private }).no_proxy().build().unwrap()
    };
    let refused = guarded(false).post(&by_name).body("{}").send().await.unwrap_err();
    let mut chain = refused.to_string();
    let mut cause = std::error::Error::source(&refused);
    while let Some(c) = cause {
        chain.push_str(&format!(": {c}"));
        cause = c.source();
    }
    assert!(chain.contains("localhost resolves to a private address"), "{chain}");
    // The chain is what an attempt's error says in the tenant's delivery history: never the
    // address the platform resolved.
    assert!(!chain.contains("127.0.0.1") && !chain.contains("::1"), "{chain}");
    assert_eq!(hooks.taken(), 0, "nothing reached the receiver");
    let allowed = guarded(true).post(&by_name).body("{}").header("content-length", "2").send().await.unwrap();
    assert_eq!(allowed.status(), 200, "allowed when private targets are");
}

#[tokio::test]
async fn a_receiver_that_never_answers_fails_the_attempt_with_a_timeout() {
    let hooks = receiver(|_| Answer::Hang).await;
    let client = WebhookClient::new(true).unwrap();
    let failed = client.send(&hooks.url, &message(&[&secret(1)]), Duration::from_millis(500)).await;
    assert!(matches!(failed, Err(SendError::Timeout(t)) if t == Duration::from_millis(500)), "{failed:?}");
}

/// An unbounded read would run into the timeout and fail the attempt; the bounded one answers
/// the status.
#[tokio::test]
async fn an_endless_answer_is_read_only_in_part() {
    let hooks = receiver(|_| Answer::Endless).await;
    let client = WebhookClient::new(true).unwrap();
    assert_eq!(client.send(&hooks.url, &message(&[&secret(1)]), Duration::from_secs(5)).await.unwrap(), 200);
}

#[tokio::test]
async fn a_failure_names_the_host_but_never_the_urls_credentials_or_path() {
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = closed.local_addr().unwrap().port();
    drop(closed);
    let client = WebhookClient::new(true).unwrap();
    let url = format!("http://hookuser:hunter2secret@127.0.0.1:{port}/private-path-token?key=qs-secret");
    let failed = client.send(&url, &message(&[&secret(1)]), WAIT).await.unwrap_err();
    let text = format!("{failed} {failed:?}");
    assert!(matches!(failed, SendError::Connect { .. }), "{text}");
    assert!(text.contains("127.0.0.1"), "{text}");
    for secret in ["hunter2secret", "hookuser", "private-path-token", "qs-secret"] {
        assert!(!text.contains(secret), "{secret} in {text}");
    }
}
