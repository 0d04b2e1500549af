//! Rendezvous (highest random weight) hashing: each key goes to the address
//! with the highest score for it, so keys stay put and only the keys of an
//! address that leaves move.
//!
//! The hashes are fixed (FNV-1a and a SplitMix64 finaliser, no random seed), so
//! a key maps to the same address across restarts and across processes.

use std::net::{IpAddr, SocketAddr};

/// FNV-1a over `bytes`.
pub(crate) fn hash_bytes(bytes: &[u8]) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for &byte in bytes {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    hash
}

/// The key of a client IP; an IPv4-mapped IPv6 address hashes like its IPv4 form.
pub(crate) fn hash_ip(ip: IpAddr) -> u64 {
    match ip.to_canonical() {
        IpAddr::V4(v4) => hash_bytes(&v4.octets()),
        IpAddr::V6(v6) => hash_bytes(&v6.octets()),
    }
}

/// An address's seed: its IP and port.
pub(crate) fn seed(address: SocketAddr) -> u64 {
    let port = hash_bytes(&address.port().to_be_bytes());
    mix(hash_ip(address.ip()) ^ port.rotate_left(32))
}

/// SplitMix64's finaliser: spreads every input bit over the output.
pub(crate) fn mix(mut x: u64) -> u64 {
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// The score of `key` on an address of `seed` and `weight` (higher wins):
/// `-weight / ln(u)` with `u` uniform in (0, 1) from the hash, which gives each
/// address a share of keys proportional to its weight.
pub(crate) fn weighted_score(key: u64, seed: u64, weight: u32) -> f64 {
    let hash = mix(key ^ seed);
    // 53 random bits, shifted off 0 so ln() is finite and negative.
    let unit = ((hash >> 11) as f64 + 0.5) / (1u64 << 53) as f64;
    -f64::from(weight) / unit.ln()
}

/// The score when every weight is equal: the hash alone.
pub(crate) fn score(key: u64, seed: u64) -> u64 {
    mix(key ^ seed)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn mapped_ipv4_hashes_like_ipv4() {
        let v4: IpAddr = "10.1.2.3".parse().unwrap();
        let mapped: IpAddr = "::ffff:10.1.2.3".parse().unwrap();
        assert_eq!(hash_ip(v4), hash_ip(mapped));
    }

    #[test]
    fn weighted_scores_split_keys_by_weight() {
        let seeds = [
            seed("10.0.0.1:80".parse().unwrap()),
            seed("10.0.0.2:80".parse().unwrap()),
        ];
        let weights = [3, 1];
        let mut wins = [0u32; 2];
        for key in 0..10_000u64 {
            let key = hash_bytes(&key.to_le_bytes());
            let a = weighted_score(key, seeds[0], weights[0]);
            let b = weighted_score(key, seeds[1], weights[1]);
            wins[usize::from(b > a)] += 1;
        }
        // 3:1 within 2 %.
        assert!((7_300..=7_700).contains(&wins[0]), "{wins:?}");
    }
}
