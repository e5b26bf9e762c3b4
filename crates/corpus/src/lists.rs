//! Mailing lists: the list header fields of RFC 2369 (List-Help, -Unsubscribe, -Subscribe,
//! -Post, -Owner, -Archive), List-Id (RFC 2919), Archived-At (RFC 5064), Precedence, and the
//! footers Mailman 2 appends.

use rand::Rng;

use crate::header::{hex, HeaderBlock};

/// A mailing list the generator delivers from, and the Maildir++ folder it is filed in
/// when [`Spec::folders`](crate::Spec) is set.
#[derive(Clone, Copy, Debug)]
pub struct MailingList {
    /// Local part of the list address (`rust-users`).
    pub local: &'static str,
    /// The list's host (`lists.example.net`).
    pub host: &'static str,
    /// The List-Id description phrase.
    pub description: &'static str,
    /// IMAP mailbox name of its folder, `.` separated (`Lists.rust`).
    pub folder: &'static str,
    /// Subject tag the list adds, if any.
    pub prefix: Option<&'static str>,
    /// Mailman 2 style (Sender/Errors-To, footer) rather than Mailman 3.
    pub mailman2: bool,
    /// A development list: patches are common.
    pub dev: bool,
}

pub(crate) type ListDef = MailingList;

/// The mailing lists of every generated mailbox.
pub const MAILING_LISTS: &[MailingList] = &[
    MailingList {
        local: "rust-users",
        host: "lists.example.net",
        description: "Rust users discussion",
        folder: "Lists.rust",
        prefix: Some("[rust-users]"),
        mailman2: false,
        dev: false,
    },
    MailingList {
        local: "dovecot",
        host: "dovecot.example",
        description: "Dovecot Mailing List",
        folder: "Lists.dovecot",
        prefix: None,
        mailman2: true,
        dev: true,
    },
];

pub(crate) const LISTS: &[MailingList] = MAILING_LISTS;

/// Appends the header fields the list server adds.
pub(crate) fn list_headers<R: Rng + ?Sized>(
    rng: &mut R,
    h: &mut HeaderBlock,
    l: &MailingList,
    message_id: &str,
) {
    let (local, host) = (l.local, l.host);
    if l.mailman2 {
        h.raw("X-BeenThere", &format!("{local}@{host}"));
        h.raw("X-Mailman-Version", "2.1.39");
        h.raw("Precedence", "list");
        h.raw("List-Id", &format!("{} <{local}.{host}>", l.description));
        h.raw("List-Unsubscribe", &format!("<https://{host}/mailman/options/{local}>,\n <mailto:{local}-request@{host}?subject=unsubscribe>"));
        h.raw(
            "List-Archive",
            &format!("<https://{host}/pipermail/{local}/>"),
        );
        h.raw("List-Post", &format!("<mailto:{local}@{host}>"));
        h.raw(
            "List-Help",
            &format!("<mailto:{local}-request@{host}?subject=help>"),
        );
        h.raw("List-Subscribe", &format!("<https://{host}/mailman/listinfo/{local}>,\n <mailto:{local}-request@{host}?subject=subscribe>"));
        h.raw("Errors-To", &format!("{local}-bounces@{host}"));
        h.raw("Sender", &format!("\"{local}\" <{local}-bounces@{host}>"));
    } else {
        let hash = hex(rng, 32).to_uppercase();
        h.raw("Message-ID-Hash", &hash);
        h.raw("X-Message-ID-Hash", &hash);
        h.raw("X-MailFrom", &format!("{local}-bounces@{host}"));
        h.folded(
            "X-Mailman-Rule-Misses",
            "dmarc-mitigation; no-senders; approved; emergency; loop; banned-address; member-moderation; nonmember-moderation; administrivia; implicit-dest; max-recipients; max-size; news-moderation; no-subject; digests; suspicious-header",
            " ",
        );
        h.raw("X-Mailman-Version", "3.3.9");
        h.raw("Precedence", "list");
        h.raw(
            "List-Id",
            &format!("\"{}\" <{local}.{host}>", l.description),
        );
        h.raw(
            "Archived-At",
            &format!("<https://{host}/archives/list/{local}@{host}/message/{hash}/>"),
        );
        h.raw(
            "List-Archive",
            &format!("<https://{host}/archives/list/{local}@{host}/>"),
        );
        h.raw(
            "List-Help",
            &format!("<mailto:{local}-request@{host}?subject=help>"),
        );
        h.raw("List-Owner", &format!("<mailto:{local}-owner@{host}>"));
        h.raw("List-Post", &format!("<mailto:{local}@{host}>"));
        h.raw("List-Subscribe", &format!("<mailto:{local}-join@{host}>"));
        h.raw(
            "List-Unsubscribe",
            &format!("<mailto:{local}-leave@{host}>"),
        );
        let _ = message_id;
    }
}

/// The footer Mailman 2 appends to every post (as text or as its own text/plain part).
pub(crate) fn footer(l: &MailingList) -> String {
    format!(
        "_______________________________________________\n{} mailing list\n{}@{}\nhttps://{}/mailman/listinfo/{}\n",
        l.local, l.local, l.host, l.host, l.local
    )
}
