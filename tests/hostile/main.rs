//! Hostile clients (`cargo test -p maildex-tests --test hostile`): attacks on the daemon
//! running in this process, each measuring the process's peak memory (VmHWM, reset per
//! attack) and another client's latency. A binary of its own because those figures are
//! the whole process's: any other test running beside an attack would count as the
//! attack's. The tests here run one at a time (`support::hostile::serial`).

#[path = "../support/mod.rs"]
mod support;

mod clients;
mod floods;
mod searches;
mod sessions;
