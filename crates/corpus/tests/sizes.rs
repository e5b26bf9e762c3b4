//! The size distribution of generated mail matches the documented one.

mod common;

use maildex_corpus::{message, Generator, Role};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

#[test]
fn message_sizes_are_realistic_at_scale_one() {
    let mut rng = ChaCha8Rng::seed_from_u64(2024);
    let mut sizes: Vec<usize> = (0..2000).map(|i| message(&mut rng, i, 1.0).len()).collect();
    sizes.sort_unstable();
    let p50 = common::quantile(&sizes, 0.5);
    let p99 = common::quantile(&sizes, 0.99);
    assert!((7_000..=14_000).contains(&p50), "median {p50}");
    assert!(p99 > 100_000, "p99 {p99}");
    let within = sizes
        .iter()
        .filter(|&&s| (1_000..=100_000).contains(&s))
        .count();
    assert!(
        within * 100 >= sizes.len() * 85,
        "{within} of 2000 within 1-100 kB"
    );
}

#[test]
fn mailbox_mix_sizes_are_realistic() {
    let roles = [
        Role::Inbox,
        Role::Inbox,
        Role::Inbox,
        Role::Sent,
        Role::List(0),
        Role::List(1),
        Role::Junk,
        Role::Meetings,
    ];
    let mut g = Generator::for_user(5, 0, 1.0);
    let mut sizes: Vec<usize> = (0..2000)
        .map(|i| g.next_message(roles[i % roles.len()]).bytes.len())
        .collect();
    sizes.sort_unstable();
    let p50 = common::quantile(&sizes, 0.5);
    assert!((7_000..=14_000).contains(&p50), "median {p50}");
    assert!(common::quantile(&sizes, 0.99) > 100_000);
    assert!(
        sizes[sizes.len() - 1] > 1_000_000,
        "max {}",
        sizes[sizes.len() - 1]
    );
}

#[test]
fn scale_shrinks_messages() {
    let sizes = |scale| {
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        let mut v: Vec<usize> = (0..1000)
            .map(|i| message(&mut rng, i, scale).len())
            .collect();
        v.sort_unstable();
        v
    };
    let (small, full) = (sizes(0.1), sizes(1.0));
    let total = |v: &[usize]| v.iter().sum::<usize>();
    // Header blocks are not scaled, so small messages shrink less than tenfold.
    assert!(
        total(&small) * 3 < total(&full),
        "{} vs {}",
        total(&small),
        total(&full)
    );
    assert!(common::quantile(&small, 0.5) * 10 < common::quantile(&full, 0.5) * 7);
    assert!(common::quantile(&small, 0.9) * 3 < common::quantile(&full, 0.9));
    let q = |v: &[usize]| [0.5, 0.9, 0.99].map(|p| common::quantile(v, p));
    assert!(
        common::quantile(&small, 0.99) * 3 < common::quantile(&full, 0.99),
        "{:?} vs {:?}",
        q(&small),
        q(&full)
    );
}
