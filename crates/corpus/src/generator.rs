//! The public generators: a stateful per-mailbox [`Generator`] and the one-shot
//! [`message`] function for benches that need mail on the fly (LMTP, APPEND).

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::date::EPOCH_START;
use crate::message::{compose, Generated, Role, State};

/// A stateful generator of one mailbox's mail: replies continue earlier threads (real
/// In-Reply-To/References), correspondents recur, and delivery times increase.
pub struct Generator<R: Rng = ChaCha8Rng> {
    rng: R,
    state: State,
}

impl Generator<ChaCha8Rng> {
    /// A generator for the mailbox of user `index` (0-based, see
    /// [`user_address`](crate::user_address)) seeded from `seed`; each user gets its own
    /// ChaCha8 stream so users do not depend on one another.
    pub fn for_user(seed: u64, index: usize, scale: f64) -> Self {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        rng.set_stream(index as u64 + 1);
        let owner = crate::user_address(index);
        Self::with_rng(rng, &owner, scale)
    }
}

impl<R: Rng> Generator<R> {
    /// A generator drawing from `rng`, writing to (and as) `owner`.
    pub fn with_rng(mut rng: R, owner: &str, scale: f64) -> Self {
        let state = State::new(&mut rng, owner, scale);
        Generator { rng, state }
    }

    /// Sets the mean time between messages in seconds (default one hour).
    pub fn set_mean_interval(&mut self, secs: f64) {
        self.state.set_mean_gap(secs);
    }

    /// The mailbox owner's address.
    pub fn owner(&self) -> &str {
        self.state.owner()
    }

    /// Generates the next message meant for `role`.
    pub fn next_message(&mut self, role: Role) -> Generated {
        compose(&mut self.state, &mut self.rng, role)
    }
}

/// Generates one incoming message (a [`Role::Inbox`] mix) for `user0001@example.org`,
/// stateless: replies carry invented References. `i` numbers the message in a stream and
/// sets its date (one hour apart from 2022-01-03); `scale` as in [`Spec::size_scale`](crate::Spec).
pub fn message(rng: &mut impl Rng, i: usize, scale: f64) -> Vec<u8> {
    let mut st = State::new(rng, &crate::user_address(0), scale);
    st.set_clock(EPOCH_START + i as i64 * 3600);
    st.set_mean_gap(60.0);
    compose(&mut st, rng, Role::Inbox).bytes
}
