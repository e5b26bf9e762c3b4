//! Property tests: no user name, however hostile, expands outside the template's
//! directory.

use std::path::{Component, Path};

use maildex_config::{ConfigError, PathTemplate};
use proptest::prelude::*;

fn templates() -> Vec<PathTemplate> {
    [
        "/var/mail/%d/%n/Maildir",
        "/srv/m/%u",
        "/i/%d-%n/x",
        "rel/%n%d",
    ]
    .iter()
    .map(|t| PathTemplate::new(t, Path::new("/base")).unwrap())
    .collect()
}

fn check(user: &str) {
    for t in templates() {
        match t.expand(user) {
            Ok(p) => {
                let rest = p.strip_prefix(t.fixed_prefix()).expect("under the prefix");
                assert!(!rest.as_os_str().is_empty(), "{user:?} -> {}", p.display());
                assert!(
                    rest.components().all(|c| matches!(c, Component::Normal(_))),
                    "{user:?} -> {}",
                    p.display()
                );
            }
            Err(ConfigError::BadUserName { .. }) => {}
            Err(e) => panic!("{user:?}: unexpected {e}"),
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn arbitrary_names_stay_inside(user in ".{0,40}") {
        check(&user);
    }

    #[test]
    fn path_like_names_stay_inside(
        parts in prop::collection::vec(
            prop::sample::select(vec!["..", ".", "/", "@", "a", "%", "%%", "\0", "\n", "\\", "é"]),
            0..6,
        )
    ) {
        check(&parts.concat());
    }

    #[test]
    fn ordinary_addresses_are_accepted(local in "[a-z0-9][a-z0-9.+_-]{0,15}", domain in "[a-z0-9][a-z0-9-]{0,10}\\.[a-z]{2,6}") {
        prop_assume!(!local.contains(".."));
        let user = format!("{local}@{domain}");
        for t in templates() {
            prop_assert!(t.expand(&user).is_ok(), "{}", user);
        }
    }
}

#[test]
fn template_new_rejects_bad_templates() {
    assert!(matches!(
        PathTemplate::new("/m/%q", Path::new("/")),
        Err(ConfigError::Invalid { .. })
    ));
    assert_eq!(
        PathTemplate::new("m/%n", Path::new("/b"))
            .unwrap()
            .expand("X")
            .unwrap(),
        Path::new("/b/m/x")
    );
}
