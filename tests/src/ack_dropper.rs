//! A TCP proxy in front of a Kafka broker that loses acknowledgements: it forwards every
//! request, and when told to, drops the connection instead of forwarding a Produce response.
//! The broker has appended that batch; the producer never hears so and sends it again. An
//! idempotent producer's retry carries the same producer id and sequence numbers, so a broker
//! that checks them keeps one copy.
//!
//! Kafka frames are a 4-byte big-endian length and a body. A request body starts with the API
//! key (i16), its version (i16) and a correlation id (i32); a response body starts with the
//! correlation id, which is how the proxy knows which responses answer Produce requests.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};

const PRODUCE: i16 = 0;

#[derive(Default)]
struct Counters {
    /// Drop every n-th Produce response (0: forward them all)…
    drop_every: AtomicU64,
    /// …until this many were dropped.
    drop_at_most: AtomicU64,
    produce_responses: AtomicU64,
    dropped: AtomicU64,
}

pub struct AckDropper {
    pub port: u16,
    counters: Arc<Counters>,
    accept: tokio::task::JoinHandle<()>,
}

impl AckDropper {
    /// Listens on `port` (127.0.0.1) and forwards to the broker on `upstream`.
    pub async fn start(port: u16, upstream: u16) -> Self {
        let listener = TcpListener::bind(("127.0.0.1", port)).await.unwrap();
        let counters = Arc::new(Counters::default());
        let accept = {
            let counters = counters.clone();
            tokio::spawn(async move {
                while let Ok((client, _)) = listener.accept().await {
                    let counters = counters.clone();
                    tokio::spawn(async move {
                        if let Ok(broker) = TcpStream::connect(("127.0.0.1", upstream)).await {
                            relay(client, broker, counters).await;
                        }
                    });
                }
            })
        };
        Self { port, counters, accept }
    }

    /// From now on, drops the connection in place of every `n`-th Produce response, until
    /// `at_most` were dropped in all; `n` = 0 stops.
    pub fn drop_every(&self, n: u64, at_most: u64) {
        self.counters.drop_at_most.store(at_most, Ordering::SeqCst);
        self.counters.drop_every.store(n, Ordering::SeqCst);
    }

    /// Produce responses dropped so far.
    pub fn dropped(&self) -> u64 {
        self.counters.dropped.load(Ordering::SeqCst)
    }
}

impl Drop for AckDropper {
    fn drop(&mut self) {
        self.accept.abort();
    }
}

/// Relays one connection until either side closes or a Produce response is dropped.
async fn relay(client: TcpStream, broker: TcpStream, counters: Arc<Counters>) {
    let _ = (client.set_nodelay(true), broker.set_nodelay(true));
    let (client_rx, client_tx) = client.into_split();
    let (broker_rx, broker_tx) = broker.into_split();
    let in_flight: Arc<Mutex<HashMap<i32, i16>>> = Arc::default();
    tokio::select! {
        _ = requests(client_rx, broker_tx, in_flight.clone()) => {}
        _ = responses(broker_rx, client_tx, in_flight, counters) => {}
    }
}

async fn read_frame(rx: &mut OwnedReadHalf) -> Option<Vec<u8>> {
    let len = rx.read_i32().await.ok()?;
    let mut frame = len.to_be_bytes().to_vec();
    frame.resize(4 + usize::try_from(len).ok()?, 0);
    rx.read_exact(&mut frame[4..]).await.ok()?;
    Some(frame)
}

async fn requests(mut rx: OwnedReadHalf, mut tx: OwnedWriteHalf, in_flight: Arc<Mutex<HashMap<i32, i16>>>) {
    while let Some(frame) = read_frame(&mut rx).await {
        if frame.len() >= 12 {
            let api_key = i16::from_be_bytes([frame[4], frame[5]]);
            let correlation = i32::from_be_bytes([frame[8], frame[9], frame[10], frame[11]]);
            in_flight.lock().unwrap().insert(correlation, api_key);
        }
        if tx.write_all(&frame).await.is_err() {
            return;
        }
    }
}

async fn responses(
    mut rx: OwnedReadHalf,
    mut tx: OwnedWriteHalf,
    in_flight: Arc<Mutex<HashMap<i32, i16>>>,
    counters: Arc<Counters>,
) {
    while let Some(frame) = read_frame(&mut rx).await {
        if frame.len() >= 8 {
            let correlation = i32::from_be_bytes([frame[4], frame[5], frame[6], frame[7]]);
            let api_key = in_flight.lock().unwrap().remove(&correlation);
            if api_key == Some(PRODUCE) {
                let n = counters.produce_responses.fetch_add(1, Ordering::SeqCst) + 1;
                let every = counters.drop_every.load(Ordering::SeqCst);
                if every > 0
                    && n.is_multiple_of(every)
                    && counters.dropped.load(Ordering::SeqCst) < counters.drop_at_most.load(Ordering::SeqCst)
                {
                    counters.dropped.fetch_add(1, Ordering::SeqCst);
                    return; // both halves close: the acknowledgement is lost
                }
            }
        }
        if tx.write_all(&frame).await.is_err() {
            return;
        }
    }
}
