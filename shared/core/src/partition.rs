//! Tenant → partition. Kafka's default partitioner for keyed records is
//! `toPositive(murmur2(key)) % partitions`; using the same function here means a tenant lands on
//! the same partition number in the embedded log and on a Kafka topic with the same count.

/// Murmur2 (32-bit, seed 0x9747b28c) exactly as Kafka's Java client computes it.
pub fn murmur2(data: &[u8]) -> u32 {
    const SEED: u32 = 0x9747_b28c;
    const M: u32 = 0x5bd1_e995;
    const R: u32 = 24;
    let len = data.len();
    let mut h = SEED ^ len as u32;
    let mut chunks = data.chunks_exact(4);
    for c in &mut chunks {
        let mut k = u32::from_le_bytes([c[0], c[1], c[2], c[3]]);
        k = k.wrapping_mul(M);
        k ^= k >> R;
        k = k.wrapping_mul(M);
        h = h.wrapping_mul(M);
        h ^= k;
    }
    let rest = chunks.remainder();
    if rest.len() >= 3 {
        h ^= (rest[2] as u32) << 16;
    }
    if rest.len() >= 2 {
        h ^= (rest[1] as u32) << 8;
    }
    if !rest.is_empty() {
        h ^= rest[0] as u32;
        h = h.wrapping_mul(M);
    }
    h ^= h >> 13;
    h = h.wrapping_mul(M);
    h ^= h >> 15;
    h
}

/// The partition a key belongs to among `partitions` (which must be at least 1).
pub fn partition_for(key: &str, partitions: u32) -> u32 {
    (murmur2(key.as_bytes()) & 0x7fff_ffff) % partitions.max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn murmur2_matches_kafkas_reference_values() {
        // Values from Kafka's UtilsTest.testMurmur2.
        assert_eq!(murmur2(b"21") as i32, -973932308);
        assert_eq!(murmur2(b"foobar") as i32, -790332482);
        assert_eq!(murmur2(b"a-little-bit-long-string") as i32, -985981536);
        assert_eq!(murmur2(b"a-little-bit-longer-string") as i32, -1486304829);
        assert_eq!(murmur2(b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8") as i32, -58897971);
        assert_eq!(murmur2(b"abc") as i32, 479470107);
    }

    #[test]
    fn a_tenant_always_maps_to_the_same_partition_within_range() {
        for t in ["acme", "globex", "initech", "x"] {
            let p = partition_for(t, 12);
            assert!(p < 12);
            assert_eq!(p, partition_for(t, 12));
        }
    }
}
