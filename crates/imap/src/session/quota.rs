//! QUOTA (RFC 9208): GETQUOTAROOT, GETQUOTA and SETQUOTA.
//!
//! A user has at most one quota root, named as Dovecot names its default one
//! (`"User quota"`), over every mailbox, with one resource: STORAGE, the limit of the users
//! file's `quota_rule` (or `[storage] quota`) against the bytes the index counts for the
//! user's mailboxes (the figure LMTP and APPEND enforce). A user without a limit has no
//! quota root. Limits are the directory's, so SETQUOTA is refused.

use std::sync::Arc;

use maildex_accounts::StorageQuota;
use maildex_imap_proto::{encode, Mailbox, ResponseCode};
use maildex_store::UserStore;

use super::mailbox::imap_name;
use super::{blocking, CmdError, Done, Session};

/// The name of the one quota root.
const ROOT: &[u8] = b"User quota";

impl Session {
    /// The user's storage quota now, `None` without a limit.
    async fn storage_quota(&self) -> Result<Option<StorageQuota>, CmdError> {
        let user = self
            .state
            .authed()
            .map(|a| a.user.clone())
            .ok_or_else(|| CmdError::Bad("not logged in".into()))?;
        let accounts = Arc::clone(&self.shared.accounts);
        blocking(move || accounts.storage_quota(&user))
            .await?
            .map_err(CmdError::server)
    }

    /// `* QUOTA "User quota" (STORAGE used limit)`: RFC 9208 §5.1, STORAGE counts units
    /// of 1024 octets, both rounded up as Dovecot's quota plugin does.
    fn quota_response(&mut self, q: StorageQuota) {
        self.out.extend_from_slice(b"* QUOTA ");
        encode::astring(&mut self.out, ROOT);
        self.out.extend_from_slice(
            format!(
                " (STORAGE {} {})\r\n",
                q.used.div_ceil(1024),
                q.limit.div_ceil(1024)
            )
            .as_bytes(),
        );
    }

    /// GETQUOTAROOT (RFC 9208 §4.3): the mailbox's quota roots (`QUOTAROOT`), then each
    /// root's `QUOTA`. The mailbox must exist.
    pub(super) async fn get_quota_root(&mut self, mailbox: Mailbox) -> Result<Done, CmdError> {
        let name = imap_name(&mailbox)?;
        let store: Arc<UserStore> = self.store()?;
        if !blocking(move || store.mailbox_exists(&name)).await?? {
            return Err(CmdError::no(
                ResponseCode::NonExistent,
                "Mailbox doesn't exist.",
            ));
        }
        let quota = self.storage_quota().await?;
        self.out.extend_from_slice(b"* QUOTAROOT ");
        encode::mailbox(&mut self.out, &mailbox);
        if quota.is_some() {
            self.out.push(b' ');
            encode::astring(&mut self.out, ROOT);
        }
        self.out.extend_from_slice(b"\r\n");
        if let Some(q) = quota {
            self.quota_response(q);
        }
        self.refresh(true).await?;
        Ok(Done::ok("Getquotaroot completed."))
    }

    /// GETQUOTA (RFC 9208 §4.2): a root that does not exist is a tagged NO.
    pub(super) async fn get_quota(&mut self, root: &[u8]) -> Result<Done, CmdError> {
        let quota = self.storage_quota().await?;
        let Some(q) = quota.filter(|_| root == ROOT) else {
            return Err(CmdError::no(
                ResponseCode::NonExistent,
                "Quota root doesn't exist.",
            ));
        };
        self.quota_response(q);
        self.refresh(true).await?;
        Ok(Done::ok("Getquota completed."))
    }

    /// SETQUOTA (RFC 9208 §4.1): limits come from the user directory; without the
    /// QUOTASET capability a client has no right to change them.
    pub(super) fn set_quota(&mut self) -> Result<Done, CmdError> {
        Err(CmdError::no(
            ResponseCode::NoPerm,
            "Quota limits are set by the administrator.",
        ))
    }
}
