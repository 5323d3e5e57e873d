//! Reading an upload's body at a pace: its first byte within [`UploadLimits::first_byte`] of the
//! request, then at least [`UploadLimits::min_rate`] bytes a second measured from that first
//! byte (after [`UploadLimits::rate_allowance`]). Memory is taken as each piece arrives ([`Admission::grow`]);
//! the time a piece waits for memory is the server's, not the sender's, so it moves the pace's
//! clock on.

use super::memory::Admission;
use super::UploadLimits;
use crate::body::BodyError;
use crate::problem::Problem;
use axum::body::Body;
use axum::http::StatusCode;
use openqq_core::ObjectRef;
use sha2::{Digest, Sha256};
use std::time::Duration;
use tokio::time::Instant;

/// Why a body was cut off for its pace.
fn too_slow(detail: String) -> Problem {
    metrics::counter!(crate::tenant_guard::REJECTIONS_METRIC, "reason" => "upload_too_slow").increment(1);
    Problem::new(StatusCode::REQUEST_TIMEOUT, "upload-too-slow", "The upload is too slow", detail)
}

pub(super) fn too_many_bytes(object: &ObjectRef) -> Problem {
    Problem::new(
        StatusCode::PAYLOAD_TOO_LARGE,
        "payload-too-large",
        "The upload is larger than declared",
        format!("this upload was declared as {} bytes; send exactly those bytes", object.bytes),
    )
}

pub(super) fn mismatch(detail: String) -> Problem {
    Problem::new(StatusCode::BAD_REQUEST, "upload-mismatch", "The upload does not match what was declared", detail)
}

/// Reads the body, hashing as it arrives: at most `object.bytes` (413 past them), at the pace of
/// `limits` (408 `upload-too-slow` behind it), holding memory through `admission` as it arrives
/// (503 when none comes free), then exactly that length and digest (400). On failure the rest of
/// the body comes back for draining.
pub async fn read_exactly(
    mut rest: Body,
    object: &ObjectRef,
    limits: &UploadLimits,
    admission: &mut Admission,
) -> Result<Vec<u8>, (Problem, Body)> {
    use http_body_util::BodyExt;
    let mut hasher = Sha256::new();
    let mut out: Vec<u8> = Vec::new();
    let asked = Instant::now();
    // The first byte's time, moved on by every wait for memory.
    let mut first: Option<Instant> = None;
    let rate = limits.min_rate.max(1) as f64;
    loop {
        let deadline = match first {
            None => asked + limits.first_byte,
            Some(start) => start + limits.rate_allowance + Duration::from_secs_f64(out.len() as f64 / rate),
        };
        let frame = match tokio::time::timeout_at(deadline, rest.frame()).await {
            Ok(None) => break,
            Ok(Some(Ok(frame))) => frame,
            Ok(Some(Err(e))) => return Err((BodyError::Broken(e).into(), rest)),
            Err(_) if first.is_none() => {
                let detail = format!(
                    "no byte of the body arrived within {} s of the request; send the body as soon as its headers",
                    limits.first_byte.as_secs_f64()
                );
                return Err((too_slow(detail), rest));
            }
            Err(_) => {
                let took = first.map_or(0.0, |start| start.elapsed().as_secs_f64());
                let detail = format!(
                    "an upload must arrive at {} bytes a second at least, counted from its first byte (after a {} s \
                     start); this one had sent {} of its {} bytes {took:.1} s after its first",
                    limits.min_rate,
                    limits.rate_allowance.as_secs_f64(),
                    out.len(),
                    object.bytes
                );
                return Err((too_slow(detail), rest));
            }
        };
        let Ok(data) = frame.into_data() else { continue };
        if data.is_empty() {
            continue;
        }
        first.get_or_insert_with(Instant::now);
        let total = out.len() as u64 + data.len() as u64;
        if total > object.bytes {
            return Err((too_many_bytes(object), rest));
        }
        let waiting = Instant::now();
        if let Err(p) = admission.grow(total).await {
            return Err((p, rest));
        }
        if let Some(start) = first.as_mut() {
            *start += waiting.elapsed();
        }
        if out.capacity() < total as usize {
            // Grow by doubling, as a Vec does, but never past the declared length.
            let to = (out.capacity() * 2).max(total as usize).min(object.bytes as usize);
            out.reserve_exact(to - out.len());
        }
        hasher.update(&data);
        out.extend_from_slice(&data);
    }
    if out.len() as u64 != object.bytes {
        let detail = format!(
            "the body has {} bytes; the upload was declared as {}; nothing was stored",
            out.len(),
            object.bytes
        );
        return Err((mismatch(detail), rest));
    }
    let got: String = hasher.finalize().iter().map(|b| format!("{b:02x}")).collect();
    if got != object.digest {
        let detail = format!("the body's SHA-256 is {got}, not the declared {}; nothing was stored", object.digest);
        return Err((mismatch(detail), rest));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::super::memory::UploadMemory;
    use super::*;
    use openqq_core::TenantId;

    fn object_of(data: &[u8]) -> ObjectRef {
        let digest: String = Sha256::digest(data).iter().map(|b| format!("{b:02x}")).collect();
        ObjectRef { digest, bytes: data.len() as u64 }
    }

    fn admission(memory: &std::sync::Arc<UploadMemory>, bytes: u64) -> Admission {
        memory.admit(&TenantId::parse("acme").unwrap(), bytes).unwrap()
    }

    #[tokio::test]
    async fn a_body_is_read_only_up_to_its_declared_length_and_must_hash_to_its_digest() {
        let data = b"hello netlist".to_vec();
        let object = object_of(&data);
        let limits = UploadLimits::default();
        let memory = UploadMemory::new(limits);
        let read = |body: Vec<u8>| {
            let (memory, object) = (memory.clone(), object.clone());
            async move {
                let mut admitted = admission(&memory, object.bytes);
                read_exactly(Body::from(body), &object, &limits, &mut admitted).await
            }
        };
        assert_eq!(read(data.clone()).await.unwrap(), data);
        let mut longer = data.clone();
        longer.push(b'!');
        let (p, _) = read(longer).await.unwrap_err();
        assert_eq!(p.status, StatusCode::PAYLOAD_TOO_LARGE);
        let (p, _) = read(data[1..].to_vec()).await.unwrap_err();
        assert_eq!((p.status, p.slug), (StatusCode::BAD_REQUEST, "upload-mismatch"));
        let mut other = data.clone();
        other[0] = b'H';
        let (p, _) = read(other).await.unwrap_err();
        assert!(p.detail.contains("SHA-256"), "{}", p.detail);
        assert_eq!(memory.free_kib() as u64, limits.memory / 1024, "every read gave its memory back");
    }

    /// A body whose pieces are sent through a channel, at the test's pace.
    fn channel_body() -> (tokio::sync::mpsc::Sender<Vec<u8>>, Body) {
        let (tx, rx) = tokio::sync::mpsc::channel::<Vec<u8>>(4);
        let stream = futures_util::stream::unfold(rx, |mut rx| async move {
            let piece = rx.recv().await?;
            Some((Ok::<_, std::convert::Infallible>(axum::body::Bytes::from(piece)), rx))
        });
        (tx, Body::from_stream(stream))
    }

    /// Limits scaled down so the pace is measured in a fraction of a second.
    fn quick(min_rate: u64) -> UploadLimits {
        UploadLimits {
            min_rate,
            first_byte: Duration::from_millis(300),
            rate_allowance: Duration::from_millis(200),
            ..UploadLimits::default()
        }
    }

    #[tokio::test]
    async fn a_body_whose_first_byte_never_comes_is_cut_off_after_the_first_byte_wait() {
        let limits = quick(1024);
        let memory = UploadMemory::new(limits);
        let object = object_of(&[0; 4096]);
        let (_tx, body) = channel_body();
        let started = Instant::now();
        let (p, _) = read_exactly(body, &object, &limits, &mut admission(&memory, 4096)).await.unwrap_err();
        assert_eq!((p.status, p.slug), (StatusCode::REQUEST_TIMEOUT, "upload-too-slow"));
        assert!(p.detail.contains("no byte"), "{}", p.detail);
        let took = started.elapsed();
        assert!(took >= Duration::from_millis(300) && took < Duration::from_secs(3), "{took:?}");
    }

    #[tokio::test]
    async fn a_body_falling_behind_the_minimum_rate_from_its_first_byte_is_cut_off() {
        // 10 KiB a second wanted; 1 KiB every 200 ms (5 KiB a second) sent.
        let limits = quick(10 << 10);
        let memory = UploadMemory::new(limits);
        let data = vec![7u8; 64 << 10];
        let object = object_of(&data);
        let (tx, body) = channel_body();
        let sender = tokio::spawn(async move {
            // Late to start, within the first-byte wait.
            tokio::time::sleep(Duration::from_millis(200)).await;
            for piece in data.chunks(1024) {
                if tx.send(piece.to_vec()).await.is_err() {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        });
        let mut admitted = admission(&memory, object.bytes);
        let started = Instant::now();
        let (p, _) = read_exactly(body, &object, &limits, &mut admitted).await.unwrap_err();
        assert_eq!((p.status, p.slug), (StatusCode::REQUEST_TIMEOUT, "upload-too-slow"));
        assert!(p.detail.contains("10240 bytes a second"), "{}", p.detail);
        // Behind after about half a second, holding what had come: a few KiB of the 64.
        assert!(admitted.held_kib() < 16, "held {} KiB", admitted.held_kib());
        assert!(started.elapsed() < Duration::from_secs(5), "{:?}", started.elapsed());
        sender.abort();
    }

    #[tokio::test]
    async fn a_body_at_the_minimum_rate_arrives_whole_however_long_it_takes() {
        // 10 KiB a second wanted; 4 KiB every 200 ms (20 KiB a second) sent, for about 2 s.
        let limits = quick(10 << 10);
        let memory = UploadMemory::new(limits);
        let data = vec![9u8; 40 << 10];
        let object = object_of(&data);
        let (tx, body) = channel_body();
        let pieces = data.clone();
        tokio::spawn(async move {
            for piece in pieces.chunks(4 << 10) {
                tx.send(piece.to_vec()).await.unwrap();
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        });
        let got = read_exactly(body, &object, &limits, &mut admission(&memory, object.bytes)).await.unwrap();
        assert_eq!(got, data);
    }
}
