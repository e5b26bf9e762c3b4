//! The hierarchy levels above subscribed names that LSUB and LIST (SUBSCRIBED
//! RECURSIVEMATCH) report (RFC 3501 §6.3.9, RFC 5258 §3.5), on the store's UTF-8 names.

use std::collections::HashSet;

/// Levels above subscribed names that are reported although not subscribed themselves:
/// each one `matches`, and has a subscribed descendant that does not match (so is not
/// listed itself). In subscription order, each once.
///
/// RFC 3501 §6.3.9: with `a.b` subscribed and `a` not, `LSUB "" %` returns `a` with
/// `\Noselect`. RFC 5258 §3.5: a parent is returned with CHILDINFO only if at least one
/// matching child is not also returned, so `LIST (SUBSCRIBED RECURSIVEMATCH) "" *`
/// returns `a.b` alone. Dovecot 2.3 answers both the same way.
pub(crate) fn unlisted_parents(
    subscribed: &[String],
    matches: impl Fn(&str) -> bool,
) -> Vec<String> {
    let all: HashSet<&str> = subscribed.iter().map(String::as_str).collect();
    let mut seen: HashSet<&str> = HashSet::new();
    let mut out = Vec::new();
    for name in subscribed.iter().filter(|n| !matches(n)) {
        let mut level = name.as_str();
        while let Some((parent, _)) = level.rsplit_once('.') {
            if !all.contains(parent) && matches(parent) && seen.insert(parent) {
                out.push(parent.to_string());
            }
            level = parent;
        }
    }
    out
}

/// Every level that has a subscribed name below it: a listed subscribed mailbox among
/// them carries CHILDINFO too (RFC 5258 §5 example 9 A1; Dovecot also with `*`). One pass
/// over the names, so a LIST costs no more than the subscriptions' length.
pub(crate) fn subscribed_parents(subscribed: &[String]) -> HashSet<&str> {
    let mut out = HashSet::new();
    for name in subscribed {
        let mut level = name.as_str();
        while let Some((parent, _)) = level.rsplit_once('.') {
            if !out.insert(parent) {
                break; // its own parents are in already
            }
            level = parent;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn subs(names: &[&str]) -> Vec<String> {
        names.iter().map(|s| s.to_string()).collect()
    }

    fn top_level(n: &str) -> bool {
        !n.contains('.')
    }

    #[test]
    fn a_level_is_reported_only_for_children_that_are_not_listed() {
        let s = subs(&["x", "x.y", "p.q", "p.q.r", "m.n"]);
        // `%`: p and m stand for their subscribed children; x is listed itself
        assert_eq!(unlisted_parents(&s, top_level), ["p", "m"]);
        // `*`: every child is listed, so no level is (Dovecot 2.3 answers the same)
        assert!(unlisted_parents(&s, |_| true).is_empty());
        // `p.%`: p.q is listed, p.q.r is not, but p.q is subscribed
        assert!(
            unlisted_parents(&s, |n| n.starts_with("p.") && n.matches('.').count() == 1).is_empty()
        );
        // (p p.q) with p.z.w subscribed too: p stands for p.z.w
        let s = subs(&["p.q", "p.z.w"]);
        assert_eq!(unlisted_parents(&s, |n| n == "p" || n == "p.q"), ["p"]);
        assert_eq!(
            unlisted_parents(&s, |n| n == "p" || n == "p.z"),
            ["p", "p.z"]
        );
    }

    #[test]
    fn subscribed_parents_are_whole_levels() {
        let s = subs(&["ab.c", "a", "x.y.z", "x.y"]);
        let p = subscribed_parents(&s);
        assert!(p.contains("ab") && p.contains("x") && p.contains("x.y"));
        assert!(!p.contains("a") && !p.contains("ab.c") && !p.contains("x.y.z"));
    }
}
