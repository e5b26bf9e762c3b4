//! THREAD (RFC 5256 §4): ORDEREDSUBJECT, REFERENCES and Dovecot's REFS over the keys the
//! index stores, and the `* THREAD` answer. Pure functions over key records, no session:
//! the session loads the keys of the messages SEARCH's evaluator matched and asks
//! [`threads`].
//!
//! Where RFC 5256 leaves room, Dovecot 2.3 decides (its answers are compared with ours
//! in `tests/it/imap/dovecot_sort.rs`): siblings and threads are ordered by sent date
//! (INTERNALDATE when there is none), then UID; a duplicate Message-ID makes the later
//! message one without an ID; a reference that would close a loop is not made, and a
//! message whose earlier link conflicts with its own last reference loses that link.

use std::collections::HashMap;

use maildex_imap_proto::ThreadAlgorithm;
use maildex_store::{SortEntry, Uid};

/// A message as THREAD sees it.
#[derive(Clone, Copy, Debug)]
pub struct Msg<'a> {
    /// What the answer calls it: its sequence number, or its UID for UID THREAD.
    pub number: u32,
    /// Its keys (UID, dates, base subject, Message-ID, References).
    pub entry: &'a SortEntry,
}

impl Msg<'_> {
    /// RFC 5256 §4: siblings are sorted by sent date; ties by UID (Dovecot).
    fn sort_key(&self) -> (i64, Uid) {
        (self.entry.date(), self.entry.uid)
    }
}

/// One node of a thread: a message (`None` for a dummy that holds siblings together) and
/// its children in order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Node {
    /// The message's number; `None` for a dummy.
    pub number: Option<u32>,
    /// Its children, in order.
    pub children: Vec<Node>,
}

impl Node {
    fn leaf(number: u32) -> Node {
        Node {
            number: Some(number),
            children: Vec::new(),
        }
    }
}

/// THREAD=ORDEREDSUBJECT (RFC 5256 §4): messages sorted by base subject, then sent date
/// (then sequence); each run of one base subject is a thread whose first message is the
/// parent of all the others; threads ordered by their first message's sent date. `msgs`
/// are in sequence order.
pub fn ordered_subject(msgs: &[Msg<'_>]) -> Vec<Node> {
    let mut sorted: Vec<&Msg<'_>> = msgs.iter().collect();
    sorted.sort_by(|a, b| {
        (a.entry.keys.subject.as_str(), a.entry.date(), a.entry.uid).cmp(&(
            b.entry.keys.subject.as_str(),
            b.entry.date(),
            b.entry.uid,
        ))
    });
    let mut threads: Vec<((i64, u32), Node)> = Vec::new();
    let mut prev: Option<&str> = None;
    for m in sorted {
        let subject = m.entry.keys.subject.as_str();
        match threads.last_mut() {
            Some((_, parent)) if prev == Some(subject) => {
                parent.children.push(Node::leaf(m.number))
            }
            _ => threads.push(((m.entry.date(), m.number), Node::leaf(m.number))),
        }
        prev = Some(subject);
    }
    threads.sort_by_key(|(k, _)| *k);
    threads.into_iter().map(|(_, n)| n).collect()
}

/// A container of the REFERENCES algorithm: a message, or a dummy for a Message-ID that
/// is referenced but not among the messages.
#[derive(Default)]
struct Container {
    msg: Option<usize>,
    parent: Option<usize>,
}

/// A root of the thread forest while steps (4)-(5) run.
#[derive(Clone)]
struct Root {
    /// Its container; a root made in step (5) gets a new one.
    node: usize,
    dummy: bool,
    ignore: bool,
    /// Sort key: its own message's, or (a dummy) its first child's.
    key: (i64, Uid),
    /// Step (5)(B): the root this one is to be merged with, by index into the roots.
    merge_into: Option<usize>,
    reply_or_forward: bool,
}

struct Forest<'m, 'a> {
    msgs: &'m [Msg<'a>],
    nodes: Vec<Container>,
    /// Children of each container after dummies below the roots are dropped, unsorted.
    children: Vec<Vec<usize>>,
}

impl Forest<'_, '_> {
    fn key(&self, node: usize) -> (i64, Uid) {
        self.nodes[node]
            .msg
            .map_or((0, Uid(0)), |m| self.msgs[m].sort_key())
    }

    fn sorted_children(&self, node: usize) -> Vec<usize> {
        let mut c = self.children[node].clone();
        c.sort_by_key(|&n| self.key(n));
        c
    }

    /// Whether `ancestor` is `node` or above it.
    fn has_ancestor(&self, mut node: usize, ancestor: usize) -> bool {
        loop {
            if node == ancestor {
                return true;
            }
            match self.nodes[node].parent {
                Some(p) => node = p,
                None => return false,
            }
        }
    }

    /// RFC 5256 §4 (1)(A): link `child` under `parent` unless that makes a loop or the
    /// child already has a parent.
    fn link(&mut self, parent: usize, child: usize) {
        if self.has_ancestor(parent, child) {
            return;
        }
        if self.nodes[child].parent.is_none() {
            self.nodes[child].parent = Some(parent);
        }
    }

    fn tree(&self, node: usize) -> Node {
        Node {
            number: self.nodes[node].msg.map(|m| self.msgs[m].number),
            children: self
                .sorted_children(node)
                .into_iter()
                .map(|c| self.tree(c))
                .collect(),
        }
    }
}

/// The threads of `msgs` (in sequence order) by `algorithm`; `all` is every message of
/// the mailbox when `msgs` are a search's matches (REFS orders tied threads by it), `None`
/// when `msgs` are all of them.
pub fn threads(algorithm: ThreadAlgorithm, msgs: &[Msg<'_>], all: Option<&[Msg<'_>]>) -> Vec<Node> {
    match algorithm {
        ThreadAlgorithm::OrderedSubject => ordered_subject(msgs),
        ThreadAlgorithm::References => references(msgs),
        ThreadAlgorithm::Refs => refs(msgs, all.unwrap_or(msgs)),
    }
}

/// Steps (1)-(3) of REFERENCES (RFC 5256 §4), shared with REFS: the containers linked by
/// Message-ID and References, and the roots, in container order. `msgs` are in sequence
/// (UID) order.
fn linked<'m, 'a>(msgs: &'m [Msg<'a>]) -> (Forest<'m, 'a>, Vec<Root>, HashMap<&'a str, usize>) {
    let mut f = Forest {
        msgs,
        nodes: Vec::with_capacity(msgs.len() * 2),
        children: Vec::new(),
    };
    let mut ids: HashMap<&'a str, usize> = HashMap::with_capacity(msgs.len() * 2);
    fn container<'k>(
        f: &mut Forest<'_, '_>,
        ids: &mut HashMap<&'k str, usize>,
        id: &'k str,
    ) -> usize {
        *ids.entry(id).or_insert_with(|| {
            f.nodes.push(Container::default());
            f.nodes.len() - 1
        })
    }
    // (1) the containers and their links
    for (i, m) in msgs.iter().enumerate() {
        let keys = &m.entry.keys;
        let own = match keys.message_id.as_deref() {
            Some(id) => {
                let c = container(&mut f, &mut ids, id);
                if f.nodes[c].msg.is_none() {
                    f.nodes[c].msg = Some(i);
                    c
                } else {
                    // a duplicate Message-ID: the later message is one without an ID
                    f.nodes.push(Container {
                        msg: Some(i),
                        parent: None,
                    });
                    f.nodes.len() - 1
                }
            }
            None => {
                f.nodes.push(Container {
                    msg: Some(i),
                    parent: None,
                });
                f.nodes.len() - 1
            }
        };
        let mut last = None;
        for r in &keys.references {
            let c = container(&mut f, &mut ids, r);
            if let Some(p) = last {
                f.link(p, c);
            }
            last = Some(c);
        }
        // (1)(B): the message's own parent is its last reference; a conflicting earlier
        // link (made by another message's References) is broken
        if f.nodes[own].parent.is_some() && f.nodes[own].parent != last {
            f.nodes[own].parent = None;
        }
        if let Some(p) = last {
            f.link(p, own);
        }
    }
    // (2) the roots; (3) a dummy below a root gives its children to its nearest real
    // ancestor (or the root dummy above it)
    f.children = vec![Vec::new(); f.nodes.len()];
    let mut roots: Vec<Root> = Vec::new();
    for n in 0..f.nodes.len() {
        match f.nodes[n].parent {
            None => roots.push(Root {
                node: n,
                dummy: f.nodes[n].msg.is_none(),
                ignore: false,
                key: (0, Uid(0)),
                merge_into: None,
                reply_or_forward: false,
            }),
            Some(_) if f.nodes[n].msg.is_none() => {}
            Some(mut p) => {
                while f.nodes[p].msg.is_none() {
                    match f.nodes[p].parent {
                        Some(up) => p = up,
                        None => break,
                    }
                }
                f.children[p].push(n);
            }
        }
    }
    (f, roots, ids)
}

/// THREAD=REFERENCES (RFC 5256 §4). `msgs` are in sequence (UID) order.
pub fn references(msgs: &[Msg<'_>]) -> Vec<Node> {
    let (mut f, mut roots, _) = linked(msgs);
    // (4) sort the roots (a root dummy with one child is replaced by it)
    sort_roots(&mut f, &mut roots);
    // (5)(A)-(B): the subject table, walked in root order
    let mut table: HashMap<&str, usize> = HashMap::new();
    for i in 0..roots.len() {
        if roots[i].ignore {
            continue;
        }
        let node = if roots[i].dummy {
            f.sorted_children(roots[i].node)[0]
        } else {
            roots[i].node
        };
        let Some(m) = f.nodes[node].msg else { continue };
        let keys = &msgs[m].entry.keys;
        if keys.subject.is_empty() {
            continue;
        }
        let rf = keys.reply_or_forward;
        match table.get(keys.subject.as_str()).copied() {
            None => {
                table.insert(keys.subject.as_str(), i);
            }
            Some(t) => {
                // the current root replaces the table's if that is no dummy and the
                // current one is a dummy, or the table's is a reply and this one is not
                if !roots[t].dummy && (roots[i].dummy || (roots[t].reply_or_forward && !rf)) {
                    roots[t].merge_into = Some(i);
                    table.insert(keys.subject.as_str(), i);
                } else {
                    roots[i].merge_into = Some(t);
                }
            }
        }
        roots[i].reply_or_forward = rf;
    }
    // (5)(C): merge the threads of one subject
    let count = roots.len();
    let mut changed = false;
    for i in 0..count {
        if roots[i].merge_into.is_none() || roots[i].ignore {
            continue;
        }
        changed = true;
        let mut top = i;
        while let Some(up) = roots[top].merge_into {
            top = up;
        }
        let (cur, into) = (roots[i].node, roots[top].node);
        if roots[i].dummy {
            // both dummies: the children of both become siblings
            let moved = std::mem::take(&mut f.children[cur]);
            f.children[into].extend(moved);
            roots[i].ignore = true;
        } else if roots[top].dummy || (roots[i].reply_or_forward && !roots[top].reply_or_forward) {
            f.children[into].push(cur);
            roots[i].ignore = true;
        } else {
            // a new dummy holds both
            f.nodes.push(Container::default());
            f.children.push(vec![into, cur]);
            let dummy = f.nodes.len() - 1;
            roots[top].merge_into = Some(roots.len());
            roots[top].ignore = true;
            roots[i].ignore = true;
            roots.push(Root {
                node: dummy,
                dummy: true,
                ignore: false,
                key: (0, Uid(0)),
                merge_into: None,
                reply_or_forward: false,
            });
        }
    }
    if changed {
        sort_roots(&mut f, &mut roots);
    }
    roots
        .iter()
        .filter(|r| !r.ignore)
        .map(|r| f.tree(r.node))
        .filter(|n| n.number.is_some() || !n.children.is_empty())
        .collect()
}

/// THREAD=REFS, as Dovecot 2.3 has it (`sort_root_nodes_ref2`): the threads of
/// REFERENCES' steps (1)-(3) with no merging by subject, each thread ordered by the
/// latest sent date (INTERNALDATE when there is none) of any message in it, then by its
/// root's UID, a dummy root counting as UID 0. Dummy roots that tie keep the order in
/// which their Message-IDs first occur in the mailbox (`all`, every message in UID order:
/// its Message-ID, then its References), which is the order of Dovecot's thread index.
/// A root dummy keeps its place even with one child (no deferred step (3)), and children
/// are ordered as in REFERENCES. `msgs` are in sequence (UID) order.
pub fn refs(msgs: &[Msg<'_>], all: &[Msg<'_>]) -> Vec<Node> {
    let (f, roots, ids) = linked(msgs);
    let mut latest: HashMap<usize, i64> = HashMap::with_capacity(roots.len());
    for (n, c) in f.nodes.iter().enumerate() {
        let Some(m) = c.msg else { continue };
        let mut top = n;
        while let Some(p) = f.nodes[top].parent {
            top = p;
        }
        let date = msgs[m].entry.date();
        latest
            .entry(top)
            .and_modify(|d| *d = (*d).max(date))
            .or_insert(date);
    }
    // the dummy roots' Message-IDs, ranked by their first occurrence in the mailbox
    let mut dummy_rank: HashMap<usize, usize> = ids
        .iter()
        .filter(|&(_, &c)| f.nodes[c].msg.is_none() && f.nodes[c].parent.is_none())
        .map(|(_, &c)| (c, usize::MAX))
        .collect();
    if !dummy_rank.is_empty() {
        let mut rank = 0;
        for m in all {
            let keys = &m.entry.keys;
            for id in keys.message_id.iter().chain(&keys.references) {
                if let Some(&c) = ids.get(id.as_str()) {
                    if let Some(r) = dummy_rank.get_mut(&c) {
                        if *r == usize::MAX {
                            *r = rank;
                        }
                    }
                }
                rank += 1;
            }
        }
    }
    let mut order: Vec<(i64, Uid, usize, usize)> = roots
        .iter()
        .map(|r| {
            let uid = f.nodes[r.node].msg.map_or(Uid(0), |m| msgs[m].entry.uid);
            let tie = dummy_rank.get(&r.node).copied().unwrap_or(r.node);
            (latest.get(&r.node).copied().unwrap_or(0), uid, tie, r.node)
        })
        .collect();
    order.sort_unstable_by_key(|&(date, uid, tie, _)| (date, uid, tie));
    order
        .into_iter()
        .map(|(_, _, _, node)| f.tree(node))
        .filter(|n| n.number.is_some() || !n.children.is_empty())
        .collect()
}

/// Step (4): a childless root dummy goes, one with a single child is replaced by it, and
/// the roots are sorted by their own (or their first child's) date and UID.
fn sort_roots(f: &mut Forest<'_, '_>, roots: &mut [Root]) {
    for r in roots.iter_mut().filter(|r| !r.ignore) {
        if r.dummy {
            let kids = f.sorted_children(r.node);
            match kids.len() {
                0 => r.ignore = true,
                1 => {
                    r.node = kids[0];
                    r.dummy = false;
                    r.key = f.key(kids[0]);
                }
                _ => r.key = f.key(kids[0]),
            }
        } else {
            r.key = f.key(r.node);
        }
    }
    // the roots keep their indexes (the merge links point at them): sort a permutation
    let mut order: Vec<usize> = (0..roots.len()).collect();
    order.sort_by_key(|&i| (roots[i].key, i));
    let sorted: Vec<Root> = order.iter().map(|&i| roots[i].clone()).collect();
    let mut new_index = vec![0; roots.len()];
    for (to, &from) in order.iter().enumerate() {
        new_index[from] = to;
    }
    for (slot, mut r) in roots.iter_mut().zip(sorted) {
        r.merge_into = r.merge_into.map(|m| new_index[m]);
        *slot = r;
    }
}

/// Writes `* THREAD (1 2)(3 (4)(5))\r\n` (RFC 5256 §4 `thread-data`), shaped as Dovecot
/// writes it: a lone child follows its parent after a space, several children each get
/// parentheses, a dummy has no number.
pub fn thread_response(out: &mut Vec<u8>, threads: &[Node]) {
    out.extend_from_slice(b"* THREAD");
    if !threads.is_empty() {
        out.push(b' ');
        level(out, threads, true);
    }
    out.extend_from_slice(b"\r\n");
}

fn level(out: &mut Vec<u8>, nodes: &[Node], root: bool) {
    if let ([only], false) = (nodes, root) {
        if let Some(n) = only.number {
            out.extend_from_slice(n.to_string().as_bytes());
        }
        if !only.children.is_empty() {
            out.push(b' ');
            level(out, &only.children, false);
        }
        return;
    }
    for n in nodes {
        out.push(b'(');
        if let Some(num) = n.number {
            out.extend_from_slice(num.to_string().as_bytes());
            if !n.children.is_empty() {
                out.push(b' ');
            }
        }
        level(out, &n.children, false);
        out.push(b')');
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use maildex_store::records::SortKeys;

    fn e(uid: u32, date: i64, subject: &str, id: &str, refs: &[&str]) -> SortEntry {
        let (base, rf) = maildex_store::text::base_subject(subject.as_bytes());
        SortEntry {
            uid: Uid(uid),
            internal_date: 1_000 + i64::from(uid),
            vsize: 0,
            keys: SortKeys {
                sent_date: (date != 0).then_some(date),
                subject: base,
                reply_or_forward: rf,
                message_id: (!id.is_empty()).then(|| id.to_owned()),
                references: refs.iter().map(|r| r.to_string()).collect(),
                ..Default::default()
            },
        }
    }

    fn wire(threads: &[Node]) -> String {
        let mut out = Vec::new();
        thread_response(&mut out, threads);
        String::from_utf8(out).unwrap()
    }

    fn msgs(entries: &[SortEntry]) -> Vec<Msg<'_>> {
        entries
            .iter()
            .map(|entry| Msg {
                number: entry.uid.get(),
                entry,
            })
            .collect()
    }

    #[test]
    fn ordered_subject_groups_by_base_subject_and_orders_threads_by_first_date() {
        let es = [
            e(1, 50, "b", "", &[]),
            e(2, 10, "Re: a", "", &[]),
            e(3, 60, "Re: b", "", &[]),
            e(4, 20, "a", "", &[]),
            e(5, 70, "b (fwd)", "", &[]),
            e(6, 5, "c", "", &[]),
        ];
        assert_eq!(
            wire(&ordered_subject(&msgs(&es))),
            "* THREAD (6)(2 4)(1 (3)(5))\r\n"
        );
        assert_eq!(wire(&ordered_subject(&[])), "* THREAD\r\n");
    }

    #[test]
    fn references_links_dummies_loops_duplicates_and_subjects() {
        let es = [
            // 1 and 2 reply to a missing <r>: a root dummy holds them
            e(1, 10, "Re: root", "a@x", &["r@x"]),
            e(2, 20, "Re: root", "b@x", &["r@x"]),
            // 3 -> 4 -> 5 chain, 5 names a missing middle message
            e(3, 30, "chain", "c@x", &[]),
            e(4, 40, "Re: chain", "d@x", &["c@x"]),
            e(5, 50, "Re: chain", "e@x", &["c@x", "m@x", "d@x"]),
            // a loop: 6 says its parent is 7, 7 says its parent is 6
            e(6, 60, "loop", "f@x", &["g@x"]),
            e(7, 70, "loop2", "g@x", &["f@x"]),
            // a duplicate Message-ID stands alone
            e(8, 80, "dup", "c@x", &[]),
            // same base subject, unrelated by references: joined under the non-reply
            e(9, 90, "Re: solo", "h@x", &[]),
            e(10, 95, "solo", "i@x", &[]),
        ];
        let t = references(&msgs(&es));
        assert_eq!(
            wire(&t),
            "* THREAD ((1)(2))(3 4 5)(7 6)(8)(10 9)\r\n",
            "{t:?}"
        );
    }

    #[test]
    fn refs_orders_threads_by_their_latest_message_without_subject_merging() {
        let es = [
            e(1, 10, "Re: root", "a@x", &["r@x"]),
            e(2, 20, "Re: root", "b@x", &["r@x"]),
            e(3, 30, "chain", "c@x", &[]),
            e(4, 90, "Re: chain", "d@x", &["c@x"]),
            e(5, 50, "solo", "e@x", &[]),
            e(6, 60, "Re: solo", "f@x", &[]),
        ];
        let t = refs(&msgs(&es), &msgs(&es));
        assert_eq!(wire(&t), "* THREAD ((1)(2))(5)(6)(3 4)\r\n", "{t:?}");
        // two dummy roots of one date: the Message-ID that occurs first in the mailbox
        // (here in a message the search did not match) goes first
        let all = [
            e(1, 10, "a", "a@x", &["y@x"]),
            e(2, 100, "b", "b@x", &["z@x"]),
            e(3, 100, "c", "c@x", &["y@x"]),
        ];
        let all_msgs = msgs(&all);
        let t = refs(&all_msgs[1..], &all_msgs);
        assert_eq!(wire(&t), "* THREAD (3)(2)\r\n", "{t:?}");
        let t = refs(&all_msgs[1..], &all_msgs[1..]);
        assert_eq!(wire(&t), "* THREAD (2)(3)\r\n", "{t:?}");
    }
}
