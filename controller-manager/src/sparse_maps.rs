//! Giving back what emptied maps hold.
//!
//! A `HashMap` keeps its largest capacity for good: after 20,000 objects came and went, the garbage
//! collector's graph and its informers' key sets kept some 13 MiB of empty buckets in a process that
//! started at a few MiB (issue 24's memory benchmark). Maps that follow the cluster's objects give the
//! room back once they are mostly empty. Shrinking to twice the length when a map is under a quarter
//! full keeps it amortised O(1): a map shrinks again only after losing half of what it then holds.

use std::collections::HashMap;
use std::hash::Hash;

/// Below this capacity a map is never shrunk (its buckets cost less than the work).
const MIN_CAPACITY: usize = 1024;

/// Shrinks `map` to twice its length when it is under a quarter full and large enough to matter.
pub(crate) fn release_unused_capacity<K: Eq + Hash, V>(map: &mut HashMap<K, V>) {
    if map.capacity() > MIN_CAPACITY && map.len() < map.capacity() / 4 {
        map.shrink_to((map.len() * 2).max(MIN_CAPACITY / 2));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mostly_empty_map_gives_its_room_back_and_a_full_one_keeps_it() {
        let mut map: HashMap<u32, [u8; 64]> = (0..20_000).map(|k| (k, [0; 64])).collect();
        let full = map.capacity();
        release_unused_capacity(&mut map);
        assert_eq!(map.capacity(), full, "a full map is left alone");
        for k in 100..20_000 {
            map.remove(&k);
            release_unused_capacity(&mut map);
        }
        assert_eq!(map.len(), 100);
        assert!(
            map.capacity() < full / 8,
            "capacity {} of {full} kept",
            map.capacity()
        );
        assert!(map.capacity() >= map.len());
    }

    #[test]
    fn small_maps_are_not_shrunk() {
        let mut map: HashMap<u32, u32> = (0..500).map(|k| (k, k)).collect();
        map.clear();
        let capacity = map.capacity();
        release_unused_capacity(&mut map);
        assert_eq!(map.capacity(), capacity);
    }
}
